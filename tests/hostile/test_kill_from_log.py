"""What is decided from records is a function of the log: a real ``babelrun audit``
subprocess SIGKILLed twice and then resumed gives the cards of an uninterrupted run byte for
byte with stopping, the response cache and prices on (a stopped cell counts its seeded
prefix up to the stop, never the calls in flight when it stopped), and the spend of an
uninterrupted run (the ledger is rebuilt from the log's records, not from the stats of the
processes that lived to write them). Calls go to a loopback server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import msgspec
import pytest

from babelrun.store import log
from babelrun.testing import FakeJudgeServer
from helpers import ROOT, log_lines, write_manifest

PRICE = {"input_per_mtok": 3.0, "cached_input_per_mtok": 0.3, "output_per_mtok": 15.0}
CORPUS = {"sources": [{"kind": "bundled"}], "languages": ["en", "hi", "zh"], "references_per_language": 8}
STOPPING = {"on": "width", "width": 0.7, "min_items": 8}  # cells stop near half way


def _manifest(folder, server, concurrency, stopping):
    folder.mkdir(parents=True, exist_ok=True)
    judge = {"name": "j", "backend": "openai", "model": "m", "endpoint": server.url, "concurrency": concurrency,
             "price": PRICE}
    fields = {"stopping": stopping} if stopping else {}
    return write_manifest(folder, [judge], corpus=CORPUS, cache={"dir": str(folder / "cache")}, **fields)


def _audit(path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "babelrun", "audit", str(path), "--progress-every", "60"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _kill_at(path, lines: int) -> int:
    """Start an audit, SIGKILL it once the log holds ``lines`` records; the lines then."""
    proc = _audit(path)
    deadline = time.monotonic() + 120
    while log_lines(path.parent / "run") < lines and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    assert proc.poll() is None, "the audit ended before it could be killed: make the plan longer"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    return log_lines(path.parent / "run")


def _finish(path) -> None:
    proc = _audit(path)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()


def _spend(folder) -> dict:
    return msgspec.json.decode((folder / "run" / "stats.json").read_bytes())["judges"][0]["spend"]


def _usd(r) -> float:
    cached = r.tokens_cached or 0
    return ((r.tokens_in - cached) * PRICE["input_per_mtok"] + cached * PRICE["cached_input_per_mtok"]
            + r.tokens_out * PRICE["output_per_mtok"]) / 1e6


@pytest.mark.parametrize(("concurrency", "stopping"), [(8, STOPPING), (1, STOPPING), (8, None)],
                         ids=["stopping-c8", "stopping-c1", "no-stopping-c8"])
def test_killed_twice_and_resumed_gives_the_cards_and_spend_of_an_uninterrupted_run(concurrency, stopping,
                                                                                     tmp_path):
    # latencies drawn per request (lognormal): which calls are in flight when a cell stops varies
    with FakeJudgeServer(latency_s=0.02, latency="lognormal", sigma=1.0, cached_share=0.5) as server:
        whole = _manifest(tmp_path / "whole", server, concurrency, stopping)
        _finish(whole)
        calls = server.requests
        killed = _manifest(tmp_path / "killed", server, concurrency, stopping)
        first = _kill_at(killed, calls // 4)
        second = _kill_at(killed, first + calls // 4)
        assert 0 < first < second < calls
        _finish(killed)
    cards = [(f / "run" / "cards.json").read_bytes() for f in (tmp_path / "whole", tmp_path / "killed")]
    assert cards[0] == cards[1]
    records = list(log.read(tmp_path / "killed" / "run"))
    spend_whole, spend_killed = _spend(tmp_path / "whole"), _spend(tmp_path / "killed")
    # the spend is the log's, record by record, however many processes died before writing stats
    assert spend_killed["total"] == pytest.approx(sum(_usd(r) for r in records if r.status == "ok"
                                                      and not r.cached), abs=1e-6)
    if stopping is not None:
        report = msgspec.json.decode((tmp_path / "whole" / "run" / "stopping.json").read_bytes())
        assert any(c["stopped_at"] is not None for j in report["judges"] for c in j["cells"])
        stopped = [c for c in msgspec.json.decode(cards[0])["judges"][0]["languages"] if c["card"].get("stopped")]
        assert stopped  # the cards show where they stopped
    if stopping is None or concurrency == 1:
        # the same calls, the same spend (with stopping at concurrency > 1 the calls in flight when
        # a cell stops are paid and kept, though never counted: which ones depends on timing)
        assert spend_killed == spend_whole
