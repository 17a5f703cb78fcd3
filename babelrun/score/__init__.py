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

from .. import languages
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


def _card(table: np.ndarray, sums: np.ndarray, point: dict[str, float], replicates: int,
          confidence: float, seed_key: str) -> Card:
    """One card: the point values (already computed for every card at once) and the
    bootstrap interval over this card's slice of the item table."""
    digest = hashlib.blake2b(seed_key.encode(), digest_size=8).digest()
    ci = metrics.bootstrap(table, replicates, confidence, np.random.default_rng(int.from_bytes(digest)))
    n = _interval_n(sums, len(table))

    def interval(name: str) -> Interval:
        value = _round(point[name])
        lo, hi = ci.get(name, (None, None)) if value is not None else (None, None)
        return Interval(value, _round(lo), _round(hi), int(n[name]))

    return Card(items=len(table), presentations=int(sums[0]), **{name: interval(name) for name in n})


def score(data: pa.Table, audit: list[PerturbationAudit], *, replicates: int = 1000,
          confidence: float = 0.95, seed: int = 0) -> Cards:
    """Cards for every judge in ``data`` (the counted records, one row per key)."""
    if data.num_rows == 0:
        return Cards([], audit, replicates, confidence)
    judge, judge_ids = _codes(data["judge_id"])
    item_id, item_ids = _codes(data["item_id"])
    # An item is a (judge, item_id) pair; numbered in that sorted order.
    _, item = np.unique(judge * len(item_ids) + item_id, return_inverse=True)
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
    cumulative = np.vstack([np.zeros(len(metrics.STATS)), np.cumsum(table, axis=0)])

    def card(start: int, stop: int, key: str) -> Card:
        sums = cumulative[stop] - cumulative[start]
        point = {k: float(v) for k, v in metrics.from_sums(sums).items()}
        return _card(table[start:stop], sums, point, replicates, confidence, f"{seed}\x1f{key}")

    n_langs, n_perts = len(langs), len(perts)
    judge_of, lang_of, pert_of = cell // (n_langs * n_perts), (cell // n_perts) % n_langs, cell % n_perts
    judge_names = sorted(judge_ids, key=lambda j: (names[j], j))
    judges = []
    for j_start, j_stop in _runs(judge_of):
        jid = judge_names[judge_of[j_start]]
        lang_cards = []
        for l_start, l_stop in _runs(lang_of, j_start, j_stop):
            code = langs[lang_of[l_start]]
            per_pert = []
            for p_start, p_stop in _runs(pert_of, l_start, l_stop):
                name = perts[pert_of[p_start]]
                per_pert.append(PerturbationCard(name, card(p_start, p_stop, f"{jid}/{code}/{name}")))
            lang_card = card(l_start, l_stop, f"{jid}/{code}")
            lang_cards.append(LanguageCard(code, languages.name(code), lang_card, per_pert))
        judges.append(JudgeCards(names[jid], jid, card(j_start, j_stop, jid), lang_cards))
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
