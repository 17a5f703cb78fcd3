"""What an audit writes into its run directory (before judging; the spend, rebuilt from the log,
after), and the names of every file the layers write at its top (the stale-file cleanup's list)."""

from __future__ import annotations

from pathlib import Path

import msgspec

from .. import judges, report
from ..core.version import __version__
from ..errors import ManifestError, UserError
from ..plan import Plan
from ..score import run as score_run
from ..spec import Manifest
from ..store.rundir import PlanSummary, RunDir, RunInfo
from ..store.stats import RunStats


def run_info(manifest: Manifest) -> RunInfo:
    """run.yaml's content: the manifest, its judges' ids and this babelrun's version."""
    ids = {spec.name: judges.judge_id(spec) for spec in manifest.judges}
    return RunInfo(__version__, ids, manifest)


def plan_summary(plan: Plan) -> PlanSummary:
    """plan.json's content: the same whether written with run.yaml or rebuilt from it."""
    return PlanSummary(plan.n_items, plan.audit, plan.removed, plan.segmentation)


def check_plan(plan: Plan) -> None:
    """An empty plan (an empty corpus, filters that remove every reference, perturbations
    that change nothing) would audit nothing and report every card within the thresholds."""
    if plan.n_items == 0:
        removed = sum(r.count for r in plan.removed) if plan.removed else 0
        skipped = sum(row.skipped for row in plan.audit)
        raise ManifestError("corpus", f"the plan has no items ({removed} reference(s) removed by filters, "
                            f"{skipped} no-op perturbation(s) skipped): nothing to audit")


def write_run_files(run_dir: RunDir, info: RunInfo, plan: Plan) -> None:
    """run.yaml and plan.json: the same bytes from every process of one run."""
    run_dir.write_info(info)
    run_dir.write_plan(plan_summary(plan))


def written_names() -> frozenset[str]:
    """The files the layers above the store write atomically at a run directory's top, each
    named by its own layer: the cards, the report, every analysis's result (its registry
    entry) and ``pin``'s default lock."""
    from ..analyses import registry
    from .lockfile import LOCK_NAME

    return frozenset({*score_run.WRITTEN, *report.WRITTEN, *registry.outputs(), LOCK_NAME})


def remove_stale_tmp(run_dir: RunDir) -> None:
    """The temporary files of dead writers of babelrun's files, removed (``RunDir.remove_stale_tmp``)."""
    run_dir.remove_stale_tmp(written_names())


def spend_from_log(run_dir: Path, total: RunStats) -> RunStats:
    """The run's totals with each judge's spend rebuilt from the log (``ledger.from_log``),
    not summed over the processes' entries: a process killed before it wrote its entry spent
    what its records say. Each process's own entry keeps what that process counted."""
    from ..engine.ledger import from_log, price_of

    try:
        info = RunDir(run_dir).info()
        priced = {info.judge_ids[j.name]: (p, judges.batch_of(j)) for j in info.manifest.judges
                  if j.name in info.judge_ids and (p := price_of(j)) is not None}
    except UserError:  # run.yaml or a price file unreadable now: the processes' sum stands
        return total
    if not priced:
        return total
    spend = from_log(run_dir, priced)
    return msgspec.structs.replace(total, judges=[
        msgspec.structs.replace(j, spend=spend[j.judge_id]) if j.judge_id in spend else j for j in total.judges])
