"""A run directory's cards, from its log alone: the counted records (``store.compact``), the
composite judges derived from them (``composite``), one card per judge, language and
perturbation (``score``). Reads run.yaml (scoring settings, seed, composites) and plan.json
(the perturbation audit); writes cards.json."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from ..store import compact
from ..store.files import write_atomic
from ..store.rundir import CARDS_JSON, read_plan_summary, read_run_info
from . import composite
from .agentic import AgenticJudgeCards
from .cards import Cards, JudgeCards, RunMeta, encode
from .columnar import SCORING_COLUMNS, score


def cards_of_run(run_dir: Path) -> Cards:
    """Recompute judgements.parquet and cards.json from the log."""
    run_dir = Path(run_dir)
    info = read_run_info(run_dir)
    scoring, seed, composites = info.manifest.scoring, info.manifest.seed, info.manifest.composites
    summary = read_plan_summary(run_dir)
    data = compact.load(run_dir, composite.COLUMNS if composites else SCORING_COLUMNS)
    derived = composite.derive(data, composites, info.judge_ids)
    tables = [composite.table(data, d) for d in derived]
    own = data
    subset = [info.judge_ids[j.name] for j in info.manifest.judges if j.calls == "escalations"]
    if subset:  # judges asked only on a cascade's hard presentations: no card of their own
        own = data.filter(pc.invert(pc.is_in(data["judge_id"].cast(pa.string()), pa.array(subset))))
    cards = score(pa.concat_tables([own, *tables]) if tables else own, summary.perturbation_audit,
                  replicates=scoring.bootstrap, confidence=scoring.confidence, seed=seed,
                  segmentation=summary.segmentation, removed=summary.removed_by_filters)
    composite_cards = [composite.card(d, data, t, info.judge_ids, replicates=scoring.bootstrap,
                                      confidence=scoring.confidence, seed=seed)
                       for d, t in zip(derived, tables, strict=True)]
    cards = msgspec.structs.replace(cards, removed_by_filters=summary.removed_by_filters,
                                    composites=composite_cards, judges=_label_stale(cards.judges, info.judge_ids),
                                    agentic=_label_stale(cards.agentic, info.judge_ids))
    meta = RunMeta(info.manifest.name, info.babelrun_version, seed, dict(info.judge_ids), summary.items)
    write_atomic(run_dir / CARDS_JSON, encode(cards, meta))
    return cards


_Named = TypeVar("_Named", JudgeCards, AgenticJudgeCards)


def stale_label(name: str, judge_id: str) -> str:
    return f"{name} (earlier judge_id {judge_id})"


def _label_stale(cards: list[_Named], judge_ids: dict[str, str]) -> list[_Named]:
    """A judge name whose manifest changed has records under its old judge_id too: those
    cards are named apart (``name (earlier judge_id …)``), so that no ranking or row takes
    the old verdicts for the judge as it is now configured."""
    current = set(judge_ids.values())
    return [msgspec.structs.replace(c, judge=stale_label(c.judge, c.judge_id))
            if c.judge in judge_ids and c.judge_id not in current else c for c in cards]
