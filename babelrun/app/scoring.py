"""A run directory scored from its log: the cards (and, unless told not to, the report), and
the warnings that say what the cards had to leave out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .. import report, score
from ..plan import Plan
from ..score.run import cards_of_run, stale_label
from ..store import compact
from ..store.rundir import RunDir, RunInfo
from .runfiles import plan_summary


def score_run(run_dir: Path, *, write_report: bool = True) -> score.Cards:
    """Recompute judgements.parquet and cards.json from the log alone (and the run's manifest
    in run.yaml: scoring settings, seed, composite judges), then, unless ``write_report`` is
    False, the report (report.md, report.html, plots/) through ``report.write``, the one writer
    of report.md: the same bytes ``babelrun report RUN`` writes there. An audit's finish passes
    False and writes the report itself once stats.json is written. An unreadable plan.json (a
    summary of the plan) is rebuilt from run.yaml's manifest first."""
    run_dir = Path(run_dir)
    folder = RunDir(run_dir)
    if not folder.plan_is_readable():
        folder.write_plan(plan_summary(Plan.from_manifest(folder.info().manifest)))
    cards = cards_of_run(run_dir)
    if write_report:
        report.write([run_dir], run_dir, cards={run_dir: cards})
    return cards


def run_warnings(run_dir: Path, info: RunInfo | None = None, planned_items: int | None = None) -> list[str]:
    """What a finished run directory's readers had to work around, one line each: log lines
    skipped as invalid (named ``segment:line``, from the last compaction), records of a judge
    under an earlier judge_id, and planned keys of the judges called on every key without a
    verdict (a deleted segment, a stopped judge). ``info`` and ``planned_items`` (run.yaml's
    and plan.json's, where the caller holds them) are read from the run directory when not given."""
    run_dir = Path(run_dir)
    out = []
    bad = compact.bad_lines(run_dir)
    if bad:
        shown = ", ".join(str(b) for b in bad[:20])
        more = f", … ({len(bad)} named in judgements.parquet's metadata)" if len(bad) > 20 else ""
        out.append(f"{len(bad)} invalid log line(s) skipped: {shown}{more}")
    info = info if info is not None else RunDir(run_dir).info()
    out += _earlier_judge_ids(run_dir, info)
    items = planned_items if planned_items is not None else RunDir(run_dir).plan().items
    # each judge called on every key: its planned keys (both orders of every item, each
    # asked ``samples`` times), less those its stopped cells did not need
    planned = {info.judge_ids[j.name]: 2 * items * j.samples for j in info.manifest.judges if j.calls == "all"}
    if items and planned:
        counted = compact.load(run_dir, ["judge_id"])["judge_id"].cast("string")
        counts = dict.fromkeys(planned, 0)
        for jid, n in zip(*_value_counts(counted), strict=True):
            if jid in counts:
                counts[jid] = n
        missing = sum(planned[jid] - min(n, planned[jid]) for jid, n in counts.items()) - _not_needed(run_dir, info)
        if missing > 0:
            out.append(f"{missing} of {sum(planned.values())} planned key(s) have no verdict: the cards "
                       "leave them out; `babelrun audit MANIFEST` judges them")
    return out


def _earlier_judge_ids(run_dir: Path, info: RunInfo) -> list[str]:
    pairs = compact.load(run_dir, ["judge", "judge_id"]).unify_dictionaries().combine_chunks()
    pairs = pairs.group_by(["judge", "judge_id"]).aggregate([])
    current = set(info.judge_ids.values())
    return [f"judge {name!r} also has records under an earlier judge_id {jid} (its manifest changed since): "
            f"they are carded apart as {stale_label(name, jid)!r}"
            for name, jid in zip(pairs["judge"].to_pylist(), pairs["judge_id"].to_pylist(), strict=True)
            if name in info.judge_ids and jid not in current]


def _value_counts(column: Any) -> tuple[list[str], list[int]]:
    import pyarrow.compute as pc

    counts = pc.value_counts(column)
    return counts.field("values").to_pylist(), counts.field("counts").to_pylist()


def _not_needed(run_dir: Path, info: RunInfo) -> int:
    """Keys with no record because their cell stopped (``stopping:``): not needed, so no
    missing verdict (each of an item's samples). Decided from the log as the cards decide it
    (``stopping.from_log``)."""
    how = info.manifest.stopping
    if how is None:
        return 0
    from ..engine.stopping import from_log

    judges = {j.name: info.judge_ids[j.name] for j in info.manifest.judges
              if j.protocol == "pairwise" and j.calls == "all" and j.name in info.judge_ids}
    samples = {info.judge_ids[j.name]: j.samples for j in info.manifest.judges if j.name in info.judge_ids}
    planned: dict[str, int] = {}
    for a in RunDir(run_dir).plan().perturbation_audit:
        for name in (a.lang, f"{a.lang}/{a.perturbation}"):
            planned[name] = planned.get(name, 0) + a.emitted
    return sum(2 * samples[jid] * max(0, planned.get(c.cell, c.items) - c.items)
               for jid, replayed in from_log(run_dir, how, info.manifest.seed, judges).items()
               for c in replayed.cells.values())
