"""Reliability cards from the counted records: per judge, per language, per perturbation.

Grouping is columnar: string columns are dictionary-encoded into integer codes, each record
gets its item's row, and every group is a slice of one item table (``metrics.item_table``);
no Python loop runs per record. Intervals are item-clustered percentile bootstraps seeded
from the manifest seed and the group, so the same log always gives the same cards.
"""

from __future__ import annotations

import hashlib

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import languages, log
from ..items import PerturbationAudit
from . import metrics

ROUND = 4


class Interval(msgspec.Struct, frozen=True):
    value: float | None
    lo: float | None
    hi: float | None
    n: int


class Card(msgspec.Struct, frozen=True):
    items: int
    presentations: int
    accuracy: Interval
    position_bias: Interval
    verbosity: Interval
    order_consistency: Interval
    reliability: Interval
    tie_rate: Interval
    invalid_rate: Interval


class PerturbationCard(msgspec.Struct, frozen=True):
    perturbation: str
    card: Card


class LanguageCard(msgspec.Struct, frozen=True):
    lang: str
    language: str
    card: Card
    perturbations: list[PerturbationCard]


class JudgeCards(msgspec.Struct, frozen=True):
    judge: str
    judge_id: str
    overall: Card
    languages: list[LanguageCard]


class Cards(msgspec.Struct, frozen=True):
    judges: list[JudgeCards]
    perturbation_audit: list[PerturbationAudit]
    bootstrap: int
    confidence: float


def _codes(column: pa.ChunkedArray) -> tuple[np.ndarray, list[str]]:
    """Integer codes of a string column, numbered in sorted order of the values, so that
    nothing downstream depends on the order of the records."""
    encoded = pc.dictionary_encode(column).combine_chunks()
    by_value = pc.array_sort_indices(encoded.dictionary).to_numpy()
    rank = np.empty(len(by_value), dtype=np.int64)
    rank[by_value] = np.arange(len(by_value))
    values = encoded.dictionary.take(pa.array(by_value)).to_pylist()
    return rank[encoded.indices.to_numpy(zero_copy_only=False)], values


def _round(x: float) -> float | None:
    return None if x is None or not np.isfinite(x) else round(float(x), ROUND)


def _interval_n(sums: np.ndarray, items: int) -> dict[str, int]:
    col = {name: sums[i] for i, name in enumerate(metrics.STATS)}
    return {
        "accuracy": col["n"], "position_bias": col["n"], "tie_rate": col["n"],
        "invalid_rate": col["n"], "order_consistency": col["pairs"],
        "verbosity": col["lw_n"] + col["lb_n"], "reliability": items,
    }


def _card(pattern_counts: np.ndarray, rows: np.ndarray, sums: np.ndarray, point: dict[str, float],
          replicates: int, confidence: float, seed_key: str) -> Card:
    """One card: its point values (computed for every card at once) and the bootstrap
    interval over its items (given as counts of each distinct item row)."""
    digest = hashlib.blake2b(seed_key.encode(), digest_size=8).digest()
    ci = metrics.bootstrap(pattern_counts, rows, replicates, confidence,
                           np.random.default_rng(int.from_bytes(digest)))
    items = int(pattern_counts.sum())
    n = _interval_n(sums, items)

    def interval(name: str) -> Interval:
        value = _round(point[name])
        lo, hi = ci.get(name, (None, None)) if value is not None else (None, None)
        return Interval(value, _round(lo), _round(hi), int(n[name]))

    return Card(items=items, presentations=int(sums[0]), **{name: interval(name) for name in n})


def _items(judge: np.ndarray, item_ids: pa.ChunkedArray) -> np.ndarray:
    """Each record's item number: items are (judge, item id) pairs numbered in sorted order,
    so nothing depends on the order of the records. Item ids are blake2b hex, and their first
    60 bits (``log.item_bits``) are parsed straight from Arrow's buffer: no string sort. The
    counted records come sorted by key already; then no sort happens here either."""
    bits = log._item_bits_column(item_ids.combine_chunks())
    if judge.max() < 16:  # the judge code fits in the 4 spare bits: one key to sort
        key = bits | (judge.astype(np.uint64) << np.uint64(60))
        in_order = bool((key[1:] >= key[:-1]).all())
        by_item = None if in_order else np.argsort(key, kind="stable")
        sorted_key = key if in_order else key[by_item]
        new = np.empty(len(key), dtype=bool)
        new[0] = True
        np.not_equal(sorted_key[1:], sorted_key[:-1], out=new[1:])
    else:
        by_item = np.lexsort((bits, judge))
        sorted_judge, sorted_bits = judge[by_item], bits[by_item]
        new = np.empty(len(bits), dtype=bool)
        new[0] = True
        new[1:] = (sorted_judge[1:] != sorted_judge[:-1]) | (sorted_bits[1:] != sorted_bits[:-1])
    numbered = np.cumsum(new) - 1
    if by_item is None:
        return numbered
    item = np.empty(len(bits), dtype=np.int64)
    item[by_item] = numbered
    return item


def score(data: pa.Table, audit: list[PerturbationAudit], *, replicates: int = 1000,
          confidence: float = 0.95, seed: int = 0) -> Cards:
    """Cards for every judge in ``data`` (the counted records, one row per key)."""
    if data.num_rows == 0:
        return Cards([], audit, replicates, confidence)
    judge, judge_ids = _codes(data["judge_id"])
    item = _items(judge, data["item_id"])
    lang, langs = _codes(data["lang"])
    pert, perts = _codes(data["perturbation"])
    verdict = np.asarray(pc.index_in(data["verdict"], pa.array(metrics.VERDICTS)))
    order = np.asarray(pc.index_in(data["order"], pa.array(metrics.ORDER_CODES)))
    n_items = int(item.max()) + 1
    table = metrics.item_table(item, order, verdict, data["ref_len"].to_numpy(),
                               data["pert_len"].to_numpy(), n_items)

    # Each item's cell (judge, language, perturbation), with codes ranked by name so the
    # cards come out sorted. Sorting the items by cell makes every card a contiguous slice:
    # a perturbation cell, a language (a run of cells), a judge (a run of languages).
    first_row = np.unique(judge, return_index=True)[1]
    names = dict(zip(judge_ids, data["judge"].take(pa.array(first_row)).to_pylist(), strict=True))
    j_rank = _rank([(names[j], j) for j in judge_ids])
    cell = np.zeros(n_items, dtype=np.int64)
    cell[item] = (j_rank[judge] * len(langs) + lang) * len(perts) + pert
    by_cell = np.argsort(cell, kind="stable")
    table, cell = table[by_cell], cell[by_cell]
    cumulative = np.zeros((n_items + 1, len(metrics.STATS)))
    np.cumsum(table, axis=0, out=cumulative[1:])

    # Lay the cards out (judge > language > perturbation), then compute every card's point
    # values in one vectorised pass, then bootstrap each slice.
    n_langs, n_perts = len(langs), len(perts)
    judge_of, lang_of, pert_of = cell // (n_langs * n_perts), (cell // n_perts) % n_langs, cell % n_perts
    judge_names = sorted(judge_ids, key=lambda j: (names[j], j))
    spans: list[tuple[int, int, str]] = []

    def span(start: int, stop: int, key: str) -> int:
        spans.append((start, stop, key))
        return len(spans) - 1

    layout = []
    for j_start, j_stop in _runs(judge_of):
        jid = judge_names[judge_of[j_start]]
        lang_layout = []
        for l_start, l_stop in _runs(lang_of, j_start, j_stop):
            code = langs[lang_of[l_start]]
            pert_layout = [(perts[pert_of[a]], span(a, b, f"{jid}/{code}/{perts[pert_of[a]]}"))
                           for a, b in _runs(pert_of, l_start, l_stop)]
            lang_layout.append((code, span(l_start, l_stop, f"{jid}/{code}"), pert_layout))
        layout.append((jid, span(j_start, j_stop, jid), lang_layout))

    starts, stops = (np.array(x) for x in zip(*[(a, b) for a, b, _ in spans], strict=True))
    sums = cumulative[stops] - cumulative[starts]
    points = metrics.from_sums(sums)

    rows, pattern_of = metrics.patterns(table)

    def card(i: int) -> Card:
        start, stop, key = spans[i]
        point = {name: float(values[i]) for name, values in points.items()}
        counts = np.bincount(pattern_of[start:stop], minlength=len(rows))
        return _card(counts, rows, sums[i], point, replicates, confidence, f"{seed}\x1f{key}")

    judges = [
        JudgeCards(names[jid], jid, card(j), [
            LanguageCard(code, languages.name(code), card(li),
                         [PerturbationCard(name, card(pi)) for name, pi in pert_layout])
            for code, li, pert_layout in lang_layout
        ])
        for jid, j, lang_layout in layout
    ]
    return Cards(judges, audit, replicates, confidence)


def _rank(values: list) -> np.ndarray:
    """Position of each value in sorted order."""
    ranks = np.empty(len(values), dtype=np.int64)
    ranks[sorted(range(len(values)), key=values.__getitem__)] = np.arange(len(values))
    return ranks


def _runs(codes: np.ndarray, start: int = 0, stop: int | None = None):
    """(start, stop) of each run of equal values in ``codes[start:stop]``."""
    stop = len(codes) if stop is None else stop
    edges = np.flatnonzero(np.diff(codes[start:stop])) + 1 + start
    bounds = [start, *edges.tolist(), stop]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def encode(cards: Cards) -> bytes:
    return msgspec.json.format(msgspec.json.encode(cards), indent=2) + b"\n"
