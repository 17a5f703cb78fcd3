"""Faults of every kind and crashes at random moments: never a lost or a doubled verdict."""

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter

import msgspec

import babelrun
from babelrun.judges import judge_id
from babelrun.plan import Plan
from babelrun.store import log
from babelrun.testing import FakeJudgeServer
from helpers import ROOT, log_lines, quiet_audit, write_manifest

CORPUS = {"sources": [{"kind": "bundled"}], "languages": ["bn", "fr", "ja", "tr"], "references_per_language": 4}


def _planned(path):
    m = babelrun.load_manifest(path)
    jid = judge_id(m.judges[0])
    return {(jid, iid, o) for iid in Plan.from_manifest(m).item_ids for o in ("ref_first", "pert_first")}


def _assert_log_intact(run_dir):
    for seg in log.segments(run_dir):
        data = seg.read_bytes()
        assert data.endswith(b"\n")
        for line in data.splitlines():
            msgspec.json.decode(line, type=log.Record)


def test_twenty_percent_faults_of_every_kind(tmp_path):
    rates = {"rate_429": 0.04, "rate_5xx": 0.04, "rate_timeout": 0.04, "rate_drop": 0.04, "rate_malformed": 0.04}
    with FakeJudgeServer(seed=11, hang_s=5, retry_after=0.01, **rates) as server:
        judge = {"name": "flaky", "backend": "openai", "model": "m", "endpoint": server.url,
                 "concurrency": 8, "timeout_s": 0.25, "retries": 8}
        path = write_manifest(tmp_path, [judge], corpus=CORPUS)
        result = quiet_audit(path)
        seen = server.snapshot()
    assert result.exit_code == 0
    run_dir = tmp_path / "run"
    _assert_log_intact(run_dir)
    records = list(log.read(run_dir))
    ok = Counter(r.key for r in records if r.status == "ok")
    assert set(ok) == _planned(path) and max(ok.values()) == 1
    assert not [r for r in records if r.status == "error"]
    # Every kind of fault happened, and each was retried, never double-counted.
    assert all(seen["injected"][kind] > 0 for kind in ("429", "5xx", "timeout", "drop", "malformed"))
    faults = sum(seen["injected"].values())
    assert 0.1 < faults / seen["requests"] < 0.3
    assert max(r.attempts for r in records) <= 9
    assert sum(r.attempts for r in records) == seen["requests"]  # every request is accounted for
    (stats,) = result.stats.judges
    assert stats.retries == faults and stats.rate_limited == seen["injected"]["429"]
    assert stats.calls == seen["requests"]


def _audit_cmd(path):
    return [sys.executable, "-m", "babelrun", "audit", str(path), "--progress-every", "60"]


def test_ten_sigkills_at_random_moments_then_resume(tmp_path):
    rng = random.Random(2026)
    corpus = {**CORPUS, "languages": ["bn", "fr", "ja", "sw", "tr"], "references_per_language": 5}
    with FakeJudgeServer(latency_s=0.03, latency="uniform", jitter_s=0.02, seed=3) as server:
        judge = {"name": "steady", "backend": "openai", "model": "m", "endpoint": server.url, "concurrency": 4}
        killed_dir, clean_dir = tmp_path / "killed", tmp_path / "clean"
        killed_dir.mkdir()
        clean_dir.mkdir()
        killed = write_manifest(killed_dir, [judge], corpus=corpus)
        clean = write_manifest(clean_dir, [judge], corpus=corpus)
        planned = _planned(killed)
        for attempt in range(10):
            before = log_lines(killed_dir / "run")
            proc = subprocess.Popen(_audit_cmd(killed), cwd=ROOT, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
            if attempt % 2:  # a random moment in time: start-up, planning, or the first calls
                time.sleep(rng.uniform(0.05, 0.8))
            else:  # a random moment in the stream of records
                target = before + rng.randint(1, 30)
                deadline = time.monotonic() + 30
                while log_lines(killed_dir / "run") < target and time.monotonic() < deadline:
                    time.sleep(0.002)
            assert proc.poll() is None, "the run finished before it was killed"
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        assert log_lines(killed_dir / "run") < len(planned)
        final = subprocess.run(_audit_cmd(killed), cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert final.returncode == 0, final.stderr
        whole = subprocess.run(_audit_cmd(clean), cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert whole.returncode == 0, whole.stderr

    _assert_log_intact(killed_dir / "run")
    records = list(log.read(killed_dir / "run"))
    ok = Counter(r.key for r in records if r.status == "ok")
    assert set(ok) == planned and max(ok.values()) == 1
    reference = {r.key: (r.verdict, r.slot, r.raw) for r in log.read(clean_dir / "run")}
    assert {r.key: (r.verdict, r.slot, r.raw) for r in records} == reference
    assert (killed_dir / "run" / "cards.json").read_bytes() == (clean_dir / "run" / "cards.json").read_bytes()
