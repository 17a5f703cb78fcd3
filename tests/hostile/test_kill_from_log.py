"""What is decided from records is a function of the log: a real ``babelrun audit``
subprocess SIGKILLed twice and then resumed gives the cards of an uninterrupted run byte for
byte with stopping, samples, the response cache, prices and 20 % of requests faulted (a
stopped cell counts its seeded prefix up to the stop, every sample of it, never the calls in
flight when it stopped), and the spend of an uninterrupted run (the ledger is rebuilt from
the log's records, not from the stats of the processes that lived to write them): nothing
lost, nothing judged twice. Calls go to a loopback server.

The faults fall on requests by their arrival (the server's n-th request draws the n-th
fate), so the two runs see different faults; what they must agree on does not depend on
them: a reply is a function of its request (the verdict a hash of the prompt, a sample's
flip a hash of the prompt and the sample's seed), a retried key eventually gets that reply,
and the retries are enough that no key runs out of them (0.2 ** 11 per key)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter

import msgspec
import pytest

import babelrun
from babelrun.engine.stopping import from_log
from babelrun.judges import judge_id
from babelrun.plan import Plan
from babelrun.store import log
from babelrun.testing import FakeJudgeServer
from helpers import ROOT, log_lines, write_manifest

PRICE = {"input_per_mtok": 3.0, "cached_input_per_mtok": 0.3, "output_per_mtok": 15.0}
CORPUS = {"sources": [{"kind": "bundled"}], "languages": ["en", "hi", "zh"], "references_per_language": 4}
STOPPING = {"on": "width", "width": 0.8, "min_items": 8}  # cells stop near half way
FAULTS = {"rate_429": 0.05, "rate_5xx": 0.07, "rate_drop": 0.04, "rate_malformed": 0.04}  # 20 %
SAMPLES = 3


def _manifest(folder, server, concurrency, stopping, languages):
    folder.mkdir(parents=True, exist_ok=True)
    # sampled (the seed makes each sample's request, so its reply, the same in every run)
    judge = {"name": "j", "backend": "openai", "model": "m", "endpoint": server.url, "concurrency": concurrency,
             "price": PRICE, "samples": SAMPLES, "temperature": 0.7, "seed": 7, "retries": 10}
    fields = {"stopping": stopping} if stopping else {}
    corpus = {**CORPUS, "languages": CORPUS["languages"][:languages]}
    return write_manifest(folder, [judge], corpus=corpus, cache={"dir": str(folder / "cache"), "sampled": True},
                          **fields)


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


def _stats(folder) -> dict:
    return msgspec.json.decode((folder / "run" / "stats.json").read_bytes())["judges"][0]


def _ok_keys(folder) -> Counter:
    return Counter(r.key for r in log.read(folder / "run") if r.status == "ok")


def _needed_keys(path) -> set:
    """Every key the run must hold an ok record for: each sample of each planned item, less,
    with stopping, a stopped cell's items after its stop. The stop is the cards' (decided again
    from the log); its n counts the cell's first items in the seeded order (none is passed
    over: no key runs out of retries), and the items judged past it are among those left out."""
    manifest = babelrun.load_manifest(path)
    jid = judge_id(manifest.judges[0])
    plan = Plan.from_manifest(manifest)
    skipped: set[str] = set()
    if manifest.stopping is not None:
        replayed = from_log(path.parent / "run", manifest.stopping, manifest.seed, {"j": jid})[jid]
        for cell, order in plan.stopping_cells(manifest.stopping.per_perturbation).items():
            if cell in replayed.cells:
                skipped.update(order[replayed.cells[cell].stopped_at:])
        assert replayed.cells and replayed.uncounted <= skipped
    return {(jid, iid, order, s) if s else (jid, iid, order)
            for iid in plan.item_ids if iid not in skipped
            for order in ("ref_first", "pert_first") for s in range(SAMPLES)}


def _by_what_was_asked(spend: dict) -> dict:
    """The spend per language and in all, each with its calls: what the asks cost. Its split
    into ``fresh`` and ``retried`` calls is left out: it says which calls met a fault, and the
    faults fall by arrival (a call in flight at a kill is asked afresh on the resume)."""
    return {"total": spend["total"],
            "by_language": {lang: pytest.approx(sum(row.values()), abs=1e-5)  # a sum of rounded parts
                            for lang, row in spend["by_language"].items()},
            "calls_by_language": {lang: sum(row.values()) for lang, row in spend["calls_by_language"].items()}}


def _usd(r) -> float:
    cached = r.tokens_cached or 0
    return ((r.tokens_in - cached) * PRICE["input_per_mtok"] + cached * PRICE["cached_input_per_mtok"]
            + r.tokens_out * PRICE["output_per_mtok"]) / 1e6


# languages: fewer where the plan is longer (no stopping) or slower (one call at a time, every
# fault's backoff in series), so that each case makes a few hundred calls
@pytest.mark.parametrize(("concurrency", "stopping", "languages"), [(8, STOPPING, 3), (1, STOPPING, 1), (8, None, 2)],
                         ids=["stopping-c8", "stopping-c1", "no-stopping-c8"])
def test_killed_twice_and_resumed_gives_the_cards_and_spend_of_an_uninterrupted_run(concurrency, stopping, languages,
                                                                                     tmp_path):
    # latencies drawn per request (lognormal): which calls are in flight when a cell stops varies
    # (one call at a time, none is in flight beside another: no latency needed)
    latency_s = 0.02 if concurrency > 1 else 0.0
    with FakeJudgeServer(latency_s=latency_s, latency="lognormal", sigma=1.0, cached_share=0.5, sample_flip=0.2,
                         retry_after=0.01, **FAULTS) as server:
        whole = _manifest(tmp_path / "whole", server, concurrency, stopping, languages)
        _finish(whole)
        lines = log_lines(tmp_path / "whole" / "run")
        killed = _manifest(tmp_path / "killed", server, concurrency, stopping, languages)
        first = _kill_at(killed, lines // 3)
        second = _kill_at(killed, first + lines // 3)
        assert 0 < first < second < lines
        _finish(killed)
        assert sum(server.injected.values()) > 0
    cards = [(f / "run" / "cards.json").read_bytes() for f in (tmp_path / "whole", tmp_path / "killed")]
    assert cards[0] == cards[1]
    records = list(log.read(tmp_path / "killed" / "run"))
    for path in (whole, killed):  # nothing judged twice; every sample of every needed item judged
        ok = _ok_keys(path.parent)
        assert max(ok.values()) == 1
        needed = _needed_keys(path)
        assert needed <= set(ok) and (stopping is not None or needed == set(ok))
    spend_whole, spend_killed = _stats(tmp_path / "whole")["spend"], _stats(tmp_path / "killed")["spend"]
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
        assert _by_what_was_asked(spend_killed) == _by_what_was_asked(spend_whole)
