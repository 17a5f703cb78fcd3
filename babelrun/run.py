"""``babelrun audit``: manifest → plan → engine → log → cards, resumable at every step.

The run directory holds ``run.yaml`` (the resolved manifest, judge ids, babelrun version),
``plan.json`` (the perturbation audit of the plan), ``log/*.jsonl`` (the source of truth),
``judgements.parquet``, ``cards.json``, ``report.md`` and ``stats.json``. Running the same
manifest again judges only the keys without an ``ok`` record; a changed manifest adds only
its new keys. Cards cover every record in the run directory.
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import msgspec

from . import __version__, compact, corpus, engine, items, judges, log, report, score
from .errors import UserError
from .manifest import Manifest, ScoringSpec


class RunInfo(msgspec.Struct, frozen=True):
    babelrun_version: str
    judge_ids: dict[str, str]
    manifest: Manifest


class Plan(msgspec.Struct, frozen=True):
    items: int
    perturbation_audit: list[items.PerturbationAudit]


class AuditResult(msgspec.Struct):
    run_dir: str
    planned_calls: int
    already_done: int
    new_records: int
    interrupted: bool
    stop_reasons: list[str]
    failed_calls: int
    cards: score.Cards | None = None

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return 130
        return 1 if self.stop_reasons or self.failed_calls else 0


def plan(manifest: Manifest) -> tuple[list[items.Item], list[items.PerturbationAudit]]:
    references = corpus.select(manifest)
    perturbations = [(p.name, list(p.severities)) for p in manifest.perturbations]
    return items.build(references, perturbations, manifest.seed)


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def run_info(manifest: Manifest) -> RunInfo:
    ids = {spec.name: judges.judge_id(spec) for spec in manifest.judges}
    return RunInfo(__version__, ids, manifest)


def audit(manifest: Manifest, *, progress_interval: float | None = None,
          handle_signals: bool = True) -> AuditResult:
    run_dir = manifest.run_dir
    planned_items, perturbation_audit = plan(manifest)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot create output directory {run_dir}: {e.strerror}") from None
    _write_atomic(run_dir / "run.yaml", msgspec.yaml.encode(run_info(manifest)))
    _write_atomic(run_dir / "plan.json", msgspec.json.encode(Plan(len(planned_items), perturbation_audit)))

    log.repair(run_dir)
    done = log.done_keys(log.read(run_dir))
    backends = [judges.build(spec, manifest.seed) for spec in manifest.judges]
    writer = log.LogWriter(run_dir)
    try:
        outcome = anyio.run(lambda: engine.run(backends, planned_items, done, writer,
                                               progress_interval=progress_interval,
                                               handle_signals=handle_signals))
    finally:
        writer.close()

    planned = 2 * len(planned_items) * len(backends)
    result = AuditResult(
        run_dir=str(run_dir), planned_calls=planned,
        already_done=sum(s.done_before for s in outcome.judges), new_records=outcome.written,
        interrupted=outcome.interrupted, stop_reasons=outcome.stop_reasons,
        failed_calls=sum(s.remaining for s in outcome.judges),
    )
    _write_atomic(run_dir / "stats.json", msgspec.json.format(msgspec.json.encode(
        {"elapsed_s": round(outcome.elapsed_s, 3), "judges": [s.__dict__ for s in outcome.judges]}
    ), indent=2))
    if not outcome.interrupted:
        result.cards = score_run(run_dir, manifest.scoring, manifest.seed)
    return result


def _run_info(run_dir: Path) -> RunInfo:
    path = run_dir / "run.yaml"
    try:
        return msgspec.yaml.decode(path.read_bytes(), type=RunInfo)
    except FileNotFoundError:
        raise UserError(f"{run_dir} is not a babelrun run directory (no run.yaml)") from None


def score_run(run_dir: Path, scoring: ScoringSpec | None = None, seed: int | None = None) -> score.Cards:
    """Recompute cards.json, report.md and judgements.parquet from the log alone."""
    run_dir = Path(run_dir)
    if scoring is None or seed is None:
        info = _run_info(run_dir)
        scoring, seed = info.manifest.scoring, info.manifest.seed
    plan_file = run_dir / "plan.json"
    audit_rows = msgspec.json.decode(plan_file.read_bytes(), type=Plan).perturbation_audit if plan_file.exists() else []
    data = compact.load(run_dir)
    compact.write_parquet(run_dir, data)
    cards = score.score(data, audit_rows, replicates=scoring.bootstrap,
                        confidence=scoring.confidence, seed=seed)
    _write_atomic(run_dir / "cards.json", score.encode(cards))
    _write_atomic(run_dir / "report.md", report.markdown(cards).encode())
    return cards
