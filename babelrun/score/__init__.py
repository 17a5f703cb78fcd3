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
    encoded = pc.dictionary_encode(column).combine_chunks()
    return encoded.indices.to_numpy(zero_copy_only=False), encoded.dictionary.to_pylist()


def _round(x: float) -> float | None:
    return None if x is None or not np.isfinite(x) else round(float(x), ROUND)


def _card(table: np.ndarray, replicates: int, confidence: float, seed_key: str) -> Card:
    sums = table.sum(axis=0)
    point = metrics.from_sums(sums)
    rng = np.random.default_rng(int.from_bytes(hashlib.blake2b(seed_key.encode(), digest_size=8).digest()))
    ci = metrics.bootstrap(table, replicates, confidence, rng)
    col = {name: sums[i] for i, name in enumerate(metrics.STATS)}
    n = {
        "accuracy": col["n"], "position_bias": col["n"], "tie_rate": col["n"],
        "invalid_rate": col["n"], "order_consistency": col["pairs"],
        "verbosity": col["lw_n"] + col["lb_n"], "reliability": len(table),
    }

    def interval(name: str) -> Interval:
        lo, hi = ci.get(name, (None, None))
        value = _round(point[name])
        if value is None:
            lo = hi = None
        return Interval(value, _round(lo), _round(hi), int(n[name]))

    return Card(items=len(table), presentations=int(col["n"]),
                **{name: interval(name) for name in n})


def score(data: pa.Table, audit: list[PerturbationAudit], *, replicates: int = 1000,
          confidence: float = 0.95, seed: int = 0) -> Cards:
    """Cards for every judge in ``data`` (the counted records, one row per key)."""
    if data.num_rows == 0:
        return Cards([], audit, replicates, confidence)
    data = data.sort_by([("judge_id", "ascending"), ("item_id", "ascending"), ("order", "ascending")])
    judge, judge_ids = _codes(data["judge_id"])
    item, _ = _codes(pc.binary_join_element_wise(data["judge_id"], data["item_id"], "\x1f"))
    lang, langs = _codes(data["lang"])
    pert, perts = _codes(data["perturbation"])
    verdict = np.asarray(pc.index_in(data["verdict"], pa.array(metrics.VERDICTS)))
    order = np.asarray(pc.index_in(data["order"], pa.array(metrics.ORDER_CODES)))
    ref_len = data["ref_len"].to_numpy()
    pert_len = data["pert_len"].to_numpy()
    n_items = int(item.max()) + 1
    table = metrics.item_table(item, order, verdict, ref_len, pert_len, n_items)

    # Attributes of each item (the same on both of its records).
    item_judge = np.zeros(n_items, dtype=np.int64)
    item_lang = np.zeros(n_items, dtype=np.int64)
    item_pert = np.zeros(n_items, dtype=np.int64)
    item_judge[item], item_lang[item], item_pert[item] = judge, lang, pert
    names = dict(zip(data["judge_id"].to_pylist(), data["judge"].to_pylist(), strict=True))

    def card(mask: np.ndarray, key: str) -> Card:
        return _card(table[mask], replicates, confidence, f"{seed}\x1f{key}")

    judges = []
    for j, jid in sorted(enumerate(judge_ids), key=lambda p: names[p[1]]):
        in_judge = item_judge == j
        lang_cards = []
        for li in sorted(set(item_lang[in_judge].tolist()), key=lambda i: langs[i]):
            in_lang = in_judge & (item_lang == li)
            per_pert = [
                PerturbationCard(perts[pi], card(in_lang & (item_pert == pi), f"{jid}/{langs[li]}/{perts[pi]}"))
                for pi in sorted(set(item_pert[in_lang].tolist()), key=lambda i: perts[i])
            ]
            lang_cards.append(LanguageCard(langs[li], languages.name(langs[li]),
                                           card(in_lang, f"{jid}/{langs[li]}"), per_pert))
        judges.append(JudgeCards(names[jid], jid, card(in_judge, jid), lang_cards))
    return Cards(judges, audit, replicates, confidence)


def encode(cards: Cards) -> bytes:
    return msgspec.json.format(msgspec.json.encode(cards), indent=2) + b"\n"
