"""A run directory's cards, from its log alone: the counted records (``store.compact``), the
composite judges derived from them (``composite``), one card per judge, language and
perturbation (``score``). Reads run.yaml (scoring settings, seed, composites) and plan.json
(the perturbation audit); writes cards.json."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from ..core.memory import return_freed_memory
from ..store import compact
from ..store.files import write_atomic
from ..store.rundir import RunDir
from . import composite, probes, replylang
from .agentic import AgenticJudgeCards
from .cards import Cards, JudgeCards, RunMeta, encoded
from .columnar import SCORING_COLUMNS, cells, score

CARDS_JSON = "cards.json"
WRITTEN = (CARDS_JSON,)  # the files this layer writes at a run directory's top

if TYPE_CHECKING:
    from ..core.items import PerturbationAudit
    from ..engine.stopping import Replayed
    from ..store.rundir import RunInfo


def cards_of_run(run_dir: Path) -> Cards:
    """Recompute judgements.parquet and cards.json from the log."""
    run_dir = Path(run_dir)
    info, summary = RunDir(run_dir).info(), RunDir(run_dir).plan()
    scoring, seed, composites = info.manifest.scoring, info.manifest.seed, info.manifest.composites
    # Without composite judges (which read every record), the robustness probes' records
    # are read and scored apart, after the rest's scoring has let go of its records: the
    # peak holds one family's records, never both (score/probes.py: a run with probes had
    # them beside the degradation records through the whole pass).
    apart = not composites
    data = compact.load(run_dir, composite.COLUMNS if composites else SCORING_COLUMNS,
                        where=probes.not_probe if apart else None)
    stops = _stops(run_dir, info)
    data = _counted_prefix(data, stops)
    derived = composite.derive(data, composites, info.judge_ids)
    tables = [composite.table(data, d) for d in derived]
    subset = [info.judge_ids[j.name] for j in info.manifest.judges if j.calls == "escalations"]

    def own(table: pa.Table) -> pa.Table:
        if not subset:
            return table
        # judges asked only on a cascade's hard presentations: no card of their own
        return table.filter(pc.invert(pc.is_in(table["judge_id"].cast(pa.string()), pa.array(subset))))

    composite_cards = [composite.card(d, data, t, info.judge_ids, replicates=scoring.bootstrap,
                                      confidence=scoring.confidence, seed=seed)
                       for d, t in zip(derived, tables, strict=True)]
    data = own(data)
    cards = score(pa.concat_tables([data, *tables]) if tables else data, summary.perturbation_audit,
                  replicates=scoring.bootstrap, confidence=scoring.confidence, seed=seed,
                  segmentation=summary.segmentation, removed=summary.removed_by_filters)
    del data, tables
    if apart:
        return_freed_memory()  # the freed records' pages and the card pass's arrays, before the probes'
        rows = own(compact.load(run_dir, SCORING_COLUMNS, where=probes.is_probe))
        if rows.num_rows:
            cards = msgspec.structs.replace(cards, probes=probes.cards(
                rows, replicates=scoring.bootstrap, confidence=scoring.confidence, seed=seed, cells=cells))
    cards = msgspec.structs.replace(cards, removed_by_filters=summary.removed_by_filters,
                                    composites=composite_cards, judges=_label_stale(cards.judges, info.judge_ids),
                                    agentic=_label_stale(cards.agentic, info.judge_ids))
    cards = msgspec.structs.replace(cards, judges=_stopped(cards.judges, stops, summary.perturbation_audit))
    cards = _reply_languages(cards, run_dir)
    meta = RunMeta(info.manifest.name, info.babelrun_version, seed, dict(info.judge_ids), summary.items)
    return_freed_memory()  # the probe pass's arrays, before the cards' encoding
    write_atomic(run_dir / CARDS_JSON, encoded(cards, meta))
    return_freed_memory()  # scoring's pages, before the report's reads
    return cards


def _reply_languages(cards: Cards, run_dir: Path) -> Cards:
    """``cards`` with ``reply_language`` on each text card (degradations and labelled pairs)
    whose judge's replies hold prose, from the run's records (``replylang``)."""
    cols = replylang.read_replies(run_dir)
    if cols is None or not (cols["cls"] >= 0).any():
        return cards
    pairs = [msgspec.structs.replace(f, judges=replylang.with_reply_language(f.judges, cols)) for f in cards.pairs]
    return msgspec.structs.replace(cards, judges=replylang.with_reply_language(cards.judges, cols), pairs=pairs)


def _stops(run_dir: Path, info: RunInfo) -> dict[str, Replayed]:
    """Each stopped cell, decided again from the log (``engine.stopping.from_log``) when the
    run's manifest has ``stopping:``: never read from stopping.json, which a killed process
    never wrote and whose intervals a timing could move."""
    from ..engine.stopping import from_log

    how = info.manifest.stopping
    if how is None:
        return {}
    pairwise = {j.name: info.judge_ids[j.name] for j in info.manifest.judges
                if j.protocol == "pairwise" and j.name in info.judge_ids}
    return from_log(run_dir, how, info.manifest.seed, pairwise)


def _counted_prefix(data: pa.Table, stops: dict[str, Replayed]) -> pa.Table:
    """``data`` less the records of items past a stopped cell's stop (in flight when it
    stopped): kept in the log, never counted."""
    from ..core.keys import item_bits

    masks = []
    for jid, replayed in stops.items():
        if replayed.uncounted:
            keys = pa.array(sorted({item_bits(iid) for iid in replayed.uncounted}), pa.uint64())
            masks.append(pc.and_(pc.equal(data["judge_id"].cast(pa.string()), jid),
                                 pc.is_in(data["item_key"], keys)))
    if not masks or data.num_rows == 0:
        return data
    drop = masks[0]
    for m in masks[1:]:
        drop = pc.or_(drop, m)
    return data.filter(pc.invert(drop))


def _stopped(judges: list[JudgeCards], stops: dict[str, Replayed],
             audit: list[PerturbationAudit]) -> list[JudgeCards]:
    """Cards of stopped cells: R's interval is the confidence sequence's when the cell
    stopped, the verdict follows it, and the card says where it stopped (of the cell's
    planned items, from the plan's perturbation audit)."""
    from ..engine.stopping import CellReport
    from . import verdict as verdicts
    from .cards import Card, LanguageCard, PerturbationCard
    from .stats import Interval

    cells = {(jid, name): c for jid, replayed in stops.items() for name, c in replayed.cells.items()}
    if not cells:
        return judges
    planned: dict[str, int] = {}
    for a in audit:
        for name in (a.lang, f"{a.lang}/{a.perturbation}"):
            planned[name] = planned.get(name, 0) + a.emitted

    def stop(card: Card, cell: CellReport) -> Card:
        r = card.reliability
        interval = Interval(r.value, cell.lo, cell.hi, r.n)
        weak = card.verdict == "segmentation weak"
        of = planned.get(cell.cell) or cell.items
        return msgspec.structs.replace(card, reliability=interval, stopped=f"stopped at n = {cell.stopped_at} of "
                                       f"{of}", verdict=verdicts.verdict(interval, card.items, weak))

    out = []
    for jc in judges:
        langs = []
        for lc in jc.languages:
            cell = cells.get((jc.judge_id, lc.lang))
            card = stop(lc.card, cell) if cell is not None else lc.card
            perts = [PerturbationCard(pc_.perturbation, stop(pc_.card, c))
                     if (c := cells.get((jc.judge_id, f"{lc.lang}/{pc_.perturbation}"))) is not None else pc_
                     for pc_ in lc.perturbations]
            langs.append(LanguageCard(lc.lang, lc.language, card, perts))
        out.append(msgspec.structs.replace(jc, languages=langs))
    return out


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
