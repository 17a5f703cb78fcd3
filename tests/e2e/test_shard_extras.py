"""Shards with stopping, the cache and the spend limit: ``--budget`` split among the shards (not multiplied by
their number), the response cache shared by shard processes, and stopping's keys not needed
agreeing with one process. (The Ray executor's: tests/e2e/test_ray.py.)"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections import Counter

import msgspec

from babelrun.engine import stopping
from babelrun.store import log
from babelrun.testing import FakeJudgeServer
from helpers import ROOT, quiet_audit, simulated, write_manifest

CORPUS = {"sources": [{"kind": "bundled"}], "languages": ["ar", "hi", "ja", "sw"], "references_per_language": 4}
PERTURBATIONS = [{"name": n, "severities": [0.6]} for n in ("truncate", "shuffle", "repeat_pad")]
PRICE = {"input_per_mtok": 3.0, "output_per_mtok": 15.0}


def _usd(r) -> float:
    """One record's cost from its tokens, apart from engine/ledger.py."""
    return (r.tokens_in * PRICE["input_per_mtok"] + r.tokens_out * PRICE["output_per_mtok"]) / 1e6


def _cmd(*args):
    return [sys.executable, "-m", "babelrun", *map(str, args)]


def _shards(path, n: int, *extra) -> list[int]:
    """``audit --shard i/n`` for every i, as processes side by side; their exit codes."""
    procs = [subprocess.Popen(_cmd("audit", path, "--shard", f"{i}/{n}", *extra), cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for i in range(n)]
    return [p.wait(timeout=300) for p in procs]


def test_shards_split_the_budget_and_a_rerun_continues(tmp_path):
    n = 2
    with FakeJudgeServer(latency_s=0.002) as server:
        judge = {"name": "j", "backend": "openai", "model": "m", "endpoint": server.url, "concurrency": 3,
                 "price": PRICE}
        (tmp_path / "full").mkdir()
        full = write_manifest(tmp_path / "full", [judge], corpus=CORPUS, perturbations=PERTURBATIONS)
        assert quiet_audit(full).exit_code == 0
        everything = list(log.read(tmp_path / "full" / "run"))
        budget = round(sum(_usd(r) for r in everything) / 4, 6)  # a quarter of the plan's cost
        one = max(_usd(r) for r in everything)

        path = write_manifest(tmp_path, [judge], corpus=CORPUS, perturbations=PERTURBATIONS)
        assert _shards(path, n, "--budget", budget) == [1] * n  # each stopped at its share: incomplete
        first = list(log.read(tmp_path / "run"))
        spent = sum(_usd(r) for r in first)
        per_shard = Counter()
        for seg in (tmp_path / "run" / "log").glob("*.jsonl"):
            per_shard[seg.name.split("-", 1)[0]] += sum(_usd(msgspec.json.decode(line, type=log.Record))
                                                        for line in seg.read_bytes().splitlines() if line)
        print(f"budget {budget:.5f}: the {n} shards spent {spent:.5f} ({dict(per_shard)}); one call at most "
              f"{one:.5f}; the plan {4 * budget:.5f}")
        assert len(per_shard) == n
        assert all(abs(s - budget / n) <= one for s in per_shard.values())  # each within its share
        assert budget - n * one <= spent <= budget + n * one  # not n × the budget
        # a rerun continues, within the budget again, and asks no key twice
        assert _shards(path, n, "--budget", budget) == [1] * n
        both = list(log.read(tmp_path / "run"))  # (segments: not in the order written)
        assert len(both) > len(first) and max(Counter(r.key for r in both).values()) == 1
        assert sum(_usd(r) for r in both) - spent <= budget + n * one
        assert _shards(path, n) == [0] * n  # without a budget: the rest
        records = list(log.read(tmp_path / "run"))
    ok = Counter(r.key for r in records if r.status == "ok")
    assert set(ok) == {r.key for r in everything} and max(ok.values()) == 1


def test_shard_processes_share_the_cache(tmp_path):
    cache = {"dir": str(tmp_path / "cache")}
    with FakeJudgeServer(gather=2) as server:  # the two shard processes call at once (gather proves it)
        judge = {"name": "j", "backend": "openai", "model": "m", "endpoint": server.url, "concurrency": 2}
        path = write_manifest(tmp_path, [judge], corpus=CORPUS, perturbations=PERTURBATIONS, cache=cache)
        assert _shards(path, 2) == [0, 0]
        assert server.gathered
        records = list(log.read(tmp_path / "run"))
        assert server.requests == len(records) == len({r.key for r in records})
        asked = server.requests
        # a second run directory: one process, then two shards again, make no call
        for folder, shards in (("one", 0), ("two", 2)):
            (tmp_path / folder).mkdir()
            other = write_manifest(tmp_path / folder, [judge], corpus=CORPUS, perturbations=PERTURBATIONS,
                                   cache=cache)
            if shards:
                assert _shards(other, shards) == [0] * shards
            else:
                assert quiet_audit(other).exit_code == 0
            again = list(log.read(tmp_path / folder / "run"))
            assert server.requests == asked and all(r.cached for r in again)
            assert {r.key: r.verdict for r in again} == {r.key: r.verdict for r in records}


JUDGES = [simulated("good", default_accuracy=0.99), simulated("bad", default_accuracy=0.2),
          simulated("coin", default_accuracy=0.6)]
STOP_CORPUS = {"sources": [{"kind": "bundled"}], "languages": ["en", "hi"], "references_per_language": 6}
STOPPING = {"on": "verdict", "confidence": 0.95, "min_items": 10}


def _cells(run_dir) -> dict:
    report = stopping.read_report(run_dir)
    assert report is not None
    return {(j.judge, c.cell): c for j in report.judges for c in j.cells}


def test_shards_agree_with_one_process_on_the_keys_not_needed(tmp_path):
    (tmp_path / "one").mkdir()
    one = write_manifest(tmp_path / "one", JUDGES, corpus=STOP_CORPUS, stopping=STOPPING)
    single = quiet_audit(one)
    assert single.exit_code == 0  # the keys not needed are no unfinished work
    cells = _cells(tmp_path / "one" / "run")
    not_needed = {j.judge: j.not_needed for j in single.stats.judges}
    assert sum(not_needed.values()) == sum(c.not_needed for c in cells.values()) > 0
    assert any(c.stopped_at is None for c in cells.values())  # the coin: not decided

    # the same log under shards: they skip exactly the keys one process skipped, and call nothing
    shutil.copytree(tmp_path / "one", tmp_path / "sh")
    path = tmp_path / "sh" / "manifest.yaml"
    results = [quiet_audit(path, shard=log.Shard(i, 2)) for i in range(2)]
    assert [r.exit_code for r in results] == [0, 0]
    assert sum(j.calls for r in results for j in r.stats.judges) == 0
    for name, n in not_needed.items():
        assert sum(j.not_needed for r in results for j in r.stats.judges if j.judge == name) == n

    # shards from an empty log make no decision while they run (docs/stopping.md): they judge
    # their keys in full; one process with stopping then finds each cell's stop where the
    # single process stopped (the decision is a function of the log, in the seeded order)
    (tmp_path / "fresh").mkdir()
    fresh = write_manifest(tmp_path / "fresh", JUDGES, corpus=STOP_CORPUS, stopping=STOPPING)
    assert [quiet_audit(fresh, shard=log.Shard(i, 2)).exit_code for i in range(2)] == [0, 0]
    after = quiet_audit(fresh)
    assert after.exit_code == 0 and sum(j.calls for j in after.stats.judges) == 0
    again = _cells(tmp_path / "fresh" / "run")
    assert {k: c.stopped_at for k, c in again.items()} == {k: c.stopped_at for k, c in cells.items()}
