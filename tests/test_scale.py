"""The runner at scale: lock, lean done-set, rotation, compaction, limits, breaker, stats."""

import io
import subprocess
import sys

import anyio
import msgspec
import numpy as np
import pytest

import babelrun
from babelrun.app import audit as run
from babelrun.app.cli import main
from babelrun.engine import limits
from babelrun.engine.progress import Progress
from babelrun.judges.http import HttpJudge, ProviderError, duration
from babelrun.manifest import JudgeSpec, RateLimit
from babelrun.store import compact, log
from babelrun.store.done import DoneSet
from babelrun.testing import FakeJudgeServer
from helpers import ROOT, request, simulated, write_manifest


def _audit(path, **kw):
    return run.audit(babelrun.load_manifest(path), handle_signals=False,
                     progress=Progress(stream=io.StringIO(), interval=60), **kw)


def test_second_process_on_one_run_dir_is_refused(tmp_path, small_corpus):
    path = write_manifest(tmp_path, [simulated()], corpus=small_corpus)
    (tmp_path / "run").mkdir()
    with log.RunLock(tmp_path / "run"):
        other = subprocess.run([sys.executable, "-m", "babelrun", "audit", str(path)], cwd=ROOT,
                               capture_output=True, text=True, timeout=60)
    assert other.returncode == 1
    assert "is in use by babelrun pid" in other.stderr and "another output_dir" in other.stderr
    assert len(other.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "run" / "log").exists()
    # Once the holder is gone, the directory is free again (a killed holder frees it too).
    assert _audit(path).exit_code == 0


def test_done_set_holds_a_million_keys_in_tens_of_mb(tmp_path):
    rng = np.random.default_rng(0)
    ids = [f"{x:020x}" for x in rng.integers(0, 2**63, size=2000, dtype=np.uint64)]
    done = DoneSet.of(("j", i, "ref_first") for i in ids[:1000])
    assert all(("j", i, "ref_first") in done for i in ids[:1000])
    assert not any(("j", i, "pert_first") in done for i in ids[:1000])
    assert not any(("j", i, "ref_first") in done for i in ids[1000:])
    assert not any(("k", i, "ref_first") in done for i in ids[:1000])
    assert done.count("j", ids) == 1000 and done.count("k", ids) == 0
    assert ("j", "not-hex-id", "ref_first") in DoneSet.of([("j", "not-hex-id", "ref_first")])
    big = DoneSet({"j": rng.integers(0, 2**61, size=1_000_000, dtype=np.uint64)})
    assert len(big) > 999_000 and big.nbytes <= 10 * 2**20


def test_done_set_from_the_log_matches_the_records(tmp_path, small_corpus):
    path = write_manifest(tmp_path, [simulated(), simulated("sim2", invalid_rate=0.5)], corpus=small_corpus)
    _audit(path)
    records = list(log.read(tmp_path / "run"))
    done = DoneSet.from_log(tmp_path / "run")
    assert len(done) == len(records)
    assert all(r.key in done for r in records)
    other = msgspec.structs.replace(records[0], item_id="0" * 20)
    assert other.key not in done


def test_segments_rotate_and_merge_back(tmp_path, small_corpus):
    # A segment rotates between batches; a slow judge makes many small batches.
    judge = {**simulated(latency_ms=2), "concurrency": 2}
    path = write_manifest(tmp_path, [judge], corpus=small_corpus, log={"segment_mb": 0.01, "fsync": "batch"})
    result = _audit(path)
    segs = log.segments(tmp_path / "run")
    assert len(segs) > 3
    assert all(s.stat().st_size > 0 for s in segs)
    assert len(DoneSet.from_log(tmp_path / "run")) == result.planned_calls
    assert compact.load(tmp_path / "run").num_rows == result.planned_calls


def test_parquet_is_used_only_while_current(tmp_path, small_corpus):
    path = write_manifest(tmp_path, [simulated()], corpus=small_corpus)
    result = _audit(path)
    run_dir = tmp_path / "run"
    assert compact.is_current(run_dir)
    assert main(["compact", str(run_dir)]) == 0
    table = compact.load(run_dir)
    assert table.num_rows == result.planned_calls
    # A record appended after compaction makes the Parquet stale: the log is read instead.
    seg = log.segments(run_dir)[0]
    first = seg.read_bytes().split(b"\n")[0]
    rec = msgspec.json.decode(first, type=log.Record)
    extra = msgspec.structs.replace(rec, item_id="f" * 20)
    with seg.open("ab") as f:
        f.write(msgspec.json.encode(extra) + b"\n")
    assert not compact.is_current(run_dir)
    assert compact.load(run_dir).num_rows == result.planned_calls + 1


def test_counted_keeps_the_first_ok_record_per_key(tmp_path):
    base = dict(judge_id="j", item_id="i", order="ref_first", judge="J", kind="text", lang="en", ref_id="r",
                perturbation="p", severity=0.3, ref_len=5, pert_len=4)
    records = [
        log.Record(status="error", error_kind="timeout", **base),
        log.Record(status="ok", verdict="reference", raw="A", **base),
        log.Record(status="ok", verdict="perturbed", raw="B", **base),  # a duplicate from a merge
    ]
    table = compact.counted(compact.table(records))
    assert table.num_rows == 1 and table["raw"].to_pylist() == ["A"]


def test_token_bucket_settles_both_ways():
    async def go():
        bucket = limits.TokenLimiter(1000, 60)
        await bucket.acquire(500)
        assert bucket.settle(500, 200) == 0 and bucket._level == pytest.approx(200, abs=1)
        assert bucket.settle(200, 1500) == pytest.approx(500, abs=1)  # 300 taken now, 500 owed
        assert bucket._level == pytest.approx(1000, abs=1)
    anyio.run(go)


def test_judges_on_one_account_share_one_budget():
    a = JudgeSpec(name="a", backend="openai", model="m1", endpoint="http://h/v1", api_key_env="K",
                  rate_limit=RateLimit(rpm=100, tpm=5000))
    b = JudgeSpec(name="b", backend="openai", model="m2", endpoint="http://h/v1/", api_key_env="K",
                  rate_limit=RateLimit(rpm=60))
    c = JudgeSpec(name="c", backend="openai", model="m1", endpoint="http://h/v1", api_key_env="K2")
    accounts = limits.accounts([a, b, c])
    assert accounts["a"] is accounts["b"] and accounts["a"] is not accounts["c"]
    assert accounts["a"].rpm == 60 and accounts["a"].tpm == 5000
    assert accounts["c"].requests is None


def test_token_estimate_is_generous_for_non_latin_scripts():
    zh = [{"role": "user", "content": "长江全长约6300公里" * 10}]
    han = sum("\u4e00" <= ch <= "\u9fff" for ch in zh[0]["content"])
    assert limits.estimate_tokens(zh, 8) >= han + 8  # a Han character is often a whole token


def test_adaptive_gate_grows_and_halves():
    gate = limits.AdaptiveConcurrency(start=2, maximum=16, cooldown_s=0)
    for _ in range(40):
        gate.success()
    grown = gate.width
    assert 8 <= grown <= 16
    gate.pushback()
    assert gate.width == pytest.approx(grown / 2)
    for _ in range(10):
        gate.pushback()
    assert gate.width == 1


def test_rate_limit_headers_are_read():
    assert duration("6m0s") == 360 and duration("20ms") == pytest.approx(0.02)
    wait = HttpJudge.retry_after  # the default (OpenAI-style) reading of a provider's wait
    assert wait(None, 429, {"Retry-After": "2"}, ProviderError()) == 2
    assert wait(None, 429, {"x-ratelimit-reset-requests": "1.5s", "x-ratelimit-reset-tokens": "250ms"},
                ProviderError()) == 1.5


def test_breaker_stops_a_judge_whose_calls_keep_failing(tmp_path, small_corpus, capsys):
    with FakeJudgeServer(faults=[400] * 50) as server:
        judge = {"name": "bad", "backend": "openai", "model": "m", "endpoint": server.url,
                 "concurrency": 1, "max_consecutive_failures": 3}
        path = write_manifest(tmp_path, [judge, simulated()], corpus=small_corpus)
        code = main(["audit", str(path)])
        assert server.requests == 3
    err = capsys.readouterr().err
    assert code == 1
    assert "judge 'bad' stopped after 3 failed calls in a row (last: HTTP 400" in err
    stats = msgspec.json.decode((tmp_path / "run" / "stats.json").read_bytes())
    bad, sim = stats["judges"]
    assert bad["errors"] == {"rejected": 3} and bad["stopped"]
    assert sim["ok"] == sim["planned"] and sim["stopped"] is None


def test_stats_count_calls_retries_429s_latency_and_tokens(tmp_path, small_corpus, capsys):
    with FakeJudgeServer(faults=[429, 429, 503], retry_after=0.01) as server:
        judge = {"name": "r", "backend": "openai", "model": "m", "endpoint": server.url, "concurrency": 2}
        path = write_manifest(tmp_path, [judge], corpus=small_corpus)
        assert main(["audit", str(path)]) == 0
    out = capsys.readouterr().out
    assert "p50 ms" in out and "calls/s" in out
    stats = msgspec.json.decode((tmp_path / "run" / "stats.json").read_bytes())
    (j,) = stats["judges"]
    assert j["ok"] == j["planned"] == server.requests - 3
    assert j["calls"] == server.requests and j["retries"] == 3 and j["rate_limited"] == 2
    assert j["latency_ms"]["p50"] <= j["latency_ms"]["p95"] <= j["latency_ms"]["p99"]
    assert j["tokens_in"] > 0 and j["tokens_out"] == j["ok"]
    assert j["calls_per_s"] > 0


def test_progress_prints_plain_lines_when_not_a_terminal(tmp_path, small_corpus):
    path = write_manifest(tmp_path, [simulated(latency_ms=20), simulated("sim2", latency_ms=20, default_accuracy=0.8)],
                          corpus=small_corpus)
    stream = io.StringIO()
    run.audit(babelrun.load_manifest(path), handle_signals=False,
              progress=Progress(stream=stream, interval=0.1))
    lines = stream.getvalue().splitlines()
    assert lines and all(line.startswith("progress: sim") for line in lines)
    assert "\x1b" not in stream.getvalue()
    assert any("calls/s ETA" in line and "retries 0" in line for line in lines)


def test_progress_draws_bars_in_place_on_a_terminal():
    from babelrun.engine import JudgeState

    stream = io.StringIO()
    p = Progress(stream=stream, interval=1, live=True)
    states = [JudgeState("a", "ja", 100, 10, ok=40), JudgeState("b", "jb", 100, 0, ok=100)]
    p.draw(states)
    p.draw(states)
    out = stream.getvalue()
    assert out.count("\x1b[2F") == 1  # the second draw moves up over the first two lines
    assert "50/100 ( 50%)" in out and "100/100 (100%)" in out and "█" in out


def test_adaptive_concurrency_backs_off_on_429s_and_completes(tmp_path, small_corpus):
    # The server allows 40 requests per 2-second window and answers 429 with Retry-After
    # above it; the judge starts at 4 in flight and may grow to 32.
    with FakeJudgeServer(latency_s=0.02, rpm_limit=40, rpm_window_s=2.0) as server:
        judge = {"name": "adaptive", "backend": "openai", "model": "m", "endpoint": server.url,
                 "concurrency": 32, "adaptive_concurrency": True, "retries": 20}
        path = write_manifest(tmp_path, [judge], corpus=small_corpus)
        result = _audit(path)
        seen = server.snapshot()
    assert result.exit_code == 0
    (stats,) = result.stats.judges
    assert stats.ok == stats.planned
    assert seen["injected"]["rpm"] == stats.rate_limited > 0  # it met the limit, and backed off
    assert stats.calls == seen["requests"]


def test_tokens_per_minute_paces_calls(tmp_path):
    # ~1,100 tokens a call (prompt bytes / 3 + max_tokens) against 60,000 tokens/min: about
    # 55 calls a minute, so 12 calls need ~11 s without the limit's first second of depth.
    judge = {"name": "tpm", "backend": "simulated", "rate_limit": {"tpm": 60000}}
    corpus = {"languages": ["en"], "references_per_language": 1}
    path = write_manifest(tmp_path, [judge], corpus=corpus,
                          perturbations=[{"name": "truncate", "severities": [0.3, 0.6]},
                                         {"name": "repeat_pad", "severities": [0.3, 0.6]}])
    m = babelrun.load_manifest(path)
    from babelrun.plan import Plan

    plan = Plan.from_manifest(m)
    spec = m.judges[0]
    account = limits.accounts([spec])["tpm"]
    from babelrun.judges.protocol import max_tokens

    requests = [request(it, "ref_first") for it in plan.items()]
    estimates = [limits.estimate_tokens(r.messages, max_tokens(spec)) for r in requests]

    async def admit_all():
        started = anyio.current_time()
        for e in estimates:
            await account.admit(e)
        return anyio.current_time() - started

    elapsed = anyio.run(admit_all)
    budget_per_s = 60000 / 60
    expected = (sum(estimates) - account.tokens.max_rate) / budget_per_s
    assert elapsed >= 0.9 * expected > 0
