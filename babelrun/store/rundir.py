"""The run directory: every file's name, and the small files that describe a run.

::

    RUN_DIR/
      run.yaml            RunInfo: the resolved manifest, judge ids, babelrun version
      plan.json           PlanSummary: items planned, the perturbation audit, filters
      log/*.jsonl         the verdict log, the source of truth (store/log.py)
      lock, locks/        the run lock and per-shard locks (store/lock.py)
      .babelrun-run       the marker: a folder babelrun made (MARKER)
      batches/            pending provider batches (engine/batches.py)
      judgements.parquet  the log compacted (store/compact.py), a cache
      stats.json          RunStats: every audit process's, and their totals (stats.<shard>.json per shard)
      cards.json  report.md  report.html  plots/
      calibration.json  invariance.json  agreement.json  self_preference.json
                          the analyses' results (babelrun/analyses/registry.py lists them)

Every module names these files through the constants here.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from ..core.items import PerturbationAudit, Removed, Segmentation
from ..errors import NotApplicable, UserError
from ..spec import Manifest
from ..spec.flat import decode_manifest, flat_manifest

if TYPE_CHECKING:
    import pyarrow as pa

RUN_YAML = "run.yaml"
PLAN_JSON = "plan.json"
STATS_JSON = "stats.json"
CARDS_JSON = "cards.json"
REPORT_MD = "report.md"
REPORT_HTML = "report.html"
PLOTS = "plots"
CALIBRATION_JSON = "calibration.json"
INVARIANCE_JSON = "invariance.json"
AGREEMENT_JSON = "agreement.json"
SELF_PREFERENCE_JSON = "self_preference.json"
# The analyses that write these four are listed, with their files, in analyses/registry.py (a
# layer above): the report's staleness check iterates that registry.
LOCK_JSON = "judge.lock.json"  # `babelrun pin`'s default lock file
PARQUET = "judgements.parquet"
# The file babelrun writes into a run directory it makes: an ``output_dir`` that exists, is
# not empty and has neither it nor a run's run.yaml + log/ (a run made before the marker) is
# refused at validate, so an audit never writes into (or cleans) a folder of the user's files.
MARKER = ".babelrun-run"
# Every file babelrun writes atomically at a run directory's top: the only names whose
# temporary files (``NAME.<pid>.tmp``) the stale-file cleanup may remove.
WRITTEN = frozenset({RUN_YAML, PLAN_JSON, STATS_JSON, CARDS_JSON, REPORT_MD, REPORT_HTML, CALIBRATION_JSON,
                     INVARIANCE_JSON, AGREEMENT_JSON, SELF_PREFERENCE_JSON, LOCK_JSON, PARQUET, MARKER})
_STALE = re.compile(r"(?P<name>[A-Za-z0-9_.-]+)\.(?P<pid>[0-9]{1,10})\.tmp")
_SHARD_STATS = re.compile(r"stats\.s[0-9]+of[0-9]+\.json")


def stale_tmp_pid(name: str) -> int | None:
    """The writer's pid of ``name`` when it is the temporary file of a file babelrun writes
    (``cards.json.4242.tmp``); None for any other name (the user's ``thesis.4242.tmp``)."""
    m = _STALE.fullmatch(name)
    if m is None or not (m["name"] in WRITTEN or _SHARD_STATS.fullmatch(m["name"])):
        return None
    return int(m["pid"])


def is_run_dir(path: Path) -> bool:
    """A folder babelrun made (its marker), or a run made before the marker (run.yaml + log/)."""
    path = Path(path)
    return (path / MARKER).is_file() or ((path / RUN_YAML).is_file() and (path / "log").is_dir())


def mark(run_dir: Path) -> None:
    """Write the marker (once) into a run directory babelrun made or writes."""
    from .files import write_atomic

    marker = Path(run_dir) / MARKER
    if not marker.is_file():
        write_atomic(marker, b"a babelrun run directory: babelrun writes here (see docs/trust.md)\n")


class RunInfo(msgspec.Struct, frozen=True):
    babelrun_version: str
    judge_ids: dict[str, str]
    manifest: Manifest

    def encode(self) -> bytes:
        """run.yaml's bytes: the manifest in its flat shape (each judge's options beside its
        common fields, as the user wrote them)."""
        return msgspec.yaml.encode({"babelrun_version": self.babelrun_version, "judge_ids": self.judge_ids,
                                    "manifest": flat_manifest(self.manifest)})

    @classmethod
    def decode(cls, data: bytes) -> RunInfo:
        """A run.yaml, of this version or one written when every option sat in one struct."""
        raw = msgspec.yaml.decode(data)
        if not isinstance(raw, dict) or "manifest" not in raw:
            raise msgspec.ValidationError("Object missing required field `manifest`")
        head = msgspec.convert({k: v for k, v in raw.items() if k != "manifest"}, _RunHead)
        return cls(head.babelrun_version, head.judge_ids, decode_manifest(raw["manifest"], legacy=True))


class _RunHead(msgspec.Struct, frozen=True):
    babelrun_version: str
    judge_ids: dict[str, str]


class PlanSummary(msgspec.Struct, frozen=True):
    items: int
    perturbation_audit: list[PerturbationAudit]
    removed_by_filters: list[Removed] = []
    segmentation: list[Segmentation] = []  # per language: sentences per unit, weak or not


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
    # The cost ledger (engine/ledger.py): total, by kind and language; None without a price.
    spend: dict[str, Any] | None = None
    cached: int = 0  # records served by the response cache
    not_needed: int = 0  # keys left unjudged because their cell stopped (``stopping:``)



class ProcessStats(msgspec.Struct, frozen=True):
    """What one audit process did (one entry of ``RunStats.processes``)."""

    elapsed_s: float
    interrupted: bool
    judges: list[JudgeStats]
    # What the run directory's readers had to work around: log lines skipped as invalid
    # (``segment:line (why)``), planned keys without a verdict. Empty for a healthy run.
    warnings: list[str] = []


class RunStats(msgspec.Struct, frozen=True):
    """``stats.json``: the totals over every audit process that wrote the run (``judges``,
    ``elapsed_s``; ``interrupted``: the last one was), and each process's own entry, oldest
    first. A process adds its entry; it never replaces another's (``accumulate``)."""

    elapsed_s: float
    interrupted: bool
    judges: list[JudgeStats]
    processes: list[ProcessStats] = []
    # What the run directory's readers had to work around, as of the last scoring: log lines
    # skipped as invalid (``segment:line (why)``), planned keys without a verdict.
    warnings: list[str] = []


def _total(entries: list[JudgeStats]) -> JudgeStats:
    """One judge's entries (oldest first) summed. Latency percentiles do not add up: the
    total shows those of the process that judged the most; planned and stopped are the last
    process's, done_before the first's."""
    first, last = entries[0], entries[-1]
    errors: dict[str, int] = {}
    for e in entries:
        for kind, n in e.errors.items():
            errors[kind] = errors.get(kind, 0) + n
    ok, elapsed = sum(e.ok for e in entries), sum(e.elapsed_s for e in entries)
    busiest = max(entries, key=lambda e: e.ok)
    return JudgeStats(last.judge, last.judge_id, last.planned, first.done_before, ok, sum(e.failed for e in entries),
                      sum(e.calls for e in entries), sum(e.retries for e in entries),
                      sum(e.rate_limited for e in entries), dict(sorted(errors.items())), busiest.latency_ms,
                      sum(e.tokens_in for e in entries), sum(e.tokens_out for e in entries),
                      round(ok / elapsed, 2) if elapsed > 0 else 0.0, round(elapsed, 3), last.stopped,
                      spend=spend_total([e.spend for e in entries]), cached=sum(e.cached for e in entries),
                      not_needed=last.not_needed)  # the last process's: each skips them anew


def spend_total(spends: list[dict[str, Any] | None]) -> dict[str, Any] | None:
    """The cost ledgers of several processes (``JudgeStats.spend``) summed: the total, by
    kind, calls by kind and by language and kind; None when none had a price."""
    priced = [s for s in spends if s is not None]
    if not priced:
        return None
    total = 0.0
    by_kind: dict[str, float] = {}
    calls: dict[str, int] = {}
    by_lang: dict[str, dict[str, float]] = {}
    lang_calls: dict[str, dict[str, int]] = {}
    for s in priced:
        total += s["total"]
        for k, v in s["by_kind"].items():
            by_kind[k] = by_kind.get(k, 0.0) + v
        for k, n in s["calls_by_kind"].items():
            calls[k] = calls.get(k, 0) + n
        for lang, row in s["by_language"].items():
            into = by_lang.setdefault(lang, {})
            for k, v in row.items():
                into[k] = into.get(k, 0.0) + v
        for lang, counts in s.get("calls_by_language", {}).items():
            into_calls = lang_calls.setdefault(lang, {})
            for k, n in counts.items():
                into_calls[k] = into_calls.get(k, 0) + n
    return {"currency": priced[-1]["currency"], "total": round(total, 6),
            "by_kind": {k: round(v, 6) for k, v in by_kind.items()}, "calls_by_kind": dict(sorted(calls.items())),
            "by_language": {lang: {k: round(v, 6) for k, v in sorted(row.items())}
                            for lang, row in sorted(by_lang.items())},
            "calls_by_language": {lang: dict(sorted(row.items())) for lang, row in sorted(lang_calls.items())}}


def accumulate(previous: RunStats | None, this: RunStats) -> RunStats:
    """``previous`` (what stats.json held; None when absent) with this process's entry added
    and the totals recomputed. A file written before entries existed counts as one process."""
    processes = [] if previous is None else (
        previous.processes or [ProcessStats(previous.elapsed_s, previous.interrupted, previous.judges)])
    processes = [*processes, ProcessStats(this.elapsed_s, this.interrupted, this.judges)]
    by_judge: dict[tuple[str, str], list[JudgeStats]] = {}
    for proc in processes:
        for j in proc.judges:  # two names may share an id (the same settings): kept apart
            by_judge.setdefault((j.judge, j.judge_id), []).append(j)
    judges = sorted((_total(v) for v in by_judge.values()), key=lambda j: (j.judge, j.judge_id))
    return RunStats(round(sum(p.elapsed_s for p in processes), 3), this.interrupted, judges, processes,
                    this.warnings)


def read_run_info(run_dir: Path) -> RunInfo:
    """The run directory's run.yaml; a clear error when it is not a run directory."""
    try:
        return RunInfo.decode((Path(run_dir) / RUN_YAML).read_bytes())
    except FileNotFoundError:
        raise NotApplicable(f"{run_dir} is not a babelrun run directory (no run.yaml)") from None
    except (OSError, msgspec.DecodeError, ValueError) as e:  # the only record of the manifest: not guessed
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


def escalation_judge_ids(info: RunInfo) -> list[str]:
    """The judge ids of a run's judges asked only on a cascade's escalations (``calls:
    escalations``): their records are the presentations a cheap judge found hard, so they get
    no card of their own, and no analysis compares them as if they had judged the plan."""
    return [info.judge_ids[j.name] for j in info.manifest.judges if j.calls == "escalations"]


def without_escalation_judges(data: pa.Table, info: RunInfo) -> pa.Table:
    """``data`` (a table of records with ``judge_id``) less the escalation-only judges'."""
    import pyarrow as pa
    import pyarrow.compute as pc

    subset = escalation_judge_ids(info)
    if not subset or data.num_rows == 0:
        return data
    return data.filter(pc.invert(pc.is_in(data["judge_id"].cast(pa.string()), pa.array(subset))))
