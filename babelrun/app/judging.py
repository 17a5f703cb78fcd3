"""One shard's judging, as every executor runs it: the engine over the judges called on all
keys, then the cascades' escalation-only judges on what the first phase escalates; the engine
options the manifest turns on; a shard's share of ``--budget``. ``audit.py`` runs it in this
process; ``cluster.py`` on Ray workers."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import anyio

from .. import engine, judges
from ..engine import limits
from ..engine.progress import Progress
from ..errors import UserError
from ..judges.local import warm_up
from ..plan import Plan
from ..score import composite
from ..spec import JudgeSpec, Manifest
from ..store import compact, log
from ..store.done import DoneSet

# The engine's phases: every judge called on all keys, then the cascades' strong judges on
# what the first phase escalates.
PHASES = ("all", "escalations")


def check_shardable(manifest: Manifest, *, escalation_round: bool = False) -> None:
    """Judges that cannot be split into independent shards. Escalation-only judges can,
    where an executor runs them in a round after every shard's other judges
    (``escalation_round``: the Ray executor); a lone ``--shard`` process cannot."""
    for i, spec in enumerate(manifest.judges):
        if judges.batch_of(spec):  # its pending-batch file is one per judge, not per shard
            raise UserError(f"judges[{i}] ({spec.name!r}) uses a provider batch (batch: true), which "
                            "cannot be split into shards; audit it without --shard or the Ray executor")
        if spec.calls == "escalations" and not escalation_round:  # its keys need every shard's records
            raise UserError(f"judges[{i}] ({spec.name!r}) is called on escalations only, which needs the "
                            "whole run's cheap-judge records; audit it without --shard")


def check_runs_here(manifest: Manifest, shard: log.Shard | None) -> None:
    """What an audit in this process (one shard of it, with ``shard``) cannot run: replicas
    are Ray actors, and a lone shard runs only the judges ``check_shardable`` lets through."""
    if shard is not None:
        check_shardable(manifest)
    for i, spec in enumerate(manifest.judges):
        if judges.local_of(spec).replicas > 1:
            raise UserError(f"judges[{i}].replicas: replicas are Ray actors; use executor: ray "
                            "(or --executor ray)")


def run_shard(manifest: Manifest, plan: Plan, judge_ids: dict[str, str], *,
              accounts: dict[str, limits.Budget] | None = None, progress: Progress | None = None,
              handle_signals: bool = True, build: Callable[[JudgeSpec, int], judges.Judge] = judges.build,
              phases: tuple[str, ...] = PHASES, wanted: DoneSet | None = None,
              only: frozenset[str] | None = None, limit: int | None = None,
              budget_usd: float | None = None, stop: threading.Event | None = None,
              compacts: bool = False, backends: list[judges.Judge] | None = None) -> engine.EngineResult:
    """Judge the plan's undone keys (its shard's, when ``plan.shard`` is set) into this
    process's own segments, in the given ``phases``. The caller holds the run lock in the
    matching mode. ``judge_ids``: run.yaml's (judge name -> id); ``build`` makes each judge's
    backend (the Ray executor's replicas stand in for local models); ``wanted``: the escalated
    keys, when the caller has them; ``only``: the names of the judges to call (``audit
    --judge``; None: all); ``limit``: new presentations per judge (``audit --limit``);
    ``compacts``: the caller compacts the log with ``compact.write_parquet(index=True)`` after
    a run that was not interrupted, and that parse writes the last segment's keys index (not
    the writer's close: one parse, not two); ``backends``: the judges ``called_judges`` built
    (the caller's, warming up), instead of building them here."""
    run_dir, shard = manifest.run_dir, plan.shard
    log.repair(run_dir, shard)
    done = DoneSet.from_log(run_dir)
    if backends is None:
        backends = called_judges(manifest, phases, only, build)
    cfg = manifest.log
    writer = log.LogWriter(run_dir, fsync=cfg.fsync, fsync_interval=cfg.fsync_interval_s,
                           segment_bytes=int(cfg.segment_mb * (1 << 20)), shard=shard)
    options = engine_options(manifest, budget_usd)
    index = True
    try:

        def escalated() -> DoneSet:  # asked once the first phase has judged: its records escalate
            return wanted if wanted is not None else escalations(manifest, judge_ids)

        outcome = _judge(backends, plan, done, writer, escalated, progress=progress, handle_signals=handle_signals,
                         accounts=accounts, limit=limit, stop=stop, **options)
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


def called_judges(manifest: Manifest, phases: tuple[str, ...] = PHASES, only: frozenset[str] | None = None,
                  build: Callable[[JudgeSpec, int], judges.Judge] = judges.build) -> list[judges.Judge]:
    """The backends of the judges a shard calls in ``phases`` (``only``: of these names)."""
    return [build(spec, manifest.seed) for spec in manifest.judges
            if spec.calls in phases and (only is None or spec.name in only)]


def warmed_judges(manifest: Manifest, only: frozenset[str] | None) -> list[judges.Judge]:
    """``called_judges``, the in-process ones among them already loading their models on their
    model threads (``warm_up``), so that the load overlaps the plan; their first batch waits for it."""
    backends = called_judges(manifest, only=only)
    warm_up(backends)
    return backends


def shard_budget(budget: float | None, shard: log.Shard | None) -> float | None:
    """``--budget`` for one shard: its 1/N share of each judge's budget. A shard cannot see
    the others' spend, and its keys are a hash-uniform 1/N of each judge's, so N shards
    together stop within the budget plus one call's cost per process (docs/stopping.md)."""
    return budget if budget is None or shard is None else budget / shard.count


def engine_options(manifest: Manifest, budget_usd: float | None = None) -> dict[str, Any]:
    """The engine options the manifest turns on (none by default): early stopping, the
    response cache, the judges' prices (the cost ledger) and ``--budget``; a ``--budget``
    without a price is one clear line."""
    from ..engine.ledger import price_of
    from ..store.cache import ResponseCache

    out: dict[str, Any] = {}
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


def escalations(manifest: Manifest, judge_ids: dict[str, str]) -> DoneSet:
    """The keys the cascades escalate to their escalation-only strong judges, recomputed
    from the cheap judges' records in the log (so a resumed run asks the same)."""
    data = compact.load(manifest.run_dir, composite.COLUMNS)
    strong = {spec.name for spec in manifest.judges if spec.calls == "escalations"}
    return DoneSet(composite.escalations(data, manifest.composites, judge_ids, strong))


def _judge(backends: list[judges.Judge], plan: Plan, done: DoneSet, writer: log.LogWriter,
           escalated: Callable[[], DoneSet], **options: Any) -> engine.EngineResult:
    """The engine over the judges, in two phases when a cascade's strong judge is called on
    escalations only: first every other judge, then the strong judges on what the cheap
    judges' records escalate."""
    first = [b for b in backends if b.spec.calls == "all"]
    later = [b for b in backends if b.spec.calls == "escalations"]
    outcomes = ([anyio.run(lambda: engine.run(first, plan, done, writer, engine.RunOptions(**options)))]
                if first else [])
    if later and not any(o.interrupted for o in outcomes):
        wanted = escalated()
        outcomes.append(anyio.run(lambda: engine.run(later, plan, done, writer,
                                                     engine.RunOptions(wanted=wanted, **options))))
    return engine.EngineResult([s for o in outcomes for s in o.judges], any(o.interrupted for o in outcomes),
                               writer.written, sum(o.elapsed_s for o in outcomes))
