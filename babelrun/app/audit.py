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

import threading
from collections.abc import Sequence
from pathlib import Path

import msgspec
import pyarrow.compute as pc

from .. import engine, report
from ..core.memory import return_freed_memory, survivors_set_aside
from ..engine import limits
from ..engine.progress import Progress
from ..errors import UserError
from ..judges import batch_of
from ..plan import Plan
from ..report import plots
from ..report.data import LogPass, plotted
from ..score import Cards
from ..spec import Manifest
from ..store import compact, log
from ..store.done import KEYS as DONE_KEYS
from ..store.done import DoneSet
from ..store.rundir import RunDir, RunInfo
from .judging import check_runs_here, run_shard, shard_budget, warmed_judges
from .outcome import AuditResult, result_of
from .runfiles import check_plan, remove_stale_tmp, run_info, spend_from_log, write_run_files
from .scoring import run_warnings, score_run

__all__ = ["AuditResult", "MergeResult", "audit", "audit_async", "compact_run", "load_run", "merge_run",
           "score_run"]


def audit(manifest: Manifest | str | Path, *, progress: Progress | None = None,
          handle_signals: bool = True, shard: log.Shard | None = None,
          judges: Sequence[str] | None = None, limit: int | None = None,
          budget: float | None = None, stop: threading.Event | None = None) -> AuditResult:
    """Run (or resume) the audit; with ``shard``, only that shard's keys, and no cards (the
    last shard to finish does not know it is the last: ``merge`` scores the union).
    ``manifest``: a Manifest or the path of its YAML file. ``judges``: call only the judges of
    these names (the others keep their records); ``limit``: judge at most this many new
    presentations per judge (a trial run; the next run continues). ``stop``: an event another
    thread may set to drain the run as a first Ctrl-C does (the calls in flight finish and are
    written, no new one starts; the result says ``interrupted``; a rerun resumes).

    Blocking: it runs its own event loop. Inside a running loop (Jupyter, an async app) it
    raises and names ``await babelrun.audit_async(...)``, which runs it in a worker thread."""
    _no_running_loop()
    manifest = _manifest(manifest)
    only = _only(manifest, judges, limit)
    if manifest.executor == "ray" and shard is None:
        from . import cluster

        return cluster.audit(manifest, progress=progress, budget=budget)
    check_runs_here(manifest, shard)
    # The report's plot-drawing children import matplotlib while this process plans and judges.
    painter = plots.Painter(manifest.run_dir) if shard is None else None
    try:
        return _audit(manifest, painter, progress=progress, handle_signals=handle_signals,
                      shard=shard, only=only, limit=limit, budget=budget, stop=stop)
    finally:
        if painter is not None:
            painter.close()


def _audit(manifest: Manifest, painter: plots.Painter | None, *, progress: Progress | None,
           handle_signals: bool, shard: log.Shard | None, only: frozenset[str] | None, limit: int | None,
           budget: float | None, stop: threading.Event | None) -> AuditResult:
    """Plan, write the run files, judge, then ``_finish``: each step is given what it needs
    (the run directory, run.yaml's content, the plan's item count), none reads them back.
    The in-process judges load their models while the plan is made (``warm_up``)."""
    backends = warmed_judges(manifest, only)
    plan = Plan.from_manifest(manifest).sharded(shard)
    check_plan(plan)
    folder, info, items = RunDir(manifest.run_dir), run_info(manifest), plan.n_items
    folder.create()
    with folder.lock(shard):
        if shard is None:
            remove_stale_tmp(folder)
        write_run_files(folder, info, plan)
        # A shard outside Ray cannot see the others' calls: it paces at 1/N of each account.
        accounts = limits.accounts(manifest.judges, 1 / shard.count) if shard is not None else None
        outcome = run_shard(manifest, plan, info.judge_ids, accounts=accounts, progress=progress,
                            handle_signals=handle_signals, only=only, limit=limit,
                            budget_usd=shard_budget(budget, shard), stop=stop, compacts=shard is None,
                            backends=backends)
        plan.release()  # the engine's passes are over: its held items go before scoring,
        del plan  # the plan's references and the engine's buffers: not the scoring's business
        with survivors_set_aside():  # the collections of the end of the run walk only what is new
            return_freed_memory()  # and their memory back to the OS (compaction and scoring use Arrow's pool)
            return _finish(folder, info, items, outcome, shard, painter)


def _finish(folder: RunDir, info: RunInfo, items: int, outcome: engine.EngineResult, shard: log.Shard | None,
            painter: plots.Painter | None) -> AuditResult:
    """After judging, under the run lock: compact and score (a whole run not interrupted),
    add this process's stats entry, then the full report from the cards just scored."""
    run_dir, whole = folder.path, not outcome.interrupted and shard is None
    logged = LogPass()  # the report's log statistics, from the compaction's parse (and the last segment's index)
    if whole:
        compact.write_parquet(run_dir, index=True, observe=logged.add)
    result = result_of(run_dir, outcome)
    try:
        if whole:
            return_freed_memory()  # the engine's heap, before scoring reads the records
            result.cards = score_run(run_dir, write_report=False)
            if painter is not None:  # the plots (the report's last step) are drawn while the rest is done
                painter.start(plotted(run_dir, result.cards))
            result.warnings = run_warnings(run_dir, info, items)  # stats.json says what the cards left out
            result.stats = msgspec.structs.replace(result.stats, warnings=result.warnings)
    finally:  # this process's entry, once (stats.json accumulates entries)
        folder.add_stats(result.stats, shard, totals=lambda t: spend_from_log(run_dir, t) if shard is None else t)
    if result.cards is not None:
        return_freed_memory()  # then the full report (report.md with the leaderboard, report.html, plots/)
        gathered = report.write([run_dir], run_dir, cards={run_dir: result.cards}, logged={run_dir: logged},
                                painter=painter)
        runs = getattr(gathered, "runs", None)  # (a test's stand-in for report.write returns none)
        if runs:
            result.diagnoses = list(runs[0].diagnoses)  # the CLI's exit code reads them
    return result


async def audit_async(manifest: Manifest | str | Path, *, progress: Progress | None = None,
                      judges: Sequence[str] | None = None, limit: int | None = None) -> AuditResult:
    """``audit`` for code that already runs an event loop (Jupyter, an async app): the audit
    runs in a worker thread with its own loop, and this awaits it.

    Cancellable: cancelling the await (``task.cancel()``, a timeout, Ctrl-C under
    ``asyncio.run``) drains the audit as a first Ctrl-C does — the calls in flight finish and
    are written, no new call starts — waits for the thread to end and its run lock to be
    released, then re-raises the cancellation. A rerun, in the same process too, resumes."""
    import anyio
    import anyio.to_thread

    stop, finished = threading.Event(), threading.Event()

    def work() -> AuditResult:
        try:
            return audit(manifest, progress=progress, handle_signals=False, judges=judges, limit=limit, stop=stop)
        finally:
            finished.set()

    try:
        return await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        stop.set()
        with anyio.CancelScope(shield=True):  # the drain: the thread's calls end, its lock is released
            await anyio.to_thread.run_sync(finished.wait)
        raise


def _no_running_loop() -> None:
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise UserError("babelrun.audit() blocks and cannot run inside a running event loop (Jupyter, an "
                    "async app): use `await babelrun.audit_async(manifest)` there")


def _manifest(manifest: Manifest | str | Path) -> Manifest:
    from ..manifest import load, with_defaults

    if isinstance(manifest, Manifest):
        return with_defaults(manifest)  # run.yaml keeps the perturbation lists the plan was made from
    return load(Path(manifest))


def _only(manifest: Manifest, judges: Sequence[str] | None, limit: int | None) -> frozenset[str] | None:
    """The judge names ``audit`` is restricted to (None: all), after checking the arguments."""
    from ..errors import UsageError

    if limit is not None and limit < 1:
        raise UsageError("--limit must be at least 1")
    names = {j.name for j in manifest.judges}
    if judges:
        unknown = sorted(set(judges) - names)
        if unknown:
            raise UsageError(f"no judge named {', '.join(map(repr, unknown))} in the manifest "
                             f"(judges: {', '.join(sorted(names))})")
    only = frozenset(judges) if judges else None
    if (only is not None or limit is not None) and manifest.executor == "ray":
        raise UsageError("--judge and --limit run here: use them without the Ray executor")
    if limit is not None and any(batch_of(j) for j in manifest.judges if only is None or j.name in only):
        raise UsageError("--limit does not apply to provider batches (batch: true): pick the other judges with --judge")
    return only


def load_run(run_dir: str | Path, columns: list[str] | None = None):
    """A run's counted records (one per judge, item and order) as an Arrow table; ``columns``
    to read only some. ``.to_pandas()`` or ``polars.from_arrow`` for a DataFrame."""
    run_dir = Path(run_dir)
    RunDir(run_dir).info()  # a clear line when it is no run directory
    return compact.load(run_dir, columns)


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
    folder = RunDir(run_dir)
    run_dir, info = folder.path, folder.info()
    with folder.lock():
        remove_stale_tmp(folder)
        log.repair(run_dir)
        done = DoneSet.from_log(run_dir)
        plan = Plan.from_manifest(info.manifest)
        every_key = [(info.judge_ids[j.name], j.samples) for j in info.manifest.judges if j.calls == "all"]
        planned = sum(plan.calls_per_judge * k for _, k in every_key)
        counted = sum(plan.done_count(jid, done, k) for jid, k in every_key)
        keys = log.read_table(run_dir, DONE_KEYS)
        ok = int(pc.sum(pc.equal(keys["status"], "ok")).as_py() or 0)
        cards = score_run(run_dir, write_report=False)
        report.write([run_dir], run_dir, cards={run_dir: cards})
        bad = [w for w in run_warnings(run_dir, info) if "invalid log line" in w]  # merge counts keys itself
    return MergeResult(len(log.segments(run_dir)), ok, counted, planned, cards, bad)


def compact_run(run_dir: Path) -> Path:
    """Write ``judgements.parquet`` from the log (a no-op read when it is current)."""
    run_dir = Path(run_dir)
    RunDir(run_dir).info()  # a clear line when it is no run directory
    return compact.write_parquet(run_dir)
