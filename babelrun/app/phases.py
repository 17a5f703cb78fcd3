"""The phases of an audit that every executor shares: the run files, one shard's judging
(all judges, then the cascades' escalations), the stats, and the finish (cards, report.md).
``audit.py`` runs them in this process; ``cluster.py`` on Ray workers."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import anyio
import msgspec

from .. import engine, judges, report, score
from ..core.version import __version__
from ..engine import limits
from ..engine.progress import Progress
from ..errors import ManifestError, UserError
from ..plan import Plan
from ..score import composite
from ..score.diagnose import Diagnosis
from ..score.run import cards_of_run, stale_label
from ..spec import JudgeSpec, Manifest
from ..store import compact, log
from ..store.done import DoneSet
from ..store.files import write_atomic
from ..store.rundir import (
    PLAN_JSON,
    RUN_YAML,
    STATS_JSON,
    PlanSummary,
    RunInfo,
    RunStats,
    mark,
    plan_summary_is_readable,
    read_plan_summary,
    read_run_info,
)


class AuditResult(msgspec.Struct):
    run_dir: str
    planned_calls: int
    already_done: int
    new_records: int
    interrupted: bool
    stop_reasons: list[str]
    failed_calls: int
    stats: RunStats
    cards: score.Cards | None = None
    warnings: list[str] = []  # what the cards left out (see ``warnings``)
    # the report's diagnoses (``score.diagnose.of_run``), when the audit wrote the report
    diagnoses: list[Diagnosis] | None = None

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return 130
        return 1 if self.stop_reasons or self.failed_calls else 0


def run_info(manifest: Manifest) -> RunInfo:
    ids = {spec.name: judges.judge_id(spec) for spec in manifest.judges}
    return RunInfo(__version__, ids, manifest)


def prepare_dir(run_dir: Path) -> None:
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot create output directory {run_dir}: {e.strerror}") from None
    mark(run_dir)  # a babelrun run directory from now on (manifest._check_output_dir)


def plan_summary(plan: Plan) -> PlanSummary:
    """plan.json's content: the same whether written with run.yaml or rebuilt from it."""
    return PlanSummary(plan.n_items, plan.audit, plan.removed, plan.segmentation)


def write_run_files(manifest: Manifest, plan: Plan) -> None:
    """run.yaml and plan.json: the same bytes from every process of one run."""
    run_dir = manifest.run_dir
    write_atomic(run_dir / RUN_YAML, msgspec.yaml.encode(run_info(manifest)))
    write_atomic(run_dir / PLAN_JSON, msgspec.json.encode(plan_summary(plan)))


def check_plan(plan: Plan) -> None:
    """An empty plan (an empty corpus, filters that remove every reference, perturbations
    that change nothing) would audit nothing and report every card within the thresholds."""
    if plan.n_items == 0:
        removed = sum(r.count for r in plan.removed) if plan.removed else 0
        skipped = sum(row.skipped for row in plan.audit)
        raise ManifestError("corpus", f"the plan has no items ({removed} reference(s) removed by filters, "
                            f"{skipped} no-op perturbation(s) skipped): nothing to audit")


def check_shardable(manifest: Manifest, *, escalation_round: bool = False) -> None:
    """Judges that cannot be split into independent shards. Escalation-only judges can,
    where an executor runs them in a round after every shard's other judges
    (``escalation_round``: the Ray executor); a lone ``--shard`` process cannot."""
    for i, spec in enumerate(manifest.judges):
        if spec.batch:  # its pending-batch file is one per judge, not per shard
            raise UserError(f"judges[{i}] ({spec.name!r}) uses a provider batch (batch: true), which "
                            "cannot be split into shards; audit it without --shard or the Ray executor")
        if spec.calls == "escalations" and not escalation_round:  # its keys need every shard's records
            raise UserError(f"judges[{i}] ({spec.name!r}) is called on escalations only, which needs the "
                            "whole run's cheap-judge records; audit it without --shard")


# The engine's phases: every judge called on all keys, then the cascades' strong judges on
# what the first phase escalates.
PHASES = ("all", "escalations")


def run_shard(manifest: Manifest, plan: Plan, *, accounts: dict[str, limits.Budget] | None = None,
              progress: Progress | None = None, handle_signals: bool = True,
              build: Callable[[JudgeSpec, int], judges.Judge] = judges.build,
              phases: tuple[str, ...] = PHASES, wanted: DoneSet | None = None,
              only: frozenset[str] | None = None, limit: int | None = None,
              budget_usd: float | None = None, stop: threading.Event | None = None,
              compacts: bool = False) -> engine.EngineResult:
    """Judge the plan's undone keys (its shard's, when ``plan.shard`` is set) into this
    process's own segments, in the given ``phases``. The caller holds the run lock in the
    matching mode. ``build`` makes each judge's backend (the Ray executor's replicas stand in
    for local models); ``wanted``: the escalated keys, when the caller has them; ``only``: the
    names of the judges to call (``audit --judge``; None: all); ``limit``: new presentations per
    judge (``audit --limit``); ``compacts``: the caller compacts the log with
    ``compact.write_parquet(index=True)`` after a run that was not interrupted, and that
    parse writes the last segment's keys index (not the writer's close: one parse, not two)."""
    run_dir, shard = manifest.run_dir, plan.shard
    log.repair(run_dir, shard)
    done = DoneSet.from_log(run_dir)
    called = [spec for spec in manifest.judges if spec.calls in phases and (only is None or spec.name in only)]
    backends = [build(spec, manifest.seed) for spec in called]
    cfg = manifest.log
    writer = log.LogWriter(run_dir, fsync=cfg.fsync, fsync_interval=cfg.fsync_interval_s,
                           segment_bytes=int(cfg.segment_mb * (1 << 20)), shard=shard)
    options = extras(manifest, budget_usd)
    index = True
    try:
        outcome = _judge(backends, plan, done, writer, manifest, wanted, progress=progress,
                         handle_signals=handle_signals, accounts=accounts, limit=limit, stop=stop, **options)
        index = not compacts or outcome.interrupted
        return outcome
    finally:
        writer.close(index=index)
        cache = options.get("cache")
        if cache is not None and cache.writes and manifest.cache is not None:
            from ..store.cache import prune  # bounded: the least recently used go past max_mb

            prune(cache.root, manifest.cache.max_mb)
        if cache is not None and (refused := cache.refused_line()) is not None:
            (progress or Progress()).note(refused)  # entries not believed: misses, their calls made


def shard_budget(budget: float | None, shard: log.Shard | None) -> float | None:
    """``--budget`` for one shard: its 1/N share of each judge's budget. A shard cannot see
    the others' spend, and its keys are a hash-uniform 1/N of each judge's, so N shards
    together stop within the budget plus one call's cost per process (docs/stopping.md)."""
    return budget if budget is None or shard is None else budget / shard.count


def extras(manifest: Manifest, budget_usd: float | None = None) -> dict:
    """The engine options of issue 29 the manifest turns on (none by default): stopping, the
    response cache, the judges' prices (the ledger) and ``--budget``."""
    from ..engine.ledger import price_of
    from ..store.cache import ResponseCache

    out: dict = {}
    if manifest.stopping is not None:
        out["stopping"] = manifest.stopping
    if manifest.cache is not None:
        out["cache"] = ResponseCache(manifest.cache.dir, manifest.cache.max_mb)
        out["cache_sampled"] = manifest.cache.sampled
    prices = {j.name: p for j in manifest.judges if (p := price_of(j)) is not None}
    if prices:
        out["prices"] = prices
    if budget_usd is not None:
        if not prices:
            raise UserError("--budget needs a price: give the judges `price:` (or `price_file:`)")
        out["budget_usd"] = budget_usd
    return out


def escalations(manifest: Manifest) -> DoneSet:
    """The keys the cascades escalate to their escalation-only strong judges, recomputed
    from the cheap judges' records in the log (so a resumed run asks the same)."""
    data = compact.load(manifest.run_dir, composite.COLUMNS)
    strong = {spec.name for spec in manifest.judges if spec.calls == "escalations"}
    return DoneSet(composite.escalations(data, manifest.composites, run_info(manifest).judge_ids, strong))


def _judge(backends: list, plan: Plan, done: DoneSet, writer: log.LogWriter, manifest: Manifest,
           wanted: DoneSet | None, **options) -> engine.EngineResult:
    """The engine over the judges, in two phases when a cascade's strong judge is called on
    escalations only: first every other judge, then the strong judges on what the cheap
    judges' records escalate."""
    first = [b for b in backends if b.spec.calls == "all"]
    later = [b for b in backends if b.spec.calls == "escalations"]
    outcomes = ([anyio.run(lambda: engine.run(first, plan, done, writer, engine.RunOptions(**options)))]
                if first else [])
    if later and not any(o.interrupted for o in outcomes):
        wanted = wanted if wanted is not None else escalations(manifest)
        outcomes.append(anyio.run(lambda: engine.run(later, plan, done, writer,
                                                     engine.RunOptions(wanted=wanted, **options))))
    return engine.EngineResult([s for o in outcomes for s in o.judges], any(o.interrupted for o in outcomes),
                               writer.written, sum(o.elapsed_s for o in outcomes))


def result_of(run_dir: Path, states: list[engine.JudgeState], *, written: int, interrupted: bool,
              elapsed_s: float) -> AuditResult:
    stats = RunStats(round(elapsed_s, 3), interrupted, [s.stats() for s in states])
    return AuditResult(
        run_dir=str(run_dir), planned_calls=sum(s.planned for s in states),
        already_done=sum(s.done_before for s in states), new_records=written,
        interrupted=interrupted, stop_reasons=[s.stopped for s in states if s.stopped],
        failed_calls=sum(s.unfinished for s in states), stats=stats,
    )


def write_stats(run_dir: Path, stats: RunStats, name: str = STATS_JSON) -> None:
    """Add this process's stats to the file's (a rerun never wipes an earlier run's calls)."""
    from ..store.rundir import accumulate

    path = run_dir / name
    try:
        previous = msgspec.json.decode(path.read_bytes(), type=RunStats)
    except (FileNotFoundError, msgspec.DecodeError):  # absent, or of an unknown shape: start afresh
        previous = None
    total = accumulate(previous, stats)
    if name == STATS_JSON:
        total = _spend_from_log(run_dir, total)
    write_atomic(path, msgspec.json.format(msgspec.json.encode(total), indent=2))


def _spend_from_log(run_dir: Path, total: RunStats) -> RunStats:
    """The totals' spend rebuilt from the log (``ledger.from_log``), not summed over the
    processes' entries: a process killed before it wrote its entry spent what its records say.
    Each process's own entry keeps what that process counted."""
    from ..engine.ledger import from_log, price_of
    from ..store.rundir import read_run_info

    try:
        info = read_run_info(run_dir)
        priced = {info.judge_ids[j.name]: (p, j.batch) for j in info.manifest.judges
                  if j.name in info.judge_ids and (p := price_of(j)) is not None}
    except UserError:  # run.yaml or a price file unreadable now: the processes' sum stands
        return total
    if not priced:
        return total
    spend = from_log(run_dir, priced)
    return msgspec.structs.replace(total, judges=[
        msgspec.structs.replace(j, spend=spend[j.judge_id]) if j.judge_id in spend else j for j in total.judges])


def return_freed_memory() -> None:
    """Hand the heap that judging and compaction freed back to the OS (glibc keeps it), so
    that the report's plotting (matplotlib: ~40 MB) does not stack on top of it: a full
    65-language plan then stays under its 300 MB peak (bench/full_plan.py)."""
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to ask
        pass
    import pyarrow as pa

    pa.default_memory_pool().release_unused()  # Arrow's allocator keeps its freed pages too


def score_run(run_dir: Path, *, write_report: bool = True) -> score.Cards:
    """Recompute judgements.parquet and cards.json from the log alone (and the run's manifest
    in run.yaml: scoring settings, seed, composite judges), then, unless ``write_report`` is
    False, the report (report.md, report.html, plots/) through ``report.write``, the one writer
    of report.md: the same bytes ``babelrun report RUN`` writes there. An audit's finish passes
    False and writes the report itself once stats.json is written. An unreadable plan.json (a
    summary of the plan) is rebuilt from run.yaml's manifest first."""
    run_dir = Path(run_dir)
    if not plan_summary_is_readable(run_dir):
        plan = Plan.from_manifest(read_run_info(run_dir).manifest)
        write_atomic(run_dir / PLAN_JSON, msgspec.json.encode(plan_summary(plan)))
    cards = cards_of_run(run_dir)
    if write_report:
        report.write([run_dir], run_dir, cards={run_dir: cards})
    return cards


def warnings(run_dir: Path) -> list[str]:
    """What a finished run directory's readers had to work around, one line each: log lines
    skipped as invalid (named ``segment:line``, from the last compaction), and planned keys
    of the judges called on every key without a verdict (a deleted segment, a stopped judge)."""
    run_dir = Path(run_dir)
    out = []
    bad = compact.bad_lines(run_dir)
    if bad:
        shown = ", ".join(str(b) for b in bad[:20])
        more = f", … ({len(bad)} named in judgements.parquet's metadata)" if len(bad) > 20 else ""
        out.append(f"{len(bad)} invalid log line(s) skipped: {shown}{more}")
    info = read_run_info(run_dir)
    pairs = compact.load(run_dir, ["judge", "judge_id"]).unify_dictionaries().combine_chunks()
    pairs = pairs.group_by(["judge", "judge_id"]).aggregate([])
    current = set(info.judge_ids.values())
    for name, jid in zip(pairs["judge"].to_pylist(), pairs["judge_id"].to_pylist(), strict=True):
        if name in info.judge_ids and jid not in current:
            out.append(f"judge {name!r} also has records under an earlier judge_id {jid} (its manifest "
                       f"changed since): they are carded apart as {stale_label(name, jid)!r}")
    items = read_plan_summary(run_dir).items
    every_key = [info.judge_ids[j.name] for j in info.manifest.judges if j.calls == "all"]
    if items and every_key:
        counted = compact.load(run_dir, ["judge_id"])["judge_id"].cast("string")
        counts = {jid: 0 for jid in every_key}
        for jid, n in zip(*_value_counts(counted), strict=True):
            if jid in counts:
                counts[jid] = n
        missing = sum(2 * items - min(n, 2 * items) for n in counts.values()) - _not_needed(run_dir, info, every_key)
        if missing > 0:
            out.append(f"{missing} of {2 * items * len(every_key)} planned key(s) have no verdict: the cards "
                       "leave them out; `babelrun audit MANIFEST` judges them")
    return out


def _not_needed(run_dir: Path, info, judge_ids: list[str]) -> int:
    """Keys with no record because their cell stopped (``stopping:``): not needed, so no
    missing verdict. Decided from the log as the cards decide it (``stopping.from_log``)."""
    how = info.manifest.stopping
    if how is None:
        return 0
    from ..engine.stopping import from_log

    judges = {j.name: info.judge_ids[j.name] for j in info.manifest.judges
              if j.protocol == "pairwise" and info.judge_ids.get(j.name) in judge_ids}
    planned: dict[str, int] = {}
    for a in read_plan_summary(run_dir).perturbation_audit:
        for name in (a.lang, f"{a.lang}/{a.perturbation}"):
            planned[name] = planned.get(name, 0) + a.emitted
    return sum(2 * max(0, planned.get(c.cell, c.items) - c.items)
               for replayed in from_log(run_dir, how, info.manifest.seed, judges).values()
               for c in replayed.cells.values())


def _value_counts(column) -> tuple[list[str], list[int]]:
    import pyarrow.compute as pc

    counts = pc.value_counts(column)
    return counts.field("values").to_pylist(), counts.field("counts").to_pylist()
