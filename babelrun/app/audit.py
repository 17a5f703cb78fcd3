"""``babelrun audit``: manifest → plan → engine → log → cards, resumable at every step.

The run directory holds ``run.yaml`` (the resolved manifest, judge ids, babelrun version),
``plan.json`` (the perturbation audit of the plan), ``log/*.jsonl`` (the source of truth),
``judgements.parquet``, ``cards.json``, ``stats.json`` and the report (``report.md``,
``report.html``, ``plots/``). Running the same
manifest again judges only the keys without an ``ok`` record; a changed manifest adds only
its new keys. Cards cover every record in the run directory.

``audit(..., shard=Shard(i, N))`` judges one shard's keys and writes no cards; shards run
side by side in separate processes (``log.RunLock``'s shared mode), and ``merge_run``
unifies them. ``executor: ray`` hands the shards to Ray workers (``cluster.py``).
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pyarrow.compute as pc

from .. import report
from ..engine import limits
from ..engine.progress import Progress
from ..errors import UserError
from ..plan import Plan
from ..score import Cards
from ..spec import Manifest
from ..store import compact, log
from ..store.rundir import STATS_JSON, read_run_info
from .phases import (
    AuditResult,
    _return_freed_memory,
    check_plan,
    check_shardable,
    prepare_dir,
    result_of,
    run_shard,
    score_run,
    warnings,
    write_run_files,
    write_stats,
)

__all__ = ["AuditResult", "MergeResult", "audit", "compact_run", "merge_run", "score_run"]


def audit(manifest: Manifest, *, progress: Progress | None = None,
          handle_signals: bool = True, shard: log.Shard | None = None) -> AuditResult:
    """Run (or resume) the audit; with ``shard``, only that shard's keys, and no cards (the
    last shard to finish does not know it is the last: ``merge`` scores the union)."""
    if manifest.executor == "ray" and shard is None:
        from . import cluster

        return cluster.audit(manifest, progress=progress)
    if shard is not None:
        check_shardable(manifest)
    for i, spec in enumerate(manifest.judges):
        if spec.replicas > 1:
            raise UserError(f"judges[{i}].replicas: replicas are Ray actors; use executor: ray "
                            "(or --executor ray)")
    run_dir = manifest.run_dir
    plan = Plan.from_manifest(manifest).sharded(shard)
    check_plan(plan)
    prepare_dir(run_dir)
    with log.RunLock(run_dir, shard):
        if shard is None:
            compact.remove_stale_tmp(run_dir)
        write_run_files(manifest, plan)
        # A shard outside Ray cannot see the others' calls: it paces at 1/N of each account.
        accounts = limits.accounts(manifest.judges, 1 / shard.count) if shard is not None else None
        outcome = run_shard(manifest, plan, accounts=accounts, progress=progress, handle_signals=handle_signals)
        result = result_of(run_dir, outcome.judges, written=outcome.written,
                           interrupted=outcome.interrupted, elapsed_s=outcome.elapsed_s)
        write_stats(run_dir, result.stats, STATS_JSON if shard is None else f"stats.{shard.tag}.json")
        if not outcome.interrupted and shard is None:
            result.cards = score_run(run_dir)
            result.warnings = warnings(run_dir)
            if result.warnings:  # stats.json says what the cards left out, and why
                result.stats = msgspec.structs.replace(result.stats, warnings=result.warnings)
                write_stats(run_dir, result.stats)
            # The full report (report.md with the leaderboard, report.html, plots/) from the
            # log and the cards just scored.
            _return_freed_memory()
            report.write([run_dir], run_dir, cards={run_dir: result.cards})
    return result


class MergeResult(msgspec.Struct, frozen=True):
    segments: int
    ok_records: int  # ok records in the log, repeats included
    counted: int  # keys counted once each
    planned: int
    cards: Cards
    warnings: list[str] = []


def merge_run(run_dir: Path) -> MergeResult:
    """Unify a run directory's segments (every shard's) into judgements.parquet and cards:
    repair torn lines, count each key's first ``ok`` record once. Idempotent. Takes the
    run lock exclusively, so it refuses while any shard is still writing."""
    run_dir = Path(run_dir)
    info = read_run_info(run_dir)
    with log.RunLock(run_dir):
        compact.remove_stale_tmp(run_dir)
        log.repair(run_dir)
        done = log.DoneSet.from_log(run_dir)
        plan = Plan.from_manifest(info.manifest)
        every_key = [info.judge_ids[j.name] for j in info.manifest.judges if j.calls == "all"]
        planned = plan.calls_per_judge * len(every_key)
        counted = sum(plan.done_count(jid, done) for jid in every_key)
        keys = log.read_table(run_dir, log.DoneSet._KEYS)
        ok = int(pc.sum(pc.equal(keys["status"], "ok")).as_py() or 0)
        cards = score_run(run_dir)
        report.write([run_dir], run_dir, cards={run_dir: cards})
        bad = [w for w in warnings(run_dir) if "invalid log line" in w]  # merge counts keys itself
    return MergeResult(len(log.segments(run_dir)), ok, counted, planned, cards, bad)


def compact_run(run_dir: Path) -> Path:
    """Write ``judgements.parquet`` from the log (a no-op read when it is current)."""
    run_dir = Path(run_dir)
    read_run_info(run_dir)
    return compact.write_parquet(run_dir)
