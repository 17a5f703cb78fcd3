"""`babelrun bench-judge` finds where a judge's throughput stops growing."""

import msgspec

from babelrun.app.benchjudge import Level, knee, levels
from babelrun.app.cli import main
from helpers import write_manifest


def _level(c, rate):
    return Level(c, 10, 0, rate, 0.0, None, None, None)


def test_levels_and_knee():
    assert levels(64) == [1, 2, 4, 8, 16, 32, 64]
    assert levels(10) == [1, 2, 4, 8]
    assert knee([_level(1, 10), _level(2, 20), _level(4, 39), _level(8, 41)]) == 4
    assert knee([_level(1, 10), _level(2, 10.5)]) == 1
    assert knee([_level(1, 10), _level(2, 20), _level(4, 40)]) == 4  # still growing at the cap


def test_bench_judge_finds_the_rate_limit_knee(tmp_path, capsys):
    # 50 ms a call: 20 calls/s per slot. The account allows 2,400/min = 40/s: two slots fill it.
    judge = {"name": "limited", "backend": "simulated", "rate_limit": {"rpm": 2400},
             "simulated": {"latency_ms": 50}}
    path = write_manifest(tmp_path, [judge], corpus={"languages": ["en"], "references_per_language": 3})
    assert main(["bench-judge", str(path), "--sample", "32", "--max-concurrency", "8", "--json"]) == 0
    (result,) = msgspec.json.decode(capsys.readouterr().out)
    rates = {lv["concurrency"]: lv["calls_per_s"] for lv in result["levels"]}
    assert sorted(rates) == [1, 2, 4, 8]
    assert 15 < rates[1] < 21 and rates[2] > 1.6 * rates[1]
    assert max(rates.values()) <= 41  # the account's limit holds at every level
    assert result["recommended"] == 2
    assert all(lv["failed"] == 0 and lv["p50_ms"] >= 50 for lv in result["levels"])
    assert not (tmp_path / "run").exists()  # measuring writes no run directory


def test_bench_judge_rejects_unknown_judge(tmp_path, capsys):
    path = write_manifest(tmp_path, [{"name": "a", "backend": "simulated"}])
    assert main(["bench-judge", str(path), "--judge", "b"]) == 2
    assert "no judge named 'b'" in capsys.readouterr().err
