"""`babelrun bench-judge`: throughput per concurrency level through the audit's own call
pipeline, and what binds — concurrency, the rate limit, or nothing yet."""

import msgspec

from babelrun.app.benchjudge import Level, knee, levels, still_growing, verdict
from babelrun.app.cli import main
from babelrun.testing import FakeJudgeServer
from helpers import write_manifest


def _level(c, rate, rate_limited=0):
    return Level(c, 10, 0, rate_limited, 0, 1.0, rate, 0.0, None, None, None)


def test_levels_knee_and_growth():
    assert levels(64) == [1, 2, 4, 8, 16, 32, 64]
    assert levels(10) == [1, 2, 4, 8]
    assert knee([_level(1, 10), _level(2, 20), _level(4, 39), _level(8, 41)]) == 4
    assert knee([_level(1, 10), _level(2, 10.5)]) == 1
    assert still_growing([_level(1, 10), _level(2, 20), _level(4, 40)])
    assert not still_growing([_level(1, 10), _level(2, 20), _level(4, 21)])


def test_verdicts_name_what_binds():
    grow = [_level(1, 10), _level(2, 20), _level(4, 40)]
    assert verdict("j", grow, None)[:2] == (4, "top_level")
    assert "still growing" in verdict("j", grow, None)[3]
    flat = [_level(1, 10), _level(2, 20), _level(4, 21), _level(8, 21)]
    assert verdict("j", flat, None)[:2] == (2, "concurrency")  # 20 is within 10 % of 21
    limited = [_level(1, 10), _level(2, 19, rate_limited=5)]
    level, binding, observed, advice = verdict("j", limited, None)
    assert (binding, observed) == ("rate_limit", 1140.0) and "5 replies were 429" in advice


def _bench(tmp_path, capsys, judges, *extra):
    path = write_manifest(tmp_path, judges, corpus={"languages": ["en"], "references_per_language": 3})
    assert main(["bench-judge", str(path), "--json", *extra]) == 0
    return msgspec.json.decode(capsys.readouterr().out)


def test_manifest_rate_limit_is_reported_as_binding(tmp_path, capsys):
    # 50 ms a call: 20 calls/s per slot. The account allows 2,400/min = 40/s: two slots fill it.
    judge = {"name": "limited", "backend": "simulated", "rate_limit": {"rpm": 2400},
             "simulated": {"latency_ms": 50}}
    (result,) = _bench(tmp_path, capsys, [judge], "--seconds", "1", "--max-concurrency", "8")
    rates = {lv["concurrency"]: lv["calls_per_s"] for lv in result["levels"]}
    assert 15 < rates[1] < 21 and rates[2] > 1.6 * rates[1]
    assert max(rates.values()) <= 41  # the account's limit holds at every level
    assert result["binding"] == "rate_limit" and result["recommended"] == 2
    assert 2000 <= result["observed_rpm"] <= 2460
    assert max(rates) < 8  # climbing stopped once the limit held
    assert not (tmp_path / "run").exists()  # measuring writes no run directory


def test_manifest_concurrency_does_not_cap_the_levels(tmp_path, capsys):
    """The judge's pool is sized for the largest level, not for the manifest's
    ``concurrency: 2`` (which capped every level at ~37 calls/s before)."""
    with FakeJudgeServer(latency_s=0.05) as server:
        judge = {"name": "remote", "backend": "openai", "model": "m", "endpoint": server.url, "concurrency": 2}
        (result,) = _bench(tmp_path, capsys, [judge], "--seconds", "0.6", "--max-concurrency", "16")
    rates = {lv["concurrency"]: lv["calls_per_s"] for lv in result["levels"]}
    assert sorted(rates) == [1, 2, 4, 8, 16]
    assert rates[16] > 4 * rates[2]  # 16 calls in flight, not 2
    assert result["binding"] == "top_level" and result["recommended"] == 16


def test_server_rate_limit_reported_with_its_429s(tmp_path, capsys):
    with FakeJudgeServer(latency_s=0.01, rpm_limit=60, rpm_window_s=2.0) as server:  # 30 calls/s
        judge = {"name": "remote", "backend": "openai", "model": "m", "endpoint": server.url}
        (result,) = _bench(tmp_path, capsys, [judge], "--seconds", "1", "--max-concurrency", "64")
    last = result["levels"][-1]
    assert result["binding"] == "rate_limit"
    assert last["rate_limited"] > 0 and last["concurrency"] < 64  # stopped climbing at the limit
    assert "429" in result["advice"] and result["observed_rpm"] is not None


def test_identical_judges_get_identical_advice(tmp_path, capsys):
    with FakeJudgeServer(latency_s=0.02) as server:
        # Two names for one server; the models differ only in name (one judge_id each)
        judges = [{"name": n, "backend": "openai", "model": f"m-{n}", "endpoint": server.url} for n in ("a", "b")]
        a, b = _bench(tmp_path, capsys, judges, "--seconds", "0.4", "--max-concurrency", "8")
    assert (a["recommended"], a["binding"]) == (b["recommended"], b["binding"])


def test_bench_judge_rejects_unknown_judge(tmp_path, capsys):
    path = write_manifest(tmp_path, [{"name": "a", "backend": "simulated"}])
    assert main(["bench-judge", str(path), "--judge", "b"]) == 2
    assert "no judge named 'b'" in capsys.readouterr().err
