"""The run directory's owner: its paths, the small files that describe a run, and its lock.

::

    RUN_DIR/
      run.yaml            RunInfo: the resolved manifest, judge ids, babelrun version
      plan.json           PlanSummary: items planned, the perturbation audit, filters
      stats.json          RunStats (store/stats.py): every audit process's, and their totals
                          (stats.<shard>.json per shard)
      log/*.jsonl         the verdict log, the source of truth (store/log.py)
      lock, locks/        the run lock and per-shard locks (store/lock.py)
      judgements.parquet  the log compacted (store/compact.py), a cache
      .babelrun-run       the marker: a folder babelrun made (MARKER)

The layers above write their own files here and name them themselves: the cards
(score/run.py), the report (report/), the analyses' results (each by its registry entry),
pending provider batches (engine/batches.py), ``pin``'s lock. This layer knows none of them:
the stale-file cleanup is told their names (``RunDir.remove_stale_tmp``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from ..core.items import PerturbationAudit, Removed, Segmentation
from ..core.keys import Shard
from ..errors import NotApplicable, UserError
from ..spec import Manifest
from ..spec.flat import decode_manifest, flat_manifest
from . import stats as run_stats
from .files import write_atomic
from .lock import RunLock
from .stats import RunStats

if TYPE_CHECKING:
    import pyarrow as pa

RUN_YAML = "run.yaml"
PLAN_JSON = "plan.json"
STATS_JSON = "stats.json"
PARQUET = "judgements.parquet"
# The file babelrun writes into a run directory it makes: an ``output_dir`` that exists, is
# not empty and has neither it nor a run's run.yaml + log/ (a run made before the marker) is
# refused at validate, so an audit never writes into (or cleans) a folder of the user's files.
MARKER = ".babelrun-run"
# The files of this layer written atomically at a run directory's top (the layers above name theirs).
WRITTEN = frozenset({RUN_YAML, PLAN_JSON, STATS_JSON, PARQUET, MARKER})
_STALE = re.compile(r"(?P<name>[A-Za-z0-9_.-]+)\.(?P<pid>[0-9]{1,10})\.tmp")
_SHARD_STATS = re.compile(r"stats\.s[0-9]+of[0-9]+\.json")


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


class RunDir:
    """One run directory (modelled on an evaluation log that owns its file on disk: one
    object reads and writes it). ``path`` is the user's choice and is taken as given; every
    file is written atomically, never through a link (store/files.py)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    def stats_path(self, shard: Shard | None = None) -> Path:
        """stats.json, or a shard's own ``stats.<shard tag>.json``."""
        return self.path / (STATS_JSON if shard is None else f"stats.{shard.tag}.json")

    # -- what the folder is ----------------------------------------------------------------

    def is_run_dir(self) -> bool:
        """A folder babelrun made (its marker), or a run made before the marker (run.yaml + log/)."""
        return (self.path / MARKER).is_file() or ((self.path / RUN_YAML).is_file() and (self.path / "log").is_dir())

    def mark(self) -> None:
        """Write the marker (once) into a run directory babelrun made or writes."""
        marker = self.path / MARKER
        if not marker.is_file():
            write_atomic(marker, b"a babelrun run directory: babelrun writes here (see docs/trust.md)\n")

    def create(self) -> None:
        """The folder, made where missing, and marked a babelrun run directory from now on
        (the manifest's ``output_dir`` check refuses a folder of someone else's files)."""
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UserError(f"cannot create output directory {self.path}: {e.strerror}") from None
        self.mark()

    def lock(self, shard: Shard | None = None, *, shared: bool = False) -> RunLock:
        """The run lock (store/lock.py): exclusive for a whole run, shared for a shard or a driver."""
        return RunLock(self.path, shard, shared=shared)

    # -- run.yaml, plan.json, stats.json ---------------------------------------------------

    def info(self) -> RunInfo:
        """run.yaml; a clear error when it is not a run directory."""
        path = self.path / RUN_YAML
        try:
            return RunInfo.decode(path.read_bytes())
        except FileNotFoundError:
            raise NotApplicable(f"{self.path} is not a babelrun run directory (no run.yaml)") from None
        except (OSError, msgspec.DecodeError, ValueError) as e:  # the only record of the manifest: not guessed
            why = " ".join(str(e).split())[:120]
            raise UserError(f"{path} is unreadable ({why}); `babelrun audit MANIFEST` writes it again") from None

    def write_info(self, info: RunInfo) -> None:
        write_atomic(self.path / RUN_YAML, info.encode())

    def plan(self) -> PlanSummary:
        """plan.json; an empty summary where the run has none (a log merged from elsewhere)."""
        path = self.path / PLAN_JSON
        if not path.exists():
            return PlanSummary(0, [])
        try:
            return msgspec.json.decode(path.read_bytes(), type=PlanSummary)
        except (OSError, msgspec.DecodeError) as e:
            why = " ".join(str(e).split())[:120]
            raise UserError(f"{path} is unreadable ({why}); `babelrun audit MANIFEST` writes it again") from None

    def plan_is_readable(self) -> bool:
        try:
            self.plan()
        except UserError:
            return False
        return True

    def write_plan(self, summary: PlanSummary) -> None:
        write_atomic(self.path / PLAN_JSON, msgspec.json.encode(summary))

    def stats(self, shard: Shard | None = None) -> RunStats | None:
        """stats.json (a shard's file with ``shard``) through the one validated reader
        (``store.stats.read``); None when absent or not a valid stats file."""
        return run_stats.read(self.stats_path(shard))

    def add_stats(self, stats: RunStats, shard: Shard | None = None,
                  totals: Callable[[RunStats], RunStats] | None = None) -> None:
        """Add this process's stats to the file's (a rerun never wipes an earlier run's calls);
        a file that is absent or invalid starts afresh. ``totals``: how the layers above
        rebuild the run's totals once added (the spend, from the log)."""
        path = self.stats_path(shard)
        total = run_stats.accumulate(run_stats.read(path), stats)
        write_atomic(path, run_stats.encode(totals(total) if totals is not None else total))

    # -- the stale-file cleanup ------------------------------------------------------------

    def remove_stale_tmp(self, written: Iterable[str]) -> None:
        """Delete temporary files left by a process killed mid-write (``name.<pid>.tmp``)
        whose writer is gone: only those of the files babelrun writes at the top (this layer's
        ``WRITTEN``, the shards' stats files and the ``written`` names of the layers above),
        never another ``*.tmp`` a user keeps there. Runs under the run lock."""
        names = WRITTEN | frozenset(written)
        for tmp in self.path.glob("*.tmp"):
            pid = stale_tmp_pid(tmp.name, names)
            if pid is not None and pid != os.getpid() and not _alive(pid):
                tmp.unlink(missing_ok=True)  # a link is removed, never followed


def stale_tmp_pid(name: str, written: frozenset[str]) -> int | None:
    """The writer's pid of ``name`` when it is the temporary file of one of ``written`` or of
    a shard's stats (``cards.json.4242.tmp``); None for any other name (the user's ``thesis.4242.tmp``)."""
    m = _STALE.fullmatch(name)
    if m is None or not (m["name"] in written or _SHARD_STATS.fullmatch(m["name"])):
        return None
    return int(m["pid"])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def is_run_dir(path: Path) -> bool:
    """``RunDir(path).is_run_dir()``, for the manifest's ``output_dir`` check."""
    return RunDir(path).is_run_dir()


def read_run_info(run_dir: Path) -> RunInfo:
    """``RunDir(run_dir).info()``, for the readers that need only run.yaml (the analyses)."""
    return RunDir(run_dir).info()


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
