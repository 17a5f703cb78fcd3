"""D3: a full disk mid-audit is one line naming the path and the cause, exit 1, no *.tmp
left; after space is freed, the resumed audit loses and repeats nothing.

Needs a small tmpfs: runs as root (mount), skipped elsewhere."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter

import pytest

from babelrun.store import log
from helpers import ROOT, simulated, write_manifest


@pytest.fixture(params=["100k", "400k"])  # full while judging (the log); full while reporting
def small_disk(tmp_path, request):
    mount = tmp_path / "disk"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={request.param}", "tmpfs", str(mount)],
                          capture_output=True)
    if made.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.mark.slow
def test_a_full_disk_is_one_line_and_resumes_exactly(small_disk, tmp_path):
    manifest = write_manifest(tmp_path, [simulated("sim", invalid_rate=0.05)], output_dir=str(small_disk / "run"),
                              corpus={"sources": [{"kind": "bundled"}], "languages": ["en", "hi", "zh", "ar"],
                                      "references_per_language": 10})
    run = small_disk / "run"
    audit = [sys.executable, "-m", "babelrun", "audit", str(manifest), "--progress-every", "60"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    full = subprocess.run(audit, cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    assert full.returncode == 1, full.stderr
    lines = full.stderr.strip().splitlines()
    assert len(lines) == 1 and "No space left on device" in lines[0] and str(small_disk) in lines[0]
    assert not list(small_disk.rglob("*.tmp"))
    kept = log.final_records(log.read(run))
    subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)
    again = subprocess.run(audit, cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    assert again.returncode == 0, again.stderr
    records = [r for r in log.read(run) if r.status == "ok"]
    per_key = Counter(r.key for r in records)
    assert max(per_key.values()) == 1  # nothing judged twice
    assert {r.key for r in kept} <= set(per_key)  # nothing lost
    assert not list(small_disk.rglob("*.tmp"))
