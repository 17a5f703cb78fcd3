"""Scale through whole audits: one process per run directory, the done-set from the log, segment
rotation, the parquet cache, the breaker, stats, plain progress lines and adaptive concurrency
against 429s. (The budgets, gates and done-set sizes are unit/test_scale.py.)"""

import io
import subprocess
import sys

import msgspec

from babelrun.app.cli import main
from babelrun.engine.progress import Progress
from babelrun.store import compact, log, rundir
from babelrun.store.done import DoneSet
from babelrun.testing import FakeJudgeServer
from helpers import ROOT, quiet_audit, simulated, write_manifest


def test_second_process_on_one_run_dir_is_refused(tmp_path, small_corpus):
    path = write_manifest(tmp_path, [simulated()], corpus=small_corpus)
    (tmp_path / "run").mkdir()
    rundir.RunDir(tmp_path / "run").mark()  # a run directory (as the first audit makes it), held by another process
    with log.RunLock(tmp_path / "run"):
        other = subprocess.run([sys.executable, "-m", "babelrun", "audit", str(path)], cwd=ROOT,
                               capture_output=True, text=True, timeout=60)
    assert other.returncode == 1
    assert "is in use by babelrun pid" in other.stderr and "another output_dir" in other.stderr
    assert len(other.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "run" / "log").exists()
    # Once the holder is gone, the directory is free again (a killed holder frees it too).
    assert quiet_audit(path).exit_code == 0


def test_done_set_from_the_log_matches_the_records(tmp_path, small_corpus):
    path = write_manifest(tmp_path, [simulated(), simulated("sim2", invalid_rate=0.5)], corpus=small_corpus)
    quiet_audit(path)
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
    result = quiet_audit(path)
    segs = log.segments(tmp_path / "run")
    assert len(segs) > 3
    assert all(s.stat().st_size > 0 for s in segs)
    assert len(DoneSet.from_log(tmp_path / "run")) == result.planned_calls
    assert compact.load(tmp_path / "run").num_rows == result.planned_calls


def test_parquet_is_used_only_while_current(tmp_path, small_corpus):
    path = write_manifest(tmp_path, [simulated()], corpus=small_corpus)
    result = quiet_audit(path)
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
    quiet_audit(path, progress=Progress(stream=stream, interval=0.1))
    lines = stream.getvalue().splitlines()
    assert lines and all(line.startswith("progress: sim") for line in lines)
    assert "\x1b" not in stream.getvalue()
    assert any("calls/s ETA" in line and "retries 0" in line for line in lines)


def test_adaptive_concurrency_backs_off_on_429s_and_completes(tmp_path, small_corpus):
    # The server allows 40 requests per 2-second window and answers 429 with Retry-After
    # above it; the judge starts at 4 in flight and may grow to 32.
    with FakeJudgeServer(latency_s=0.02, rpm_limit=40, rpm_window_s=2.0) as server:
        judge = {"name": "adaptive", "backend": "openai", "model": "m", "endpoint": server.url,
                 "concurrency": 32, "adaptive_concurrency": True, "retries": 20}
        path = write_manifest(tmp_path, [judge], corpus=small_corpus)
        result = quiet_audit(path)
        seen = server.snapshot()
    assert result.exit_code == 0
    (stats,) = result.stats.judges
    assert stats.ok == stats.planned
    assert seen["injected"]["rpm"] == stats.rate_limited > 0  # it met the limit, and backed off
    assert stats.calls == seen["requests"]
