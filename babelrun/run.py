"""``babelrun audit``: manifest → plan → engine → log → cards, resumable at every step.

The run directory holds ``run.yaml`` (the resolved manifest, judge ids, babelrun version),
``plan.json`` (the perturbation audit of the plan), ``log/*.jsonl`` (the source of truth),
``judgements.parquet``, ``cards.json``, ``stats.json`` and the report (``report.md``,
``report.html``, ``plots/``). Running the same
manifest again judges only the keys without an ``ok`` record; a changed manifest adds only
its new keys. Cards cover every record in the run directory. One process at a time writes a
run directory (``log.RunLock``).
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import msgspec

from . import __version__, compact, corpus, engine, items, judges, log, report, score
from .errors import UserError
from .manifest import Manifest, ScoringSpec
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
            outcome = anyio.run(lambda: engine.run(backends, plan, done, writer, progress=progress,
                                                   handle_signals=handle_signals))
        finally:
            writer.close()
        stats = RunStats(round(outcome.elapsed_s, 3), outcome.interrupted,
                         [s.stats() for s in outcome.judges])
        _write_atomic(run_dir / "stats.json", msgspec.json.format(msgspec.json.encode(stats), indent=2))
        result = AuditResult(
            run_dir=str(run_dir), planned_calls=plan.calls_per_judge * len(backends),
            already_done=sum(s.done_before for s in outcome.judges), new_records=outcome.written,
            interrupted=outcome.interrupted, stop_reasons=outcome.stop_reasons,
            failed_calls=sum(s.remaining for s in outcome.judges), stats=stats,
        )
        if not outcome.interrupted:
            result.cards = score_run(run_dir, manifest.scoring, manifest.seed)
            # The full report (report.md with the leaderboard, report.html, plots/) from the
            # log and the cards just scored.
            report.write([run_dir], run_dir, cards={run_dir: result.cards})
    return result


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


def score_run(run_dir: Path, scoring: ScoringSpec | None = None, seed: int | None = None) -> score.Cards:
    """Recompute judgements.parquet, cards.json and report.md from the log alone."""
    run_dir = Path(run_dir)
    if scoring is None or seed is None:
        info = read_run_info(run_dir)
        scoring, seed = info.manifest.scoring, info.manifest.seed
    plan_file = run_dir / "plan.json"
    summary = (msgspec.json.decode(plan_file.read_bytes(), type=PlanSummary) if plan_file.exists()
               else PlanSummary(0, []))
    data = compact.load(run_dir, score.SCORING_COLUMNS)
    cards = score.score(data, summary.perturbation_audit, replicates=scoring.bootstrap,
                        confidence=scoring.confidence, seed=seed)
    cards = msgspec.structs.replace(cards, removed_by_filters=summary.removed_by_filters)
    _write_atomic(run_dir / "cards.json", score.encode(cards))
    _write_atomic(run_dir / "report.md", report.markdown(cards).encode())
    return cards
