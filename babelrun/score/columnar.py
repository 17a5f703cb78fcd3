"""The columnar pass: every card of a run's counted records in one sorted sweep.

Grouping is columnar: string columns are dictionary-encoded into integer codes, each record
gets its item's row, and every group is a slice of one item table (``metrics.item_table``);
no Python loop runs per record. Intervals are item-clustered percentile bootstraps seeded
from the manifest seed and the group, so the same log always gives the same cards.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..core import languages
from ..core.items import PAIRS_PREFIX, PerturbationAudit, Removed, Segmentation
from ..core.keys import sample_column
from . import agentic, metrics, pointwise, stats, verdict
from .cards import Card, Cards, FamilyCards, JudgeCards, LanguageCard, PerturbationCard
from .columns import by_cell_and_item, codes, item_bits, lookup
from .stats import Interval, rounded

# The columns scoring reads (compact.load(run_dir, SCORING_COLUMNS)).
SCORING_COLUMNS = ["judge_id", "judge", "item_key", "order", "lang", "perturbation", "verdict",
                   "ref_len", "pert_len", "kind", "p_a", "p_b", "score", "ref_id", "sample"]
UNSCORED_KINDS = ("tie_probe",)  # no better answer, no gold label: see analyses/invariance.py
SEPARATE_KINDS = ("agentic",)  # scored into their own cards (Cards.agentic), never the text ones


def _rng(seed_key: str) -> np.random.Generator:
    """A card's bootstrap draws, seeded from the manifest seed and the card (``_layout``'s key)."""
    return np.random.default_rng(int.from_bytes(hashlib.blake2b(seed_key.encode(), digest_size=8).digest()))


def _card(ci: dict[str, tuple[float, float]], items: int, sums: np.ndarray, point: dict[str, float],
          confidence: float) -> Card:
    """One card: its point values (computed for every card at once), the bootstrap interval
    over its items for the metrics built from pairs (``ci``, ``metrics.bootstraps``), and
    Wilson intervals for the plain rates."""
    ci = dict(ci)
    n = metrics.interval_n(sums, items)
    # Plain rates (share of presentations with a tie / an invalid reply) get Wilson intervals;
    # a judge's several samples of a presentation are not independent: its card keeps the
    # item bootstrap's interval for them too.
    several = any(n[m.name] for m in metrics.REGISTRY if m.sampled)
    for m in metrics.REGISTRY:
        if m.wilson is not None and not several:
            lo, hi = stats.wilson(sums[metrics.STATS.index(m.wilson)], n[m.name], confidence)
            ci[m.name] = (float(lo), float(hi))

    def interval(name: str) -> Interval:
        value = rounded(point[name])
        lo, hi = ci.get(name, (None, None)) if value is not None else (None, None)
        return Interval(value, rounded(lo), rounded(hi), int(n[name]))

    sampled = {m.name for m in metrics.REGISTRY if m.sampled}
    intervals: dict[str, Any] = {name: interval(name) for name in n if name not in sampled or n[name] > 0}
    tie_items = int(sums[metrics.STATS.index("tie_items")])
    if tie_items:  # labelled sets with tie-labelled pairs only: other cards' bytes stay as they were
        intervals["tie_labelled"] = tie_items
    return Card(items=items, presentations=int(sums[0]), **intervals)


def _soft_margins(data: pa.Table, by: np.ndarray, starts: np.ndarray) -> np.ndarray | None:
    """Cumulative (margin sum, count) over items, in item order, for soft verdicts: a
    presentation's margin is P(the reference's slot) − P(the perturbed answer's slot)."""
    if "p_a" not in data.column_names or data["p_a"].null_count == data.num_rows:
        return None
    p_a = data["p_a"].to_numpy(zero_copy_only=False)[by]
    p_b = data["p_b"].to_numpy(zero_copy_only=False)[by]
    ref_first = (lookup(data["order"], metrics.ORDER_CODES) == 0)[by]
    margin = np.where(ref_first, p_a - p_b, p_b - p_a)
    has = ~np.isnan(margin)
    margin = np.where(has, margin, 0.0)
    per_item = np.column_stack([np.add.reduceat(margin, starts), np.add.reduceat(has, starts)])
    out = np.zeros((len(starts) + 1, 2))
    np.cumsum(per_item, axis=0, out=out[1:])
    return out


def score(data: pa.Table, audit: list[PerturbationAudit], *, replicates: int = 1000,
          confidence: float = 0.95, seed: int = 0, segmentation: Sequence[Segmentation] = (),
          removed: Sequence[Removed] = ()) -> Cards:
    """Cards for every judge in ``data`` (the counted records, one row per key), one set
    per item family (``verdict.family``): degradation items in ``judges``, each labelled
    set in ``pairs``, agent trajectories in ``agentic`` — never pooled into one card.

    Records are sorted once by (cell, item), cell = (judge, language, perturbation) in card
    order. Then an item is a run of adjacent records, a perturbation card a run of items, a
    language card a run of cells and a judge card a run of languages: every card is a slice
    of one item table, and its sums a difference of two cumulative rows.
    ``segmentation`` (from the plan) withholds the verdict of weakly segmented languages;
    with the audit and ``removed`` it names every planned language left without a card.
    """
    def scored(table: pa.Table) -> Cards:
        return cells(table, [], replicates=replicates, confidence=confidence, seed=seed)

    probe_rows = None  # robustness probes (score/probes.py): their own family, pairwise and pointwise
    if "kind" in data.column_names and data.num_rows:
        is_probe = pc.equal(data["kind"].cast(pa.string()), "probe")
        if pc.any(is_probe).as_py():
            probe_rows, data = data.filter(is_probe), data.filter(pc.invert(is_probe))
    scored_alone = None
    if "score" in data.column_names and data.num_rows:
        alone = pointwise.is_pointwise(data)
        if pc.any(alone).as_py():
            scored_alone = data.filter(alone)
            data = data.filter(pc.invert(alone))
    separate = pairs = None
    if "kind" in data.column_names:
        kind = data["kind"].cast(pa.string())
        separate = data.filter(pc.is_in(kind, pa.array(SEPARATE_KINDS)))
        data = data.filter(pc.invert(pc.is_in(kind, pa.array(UNSCORED_KINDS + SEPARATE_KINDS))))
    if data.num_rows:
        labelled = pc.starts_with(data["perturbation"].cast(pa.string()), PAIRS_PREFIX)
        pairs, data = data.filter(labelled), data.filter(pc.invert(labelled))
    cards = cells(data, audit, replicates=replicates, confidence=confidence, seed=seed)
    weak = {s.lang for s in segmentation if s.weak}
    if weak:
        cards = msgspec.structs.replace(cards, judges=[_withhold(jc, weak) for jc in cards.judges])
    if pairs is not None and pairs.num_rows:
        names = sorted(set(pairs["perturbation"].cast(pa.string()).to_pylist()))
        cards = msgspec.structs.replace(cards, pairs=[
            FamilyCards(name, scored(pairs.filter(pc.equal(pairs["perturbation"].cast(pa.string()), name))).judges)
            for name in names])
    if separate is not None and separate.num_rows:
        cards = msgspec.structs.replace(cards, agentic=agentic.cards(separate, scored, replicates, confidence, seed))
    if scored_alone is not None:
        cards = msgspec.structs.replace(cards, pointwise=pointwise.cards(
            scored_alone, replicates=replicates, confidence=confidence, seed=seed))
    if probe_rows is not None:
        from . import probes

        cards = msgspec.structs.replace(cards, probes=probes.cards(
            probe_rows, replicates=replicates, confidence=confidence, seed=seed, cells=cells))
    return msgspec.structs.replace(cards, segmentation=list(segmentation),
                                   not_judged=_not_judged(cards, audit, removed, segmentation))


def _withhold(jc: JudgeCards, weak: set[str]) -> JudgeCards:
    """A judge's cards with the verdict of weakly segmented languages withheld."""
    return msgspec.structs.replace(jc, languages=[
        msgspec.structs.replace(lc, card=msgspec.structs.replace(
            lc.card, verdict=verdict.verdict(lc.card.reliability, lc.card.items, weak=True,
                                             invalid=lc.card.invalid_rate)))
        if lc.lang in weak else lc for lc in jc.languages])


def _unreadable(jc: JudgeCards) -> JudgeCards:
    """A judge whose overall card is unreadable (``verdict.MISCONFIGURED``) claims nothing in
    any language or perturbation either: its cards keep their numbers, lose their verdicts."""
    if jc.overall.verdict != verdict.UNREADABLE:
        return jc

    def withheld(card: Card) -> Card:
        return msgspec.structs.replace(card, verdict=verdict.UNREADABLE if card.verdict else None,
                                       below_chance=False)

    return msgspec.structs.replace(jc, languages=[
        msgspec.structs.replace(lc, card=withheld(lc.card), perturbations=[
            msgspec.structs.replace(pc_, card=withheld(pc_.card)) for pc_ in lc.perturbations])
        for lc in jc.languages])


def _not_judged(cards: Cards, audit: list[PerturbationAudit], removed: Sequence[Removed],
                segmentation: Sequence[Segmentation]) -> list[verdict.NotJudged]:
    """Every (language, family) the plan asked for without a card: for all judges when the
    plan gave it no item, else for each judge of the family that has no card for it."""
    emitted: dict[tuple[str, str], int] = {}
    for row in audit:
        key = (row.lang, verdict.family(row.perturbation))
        emitted[key] = emitted.get(key, 0) + row.emitted
    for r in removed:
        emitted.setdefault((r.lang, verdict.DEGRADATION), 0)
    weak = {s.lang: s for s in segmentation if s.weak}
    judged: dict[str, dict[str, set[str]]] = {verdict.DEGRADATION: _langs(cards.judges),
                                              verdict.AGENTIC: _langs(cards.agentic)}
    judged.update((fc.family, _langs(fc.judges)) for fc in cards.pairs)
    out = []
    for (lang, fam), n in sorted(emitted.items()):
        if n == 0:
            out.append(verdict.NotJudged(lang, languages.name(lang), fam, _no_items(lang, fam, weak, removed)))
            continue
        out += [verdict.NotJudged(lang, languages.name(lang), fam, "no counted records", judge)
                for judge, langs in sorted(judged.get(fam, {}).items()) if lang not in langs]
    return out


def _langs(judges: Sequence[Any]) -> dict[str, set[str]]:
    return {jc.judge: {lc.lang for lc in jc.languages} for jc in judges}


def _no_items(lang: str, fam: str, weak: dict[str, Segmentation], removed: Sequence[Removed]) -> str:
    if fam == verdict.DEGRADATION and lang in weak:
        return (f"no items: segmentation weak ({weak[lang].sentences_per_unit:.2f} sentences per unit), "
                "every perturbation a no-op")
    if any(r.lang == lang for r in removed) and fam == verdict.DEGRADATION:
        return "no items: the corpus filters removed its references or every perturbation was a no-op"
    return "no items: every perturbation was a no-op"


def cells(data: pa.Table, audit: list[PerturbationAudit], *, replicates: int = 1000,
          confidence: float = 0.95, seed: int = 0) -> Cards:
    """Cards for every (judge, language, perturbation) cell of ``data``, whatever its kinds."""
    if data.num_rows == 0:
        return Cards([], audit, replicates, confidence)
    data = data.unify_dictionaries()  # Parquet row groups each bring their own dictionaries
    cell, names, langs, perts = _cell_codes(data)
    by, starts, table, item_cell = _item_table(data, cell)
    margins = _soft_margins(data, by, starts)
    # Lay the cards out (judge > language > perturbation), then compute every card's point
    # values in one vectorised pass, then bootstrap each slice.
    layout, spans = _layout(item_cell, sorted(names, key=lambda j: (names[j], j)), langs, perts)
    card = _card_maker(table, spans, margins, replicates=replicates, confidence=confidence, seed=seed)
    judges = [
        JudgeCards(names[jid], jid, card(j), [
            LanguageCard(code, languages.name(code), card(li),
                         [PerturbationCard(name, card(pi)) for name, pi in pert_layout])
            for code, li, pert_layout in lang_layout
        ])
        for jid, j, lang_layout in layout
    ]
    return Cards([_unreadable(jc) for jc in judges], audit, replicates, confidence)


def _cell_codes(data: pa.Table) -> tuple[np.ndarray, dict[str, str], list[str], list[str]]:
    """Each record's (judge, language, perturbation) cell as one integer, judges ranked by
    (name, id); the judges' names by id (in code order), the languages and perturbations."""
    judge, judge_ids = codes(data["judge_id"])
    lang, langs = codes(data["lang"])
    pert, perts = codes(data["perturbation"])
    first_row = [int(np.argmax(judge == j)) for j in range(len(judge_ids))]  # a row of each judge
    names = dict(zip(judge_ids, data["judge"].take(pa.array(first_row)).to_pylist(), strict=True))
    j_rank = _rank([(names[j], j) for j in judge_ids])
    return (j_rank[judge] * len(langs) + lang) * len(perts) + pert, names, langs, perts


def _item_table(data: pa.Table, cell: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The records sorted by cell and item (``by``), where each item starts in that order,
    the item table (``metrics.item_table``) and each item's cell."""
    bits = item_bits(data)
    samples = sample_column(data)
    sampled = samples is not None and bool(samples.any())
    order = lookup(data["order"], metrics.ORDER_CODES)
    # A judge asked several samples: records sorted by cell, item, sample and order, so that an
    # item's records stay adjacent (the bootstrap resamples an item with all its samples).
    by = np.lexsort((order, samples, bits, cell)) if samples is not None and sampled else by_cell_and_item(cell, bits)
    cell, bits = cell[by], bits[by]
    item_edge = np.concatenate(([True], (cell[1:] != cell[:-1]) | (bits[1:] != bits[:-1])))
    starts = np.flatnonzero(item_edge)
    tie_gold = (pc.equal(data["kind"].cast(pa.string()), "labelled_tie").to_numpy(zero_copy_only=False)
                if "kind" in data.column_names else None)
    code = metrics.presentation_code(order, lookup(data["verdict"], metrics.VERDICTS),
                                     data["ref_len"].to_numpy(), data["pert_len"].to_numpy(), tie_gold)[by]
    if not sampled:
        return by, starts, metrics.item_table(starts, code), cell[starts]
    assert samples is not None
    return by, starts, _sampled_table(item_edge, samples[by], code), cell[starts]


def _sampled_table(item_edge: np.ndarray, samples: np.ndarray, code: np.ndarray) -> np.ndarray:
    """The item table of a judge asked several samples (records sorted by item, sample, order):
    each sample index's one or two presentations counted as an item is (so κ_ord pairs the two
    orders' samples of one index), summed into the item's row, with its sample agreement."""
    unit_edge = item_edge | np.concatenate(([True], samples[1:] != samples[:-1]))
    units = np.flatnonzero(unit_edge)
    per_unit = metrics.item_table(units, code)
    item_starts = np.flatnonzero(item_edge)
    table = np.add.reduceat(per_unit, np.searchsorted(units, item_starts), axis=0)
    first = len(metrics.STATS) - 4
    table[:, first:] = metrics.sample_table(np.cumsum(item_edge) - 1, len(item_starts), code)
    return np.asfortranarray(table.astype(np.int32))


def _card_maker(table: np.ndarray, spans: list[tuple[int, int, str]], margins: np.ndarray | None, *,
                replicates: int, confidence: float, seed: int) -> Callable[[int], Card]:
    """``card(i)``: the card of span ``i``, its verdict and soft margin set; every span's sums
    and point values are computed here at once."""
    cumulative = _cumulative(table)
    starts, stops = (np.array(x) for x in zip(*[(a, b) for a, b, _ in spans], strict=True))
    sums = cumulative[stops] - cumulative[starts]
    points = metrics.from_sums(sums)
    rows, pattern_of = metrics.patterns(table) if replicates else (np.zeros((1, table.shape[1])), None)
    block = metrics.bootstrap_block(replicates, rows)
    drawn: dict[int, list[dict[str, tuple[float, float]]]] = {}  # the block of spans last bootstrapped

    def intervals(i: int) -> dict[str, tuple[float, float]]:
        """Span ``i``'s bootstrap intervals, drawn with those of its block of spans (the
        cards are asked for in span order)."""
        assert pattern_of is not None  # (asked only where there are replicates)
        b = i // block
        if b not in drawn:
            at = range(b * block, min(len(spans), (b + 1) * block))
            counts = [np.bincount(pattern_of[spans[j][0]:spans[j][1]], minlength=len(rows)) for j in at]
            drawn.clear()
            drawn[b] = metrics.bootstraps(counts, rows, replicates, confidence,
                                          [_rng(f"{seed}\x1f{spans[j][2]}") for j in at])
        return drawn[b][i - b * block]

    def card(i: int) -> Card:
        start, stop, _ = spans[i]
        point = {name: float(values[i]) for name, values in points.items()}
        ci = intervals(i) if pattern_of is not None else {}
        result = _card(ci, stop - start, sums[i], point, confidence)
        result = msgspec.structs.replace(
            result, verdict=verdict.verdict(result.reliability, result.items, invalid=result.invalid_rate),
            below_chance=not verdict.unreadable(result.invalid_rate) and verdict.below_chance(result.accuracy))
        if margins is not None:
            total, n = margins[stop] - margins[start]
            if n:
                result = msgspec.structs.replace(result, soft_margin=Interval(rounded(total / n), None, None, int(n)))
        return result

    return card


def _cumulative(table: np.ndarray) -> np.ndarray:
    """Row i: the sums of the item table's first i rows (row 0 zeros), so that a run of items'
    sums is a difference of two rows."""
    cumulative = np.zeros((len(table) + 1, len(metrics.STATS)), dtype=np.int64, order="F")
    np.cumsum(table, axis=0, out=cumulative[1:])
    return cumulative


# (judge_id, its span, [(language, its span, [(perturbation, its span)])]); a span indexes spans
_Layout = list[tuple[str, int, list[tuple[str, int, list[tuple[str, int]]]]]]


def _layout(cell: np.ndarray, judge_names: list[str], langs: list[str],
            perts: list[str]) -> tuple[_Layout, list[tuple[int, int, str]]]:
    """The cards over the items (one ``cell`` code each, in card order): every judge, language
    and perturbation card as a span (start item, stop item, bootstrap seed key), nested."""
    n_langs, n_perts = len(langs), len(perts)
    judge_of, lang_of, pert_of = cell // (n_langs * n_perts), (cell // n_perts) % n_langs, cell % n_perts
    spans: list[tuple[int, int, str]] = []

    def span(start: int, stop: int, key: str) -> int:
        spans.append((start, stop, key))
        return len(spans) - 1

    layout: _Layout = []
    for j_start, j_stop in _runs(judge_of):
        jid = judge_names[judge_of[j_start]]
        lang_layout = []
        for l_start, l_stop in _runs(lang_of, j_start, j_stop):
            code = langs[lang_of[l_start]]
            pert_layout = [(perts[pert_of[a]], span(a, b, f"{jid}/{code}/{perts[pert_of[a]]}"))
                           for a, b in _runs(pert_of, l_start, l_stop)]
            lang_layout.append((code, span(l_start, l_stop, f"{jid}/{code}"), pert_layout))
        layout.append((jid, span(j_start, j_stop, jid), lang_layout))
    return layout, spans


def _rank(values: list[Any]) -> np.ndarray:
    """Position of each value in sorted order."""
    ranks = np.empty(len(values), dtype=np.int64)
    ranks[sorted(range(len(values)), key=values.__getitem__)] = np.arange(len(values))
    return ranks


def _runs(codes: np.ndarray, start: int = 0, stop: int | None = None) -> list[tuple[int, int]]:
    """(start, stop) of each run of equal values in ``codes[start:stop]``."""
    stop = len(codes) if stop is None else stop
    edges = np.flatnonzero(np.diff(codes[start:stop])) + 1 + start
    bounds = [start, *edges.tolist(), stop]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


