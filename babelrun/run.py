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

from collections.abc import Callable
from pathlib import Path

import anyio
import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from . import (
    __version__,
    compact,
    composite,
    corpus,
    engine,
    items,
    judges,
    limits,
    log,
    report,
    score,
)
from .errors import UserError
from .files import write_atomic
from .manifest import JudgeSpec, Manifest
from .plan import Plan
from .progress import Progress


class RunInfo(msgspec.Struct, frozen=True):
    babelrun_version: str
    judge_ids: dict[str, str]
    manifest: Manifest


class PlanSummary(msgspec.Struct, frozen=True):
    items: int
    perturbation_audit: list[items.PerturbationAudit]
    removed_by_filters: list[corpus.Removed] = []


class RunStats(msgspec.Struct, frozen=True):
    elapsed_s: float
    interrupted: bool
    judges: list[engine.JudgeStats]


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


def write_run_files(manifest: Manifest, plan: Plan) -> None:
    """run.yaml and plan.json: the same bytes from every process of one run."""
    run_dir = manifest.run_dir
    write_atomic(run_dir / "run.yaml", msgspec.yaml.encode(run_info(manifest)))
    write_atomic(run_dir / "plan.json", msgspec.json.encode(PlanSummary(plan.n_items, plan.audit, plan.removed)))


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
              phases: tuple[str, ...] = PHASES, wanted: log.DoneSet | None = None) -> engine.EngineResult:
    """Judge the plan's undone keys (its shard's, when ``plan.shard`` is set) into this
    process's own segments, in the given ``phases``. The caller holds the run lock in the
    matching mode. ``build`` makes each judge's backend (the Ray executor's replicas stand in
    for local models); ``wanted``: the escalated keys, when the caller has them."""
    run_dir, shard = manifest.run_dir, plan.shard
    log.repair(run_dir, shard)
    done = log.DoneSet.from_log(run_dir)
    called = [spec for spec in manifest.judges if spec.calls in phases]
    backends = [build(spec, manifest.seed) for spec in called]
    cfg = manifest.log
    writer = log.LogWriter(run_dir, fsync=cfg.fsync, fsync_interval=cfg.fsync_interval_s,
                           segment_bytes=int(cfg.segment_mb * (1 << 20)), shard=shard)
    try:
        return _judge(backends, plan, done, writer, manifest, wanted, progress=progress,
                      handle_signals=handle_signals, accounts=accounts)
    finally:
        writer.close()


def escalations(manifest: Manifest) -> log.DoneSet:
    """The keys the cascades escalate to their escalation-only strong judges, recomputed
    from the cheap judges' records in the log (so a resumed run asks the same)."""
    data = compact.load(manifest.run_dir, composite.COLUMNS)
    strong = {spec.name for spec in manifest.judges if spec.calls == "escalations"}
    return log.DoneSet(composite.escalations(data, manifest.composites, run_info(manifest).judge_ids, strong))


def _judge(backends: list, plan: Plan, done: log.DoneSet, writer: log.LogWriter, manifest: Manifest,
           wanted: log.DoneSet | None, **options) -> engine.EngineResult:
    """The engine over the judges, in two phases when a cascade's strong judge is called on
    escalations only: first every other judge, then the strong judges on what the cheap
    judges' records escalate."""
    first = [b for b in backends if b.spec.calls == "all"]
    later = [b for b in backends if b.spec.calls == "escalations"]
    outcomes = [anyio.run(lambda: engine.run(first, plan, done, writer, **options))] if first else []
    if later and not any(o.interrupted for o in outcomes):
        wanted = wanted if wanted is not None else escalations(manifest)
        outcomes.append(anyio.run(lambda: engine.run(later, plan, done, writer, wanted=wanted, **options)))
    return engine.EngineResult([s for o in outcomes for s in o.judges], any(o.interrupted for o in outcomes),
                               writer.written, sum(o.elapsed_s for o in outcomes))


def result_of(run_dir: Path, states: list[engine.JudgeState], *, written: int, interrupted: bool,
              elapsed_s: float) -> AuditResult:
    stats = RunStats(round(elapsed_s, 3), interrupted, [s.stats() for s in states])
    return AuditResult(
        run_dir=str(run_dir), planned_calls=sum(s.planned for s in states),
        already_done=sum(s.done_before for s in states), new_records=written,
        interrupted=interrupted, stop_reasons=[s.stopped for s in states if s.stopped],
        failed_calls=sum(s.remaining for s in states), stats=stats,
    )


def write_stats(run_dir: Path, stats: RunStats, name: str = "stats.json") -> None:
    write_atomic(run_dir / name, msgspec.json.format(msgspec.json.encode(stats), indent=2))


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
    prepare_dir(run_dir)
    with log.RunLock(run_dir, shard):
        write_run_files(manifest, plan)
        # A shard outside Ray cannot see the others' calls: it paces at 1/N of each account.
        accounts = limits.accounts(manifest.judges, 1 / shard.count) if shard is not None else None
        outcome = run_shard(manifest, plan, accounts=accounts, progress=progress, handle_signals=handle_signals)
        result = result_of(run_dir, outcome.judges, written=outcome.written,
                           interrupted=outcome.interrupted, elapsed_s=outcome.elapsed_s)
        write_stats(run_dir, result.stats, "stats.json" if shard is None else f"stats.{shard.tag}.json")
        if not outcome.interrupted and shard is None:
            result.cards = score_run(run_dir)
            # The full report (report.md with the leaderboard, report.html, plots/) from the
            # log and the cards just scored.
            _return_freed_memory()
            report.write([run_dir], run_dir, cards={run_dir: result.cards})
    return result


def _return_freed_memory() -> None:
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


class MergeResult(msgspec.Struct, frozen=True):
    segments: int
    ok_records: int  # ok records in the log, repeats included
    counted: int  # keys counted once each
    planned: int
    cards: score.Cards


def merge_run(run_dir: Path) -> MergeResult:
    """Unify a run directory's segments (every shard's) into judgements.parquet and cards:
    repair torn lines, count each key's first ``ok`` record once. Idempotent. Takes the
    run lock exclusively, so it refuses while any shard is still writing."""
    run_dir = Path(run_dir)
    info = read_run_info(run_dir)
    with log.RunLock(run_dir):
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
    return MergeResult(len(log.segments(run_dir)), ok, counted, planned, cards)


def read_run_info(run_dir: Path) -> RunInfo:
    """The run directory's run.yaml; a clear error when it is not a run directory."""
    try:
        return msgspec.yaml.decode((run_dir / "run.yaml").read_bytes(), type=RunInfo)
    except FileNotFoundError:
        raise UserError(f"{run_dir} is not a babelrun run directory (no run.yaml)") from None


def compact_run(run_dir: Path) -> Path:
    """Write ``judgements.parquet`` from the log (a no-op read when it is current)."""
    run_dir = Path(run_dir)
    read_run_info(run_dir)
    return compact.write_parquet(run_dir)


def score_run(run_dir: Path) -> score.Cards:
    """Recompute judgements.parquet, cards.json and report.md from the log alone (and the
    run's manifest in run.yaml: scoring settings, seed, composite judges)."""
    run_dir = Path(run_dir)
    info = read_run_info(run_dir)
    scoring, seed, composites = info.manifest.scoring, info.manifest.seed, info.manifest.composites
    plan_file = run_dir / "plan.json"
    summary = (msgspec.json.decode(plan_file.read_bytes(), type=PlanSummary) if plan_file.exists()
               else PlanSummary(0, []))
    data = compact.load(run_dir, composite.COLUMNS if composites else score.SCORING_COLUMNS)
    derived = composite.derive(data, composites, info.judge_ids)
    tables = [composite.table(data, d) for d in derived]
    own = data
    subset = [info.judge_ids[j.name] for j in info.manifest.judges if j.calls == "escalations"]
    if subset:  # judges asked only on a cascade's hard presentations: no card of their own
        own = data.filter(pc.invert(pc.is_in(data["judge_id"].cast(pa.string()), pa.array(subset))))
    cards = score.score(pa.concat_tables([own, *tables]) if tables else own, summary.perturbation_audit,
                        replicates=scoring.bootstrap, confidence=scoring.confidence, seed=seed)
    composite_cards = [composite.card(d, data, t, info.judge_ids, replicates=scoring.bootstrap,
                                      confidence=scoring.confidence, seed=seed)
                       for d, t in zip(derived, tables, strict=True)]
    cards = msgspec.structs.replace(cards, removed_by_filters=summary.removed_by_filters,
                                    composites=composite_cards)
    write_atomic(run_dir / "cards.json", score.encode(cards))
    write_atomic(run_dir / "report.md", report.markdown(cards).encode())
    return cards
