"""`babelrun bench-judge`: throughput per concurrency level through the audit's own call
pipeline, and what binds — concurrency, the rate limit, or nothing yet."""

import msgspec

from babelrun.app.benchverdict import Level, knee, levels, still_growing, verdict, window_count
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
    burst = [i * 0.05 for i in range(200)]  # 200 calls in 10 s, then 429s: never "1200/min"
    level, binding, observed, advice = verdict("j", limited, None, burst)
    assert (binding, observed) == ("rate_limit", 200.0) and "5 replies were 429" in advice
    assert "shorter than a 60 s window" in advice
    steady = [i * 0.5 for i in range(600)]  # 300 s at 120/min
    assert verdict("j", limited, None, steady)[2] == 120.0
    assert "in any 60 s window of 300 s" in verdict("j", limited, None, steady)[3]


def test_window_count_is_the_busiest_sliding_window():
    assert window_count([]) == 0
    assert window_count([0, 59.9, 60, 61, 119.95]) == 3  # (1, 61] holds 59.9, 60, 61
    assert window_count([5, 1, 3], window=2) == 1  # a window is half-open: 1 and 3 are 2 s apart
    assert window_count([5, 1, 3], window=2.5) == 2


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


def test_a_server_allowing_200_a_minute_is_reported_at_most_200(tmp_path, capsys):
    """The issue's case: 200 requests/min on a sliding 60 s window; a short bench used to
    scale its burst up to a minute (``rpm: 1242``, ``--seconds 2``: 2724)."""
    with FakeJudgeServer(rpm_limit=200) as server:
        judge = {"name": "remote", "backend": "openai", "model": "m", "endpoint": server.url, "retries": 1}
        (result,) = _bench(tmp_path, capsys, [judge], "--seconds", "2", "--max-concurrency", "64")
        admitted = server.snapshot()
    assert result["binding"] == "rate_limit"
    assert result["observed_rpm"] <= 200
    assert "shorter than a 60 s window" in result["advice"] and "rate_limit.rpm: " in result["advice"]
    assert result["observed_rpm"] == admitted["served_ok"] <= 200  # every call the server let through, no more


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
