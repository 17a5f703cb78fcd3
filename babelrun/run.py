"""``babelrun audit``: manifest → plan → engine → log → cards, resumable at every step.

The run directory holds ``run.yaml`` (the resolved manifest, judge ids, babelrun version),
``plan.json`` (the perturbation audit of the plan), ``log/*.jsonl`` (the source of truth),
``judgements.parquet``, ``cards.json``, ``report.md`` and ``stats.json``. Running the same
manifest again judges only the keys without an ``ok`` record; a changed manifest adds only
its new keys. Cards cover every record in the run directory. One process at a time writes a
run directory (``log.RunLock``).
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from . import __version__, compact, composite, corpus, engine, items, judges, log, report, score
from .errors import UserError
from .manifest import Manifest
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


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def run_info(manifest: Manifest) -> RunInfo:
    ids = {spec.name: judges.judge_id(spec) for spec in manifest.judges}
    return RunInfo(__version__, ids, manifest)


def _prepare(run_dir: Path) -> None:
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot create output directory {run_dir}: {e.strerror}") from None


def audit(manifest: Manifest, *, progress: Progress | None = None,
          handle_signals: bool = True) -> AuditResult:
    run_dir = manifest.run_dir
    plan = Plan.from_manifest(manifest)
    _prepare(run_dir)
    with log.RunLock(run_dir):
        _write_atomic(run_dir / "run.yaml", msgspec.yaml.encode(run_info(manifest)))
        _write_atomic(run_dir / "plan.json", msgspec.json.encode(PlanSummary(plan.n_items, plan.audit, plan.removed)))
        log.repair(run_dir)
        done = log.DoneSet.from_log(run_dir)
        backends = [judges.build(spec, manifest.seed) for spec in manifest.judges]
        cfg = manifest.log
        writer = log.LogWriter(run_dir, fsync=cfg.fsync, fsync_interval=cfg.fsync_interval_s,
                               segment_bytes=int(cfg.segment_mb * (1 << 20)))
        try:
            outcome = _judge(backends, plan, done, writer, manifest, progress, handle_signals)
        finally:
            writer.close()
        stats = RunStats(round(outcome.elapsed_s, 3), outcome.interrupted,
                         [s.stats() for s in outcome.judges])
        _write_atomic(run_dir / "stats.json", msgspec.json.format(msgspec.json.encode(stats), indent=2))
        result = AuditResult(
            run_dir=str(run_dir), planned_calls=sum(s.planned for s in outcome.judges),
            already_done=sum(s.done_before for s in outcome.judges), new_records=outcome.written,
            interrupted=outcome.interrupted, stop_reasons=outcome.stop_reasons,
            failed_calls=sum(s.remaining for s in outcome.judges), stats=stats,
        )
        if not outcome.interrupted:
            result.cards = score_run(run_dir)
    return result


def _judge(backends: list, plan: Plan, done: log.DoneSet, writer: log.LogWriter, manifest: Manifest,
           progress: Progress | None, handle_signals: bool) -> engine.EngineResult:
    """The engine over every judge, in two phases when a cascade's strong judge is called
    on escalations only: first every other judge, then the strong judges on what the cheap
    judges' records escalate (recomputed from the log, so a resumed run asks the same)."""
    first = [b for b in backends if b.spec.calls == "all"]
    later = [b for b in backends if b.spec.calls == "escalations"]
    outcome = anyio.run(lambda: engine.run(first, plan, done, writer, progress=progress,
                                           handle_signals=handle_signals))
    if not later or outcome.interrupted:
        return outcome
    data = compact.load(manifest.run_dir, composite.COLUMNS)
    ids = run_info(manifest).judge_ids
    wanted = log.DoneSet(composite.escalations(data, manifest.composites, ids, {b.spec.name for b in later}))
    second = anyio.run(lambda: engine.run(later, plan, done, writer, progress=progress,
                                          handle_signals=handle_signals, wanted=wanted))
    return engine.EngineResult(outcome.judges + second.judges, second.interrupted, second.written,
                               outcome.elapsed_s + second.elapsed_s)


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
    _write_atomic(run_dir / "cards.json", score.encode(cards))
    _write_atomic(run_dir / "report.md", report.markdown(cards).encode())
    return cards
