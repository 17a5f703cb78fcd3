"""The run directory: every file's name, and the small files that describe a run.

::

    RUN_DIR/
      run.yaml            RunInfo: the resolved manifest, judge ids, babelrun version
      plan.json           PlanSummary: items planned, the perturbation audit, filters
      log/*.jsonl         the verdict log, the source of truth (store/log.py)
      lock, locks/        the run lock and per-shard locks (store/log.py)
      batches/            pending provider batches (engine/batches.py)
      judgements.parquet  the log compacted (store/compact.py), a cache
      stats.json          RunStats of the last audit (stats.<shard>.json per shard)
      cards.json  report.md  report.html  plots/  calibration.json  invariance.json

Every module names these files through the constants here.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from ..core.items import PerturbationAudit, Removed
from ..errors import UserError
from ..spec import Manifest

RUN_YAML = "run.yaml"
PLAN_JSON = "plan.json"
STATS_JSON = "stats.json"
CARDS_JSON = "cards.json"
REPORT_MD = "report.md"
REPORT_HTML = "report.html"
PLOTS = "plots"
CALIBRATION_JSON = "calibration.json"
INVARIANCE_JSON = "invariance.json"
ANALYSES = (CALIBRATION_JSON, INVARIANCE_JSON)  # written by analyses of a finished run


class RunInfo(msgspec.Struct, frozen=True):
    babelrun_version: str
    judge_ids: dict[str, str]
    manifest: Manifest


class PlanSummary(msgspec.Struct, frozen=True):
    items: int
    perturbation_audit: list[PerturbationAudit]
    removed_by_filters: list[Removed] = []


class JudgeStats(msgspec.Struct, frozen=True):
    """What one judge did in one run (``stats.json``)."""

    judge: str
    judge_id: str
    planned: int
    done_before: int
    ok: int
    failed: int
    calls: int  # HTTP or model calls, retries included
    retries: int
    rate_limited: int  # 429 replies
    errors: dict[str, int]  # failed calls by final error kind
    latency_ms: dict[str, float | None]  # p50 / p95 / p99 of successful calls
    tokens_in: int
    tokens_out: int
    calls_per_s: float
    elapsed_s: float
    stopped: str | None



class RunStats(msgspec.Struct, frozen=True):
    elapsed_s: float
    interrupted: bool
    judges: list[JudgeStats]
    # What the run directory's readers had to work around: log lines skipped as invalid
    # (``segment:line (why)``), planned keys without a verdict. Empty for a healthy run.
    warnings: list[str] = []


def read_run_info(run_dir: Path) -> RunInfo:
    """The run directory's run.yaml; a clear error when it is not a run directory."""
    try:
        return msgspec.yaml.decode((Path(run_dir) / RUN_YAML).read_bytes(), type=RunInfo)
    except FileNotFoundError:
        raise UserError(f"{run_dir} is not a babelrun run directory (no run.yaml)") from None
    except (OSError, msgspec.DecodeError) as e:  # the only record of the manifest: not guessed
        why = " ".join(str(e).split())[:120]
        raise UserError(f"{Path(run_dir) / RUN_YAML} is unreadable ({why}); `babelrun audit MANIFEST` "
                        "writes it again") from None


def read_plan_summary(run_dir: Path) -> PlanSummary:
    """plan.json; an empty summary where the run has none (a log merged from elsewhere)."""
    plan_file = Path(run_dir) / PLAN_JSON
    if not plan_file.exists():
        return PlanSummary(0, [])
    try:
        return msgspec.json.decode(plan_file.read_bytes(), type=PlanSummary)
    except (OSError, msgspec.DecodeError) as e:
        why = " ".join(str(e).split())[:120]
        raise UserError(f"{plan_file} is unreadable ({why}); `babelrun audit MANIFEST` writes it again") from None


def plan_summary_is_readable(run_dir: Path) -> bool:
    try:
        read_plan_summary(run_dir)
    except UserError:
        return False
    return True
