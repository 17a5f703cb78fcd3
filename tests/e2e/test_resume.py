"""Crash and resume: a real `babelrun audit` subprocess, SIGKILLed mid-run, then rerun."""

import signal
import subprocess
import sys
import time
from collections import Counter

import babelrun
from babelrun.plan import Plan
from babelrun.store import log
from babelrun.testing import FakeJudgeServer
from helpers import ROOT, kill_after_records, log_lines, write_manifest

CORPUS = {"sources": [{"kind": "bundled"}], "languages": ["ar", "ja", "sw"], "references_per_language": 4}
PERTURBATIONS = [{"name": n, "severities": [0.6]} for n in
                 ("truncate", "shuffle", "number_corrupt", "drop_entities", "repeat_pad")]


def _manifest(folder, server):
    folder.mkdir(parents=True, exist_ok=True)
    judge = {"name": "slow", "backend": "openai", "model": "m", "endpoint": server.url, "concurrency": 4}
    return write_manifest(folder, [judge], corpus=CORPUS, perturbations=PERTURBATIONS)


def _audit_cmd(path):
    return [sys.executable, "-m", "babelrun", "audit", str(path), "--progress-every", "0.2"]


def _planned_keys(path):
    m = babelrun.load_manifest(path)
    jid = babelrun.judges.judge_id(m.judges[0])
    return {(jid, iid, o) for iid in Plan.from_manifest(m).item_ids for o in ("ref_first", "pert_first")}


def test_sigkill_mid_run_then_resume_equals_uninterrupted_run(tmp_path):
    with FakeJudgeServer(latency_s=0.03) as server:
        killed = _manifest(tmp_path / "killed", server)
        run_dir = tmp_path / "killed" / "run"
        kill_after_records(_audit_cmd(killed), run_dir, 30, poll_s=0.01)
        written_before = log_lines(run_dir)
        planned = _planned_keys(killed)
        assert 30 <= written_before < len(planned)

        # A torn last line, as a kill during a write leaves it.
        segment = sorted((run_dir / "log").glob("*.jsonl"))[-1]
        with segment.open("ab") as f:
            f.write(b'{"judge_id":"abc","item_id":"de')

        again = subprocess.run(_audit_cmd(killed), cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert again.returncode == 0, again.stderr
        assert f"{written_before} of {len(planned)} planned calls were already done" in again.stdout
        requests_after_kill = server.requests

        clean = _manifest(tmp_path / "clean", server)
        whole = subprocess.run(_audit_cmd(clean), cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert whole.returncode == 0, whole.stderr

    records = list(log.read(run_dir))
    ok = Counter(r.key for r in records if r.status == "ok")
    assert set(ok) == planned  # none missing
    assert max(ok.values()) == 1  # none duplicated
    assert all(seg.read_bytes().endswith(b"\n") for seg in (run_dir / "log").glob("*.jsonl"))
    # At most the calls in flight at the kill were repeated.
    assert requests_after_kill - len(planned) <= 4 * 2 + 4

    reference = {r.key: (r.verdict, r.raw) for r in log.read(tmp_path / "clean" / "run")}
    assert {r.key: (r.verdict, r.raw) for r in records} == reference
    assert (run_dir / "cards.json").read_bytes() == (tmp_path / "clean" / "run" / "cards.json").read_bytes()


def test_rerun_makes_no_calls_and_reproduces_cards_byte_for_byte(tmp_path):
    with FakeJudgeServer() as server:
        path = _manifest(tmp_path, server)
        first = subprocess.run(_audit_cmd(path), cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert first.returncode == 0, first.stderr
        cards, report = (tmp_path / "run" / "cards.json").read_bytes(), (tmp_path / "run" / "report.md").read_bytes()
        calls = server.requests
        second = subprocess.run(_audit_cmd(path), cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert second.returncode == 0, second.stderr
        assert server.requests == calls
    assert " 0 new records" in second.stdout
    assert (tmp_path / "run" / "cards.json").read_bytes() == cards
    assert (tmp_path / "run" / "report.md").read_bytes() == report
    # `babelrun score` rebuilds the same cards from the log alone.
    (tmp_path / "run" / "cards.json").unlink()
    scored = subprocess.run([sys.executable, "-m", "babelrun", "score", str(tmp_path / "run")],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert scored.returncode == 0, scored.stderr
    assert (tmp_path / "run" / "cards.json").read_bytes() == cards
    # and the same report.md: one writer (report.write), whichever of audit and score ran last
    assert (tmp_path / "run" / "report.md").read_bytes() == report


def test_ctrl_c_drains_flushes_and_says_how_to_resume(tmp_path):
    with FakeJudgeServer(latency_s=0.03) as server:
        path = _manifest(tmp_path, server)
        run_dir = tmp_path / "run"
        proc = subprocess.Popen(_audit_cmd(path), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while log_lines(run_dir) < 20 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        assert "run `babelrun audit" in err and "again to resume" in err
        written = log_lines(run_dir)
        served = server.requests
        # Drained: every call the server answered before the stop is in the log.
        assert written == served
        records = list(log.read(run_dir))
        assert len(records) == written and all(r.status == "ok" for r in records)
        again = subprocess.run(_audit_cmd(path), cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert again.returncode == 0, again.stderr
        assert server.requests == len(_planned_keys(path))  # nothing asked twice
