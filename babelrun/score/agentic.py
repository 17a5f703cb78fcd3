"""The agentic card: how well a judge compares agent trajectories (docs/metrics.md).

Built from the same vectorised cards as the text ones (``score.cells``) over the agentic
records only, relabelled, with no loop per record (a third pass, not relabelled, gives
each perturbation's own accuracy for ``by_perturbation``):

1. Each record's perturbation is replaced by its family (``FAMILIES``), and a copy of every
   record is added under the language ``mul`` (all languages together): one ``cells`` call
   gives, per judge and language, each family's accuracy with its item-clustered bootstrap
   interval, and the language's position bias Δ and order consistency κ_ord over all its
   agentic items.
2. The length probe: the ``step_pad`` records (the longer trace is the worse one) and those
   of ``drop_intermediate_step`` and ``early_termination`` (the longer trace is the better one)
   under one label; that cell's verbosity v is the trajectory-length bias — the text
   definition, with step_pad as the only source of longer-but-worse pairs.

Families: tool use (T) = tool_name_swap, extra_spurious_arg, drop_intermediate_step,
corrupt_tool_result, early_termination; arguments (A) = argument_corrupt,
missing_required_arg; hallucination detection (H) = hallucinated_tool; length = step_pad.
Agentic accuracy = the weighted mean of T, A and H (weights ``WEIGHTS``) over the families
the run measured, renormalised; then, with R's gating,

    R_agent = (0.6·acc_agent + 0.4·κ_ord)·(1 − 0.8·|Δ|)·(1 − 0.7·max(0, 2·v_len − 1))

the last factor 1 when the length bias is not measured. A family with no records is listed
in ``not_measured`` and never scales the score.

R_agent's value and interval come from the item table (``metrics.item_table``) with each
item's row placed in its block (``BLOCKS``): one multinomial draw over a card's items gives
every family's sums at once, the same item-clustered percentile bootstrap as R's
(``_reliability``). A family's accuracy is pooled over its presentations.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, cast

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..core import languages
from ..core.items import FAMILY_PREFIX
from . import metrics, verdict
from .columns import by_cell_and_item, codes, item_bits, lookup
from .stats import Interval, rounded

PREFIX = FAMILY_PREFIX["agentic"]
FAMILIES: dict[str, tuple[str, ...]] = {
    "tool": ("tool_name_swap", "extra_spurious_arg", "drop_intermediate_step", "corrupt_tool_result",
             "early_termination"),
    "argument": ("argument_corrupt", "missing_required_arg"),
    "hallucination": ("hallucinated_tool",),
    "length": ("step_pad",),
}
WEIGHTS = {"tool": 1 / 3, "argument": 1 / 3, "hallucination": 1 / 3}
LENGTH_PROBE = ("step_pad", "drop_intermediate_step", "early_termination")
ALL = "mul"  # the language code of the all-languages card ("multiple languages")
# The item table's blocks for R_agent's bootstrap: tool use is split in two so that the
# length probe's shortening perturbations can be added to step_pad's pairs.
BLOCKS = {"tool": ("tool_name_swap", "extra_spurious_arg", "corrupt_tool_result"),
          "tool_probe": ("drop_intermediate_step", "early_termination"),
          "argument": FAMILIES["argument"], "hallucination": FAMILIES["hallucination"], "step_pad": ("step_pad",)}


class PerturbationAccuracy(msgspec.Struct, frozen=True):
    perturbation: str  # agent:<name>
    items: int
    accuracy: Interval


class AgenticCard(msgspec.Struct, frozen=True):
    items: int
    presentations: int
    tool_accuracy: Interval | None
    argument_accuracy: Interval | None
    hallucination_detection: Interval | None
    length_bias: Interval | None  # v on the length probe; 0.5 neutral, 1 always the longer
    position_bias: Interval
    order_consistency: Interval
    accuracy: Interval  # the families' weighted accuracy (renormalised over the measured ones)
    reliability: Interval  # R_agent
    not_measured: list[str]
    note: str = ""
    by_perturbation: list[PerturbationAccuracy] = []  # each perturbation's own accuracy
    verdict: str | None = None  # as a text card's (score/verdict.py), on R_agent
    below_chance: bool = False  # every measured family's accuracy interval below 0.5


class AgenticLanguageCard(msgspec.Struct, frozen=True):
    lang: str
    language: str
    card: AgenticCard


class AgenticJudgeCards(msgspec.Struct, frozen=True):
    judge: str
    judge_id: str
    overall: AgenticCard
    languages: list[AgenticLanguageCard]


def _relabel(data: pa.Table, column: str, mapping: dict[str, str]) -> pa.Table:
    """``column`` as plain strings, each value in ``mapping`` replaced by its image."""
    values = data[column].cast(pa.string())
    mapped = pc.take(pa.array(list(mapping.values()), pa.string()),
                     pc.index_in(values, pa.array(list(mapping), pa.string())))
    return data.set_column(data.schema.get_field_index(column), column, pc.coalesce(mapped, values))


def _with_all_languages(data: pa.Table) -> pa.Table:
    data = data.set_column(data.schema.get_field_index("lang"), "lang", data["lang"].cast(pa.string()))
    every = data.set_column(data.schema.get_field_index("lang"), "lang", pa.array([ALL] * data.num_rows, pa.string()))
    return pa.concat_tables([data, every]).unify_dictionaries()


def cards(data: pa.Table, cells: Callable[[pa.Table], Any], replicates: int = 1000,
          confidence: float = 0.95, seed: int = 0) -> list[AgenticJudgeCards]:
    """Agentic cards per judge (all languages) and per language, from the agentic records;
    ``cells`` is ``score.cells`` with the same bootstrap settings."""
    family_of = {PREFIX + name: family for family, names in FAMILIES.items() for name in names}
    families = cells(_with_all_languages(_relabel(data, "perturbation", family_of)))
    probe = data.filter(pc.is_in(data["perturbation"].cast(pa.string()), pa.array([PREFIX + n for n in LENGTH_PROBE])))
    lengths = cells(_with_all_languages(_relabel(probe, "perturbation", {PREFIX + n: "length" for n in LENGTH_PROBE})))
    length_v = {(j.judge_id, lc.lang): p.card.verbosity for j in lengths.judges for lc in j.languages
                for p in lc.perturbations}
    everywhere = _with_all_languages(data)
    reliability = _reliability(everywhere, replicates, confidence, seed)
    single = {(j.judge_id, lc.lang): [PerturbationAccuracy(p.perturbation, p.card.items, p.card.accuracy)
                                      for p in lc.perturbations]
              for j in cells(everywhere).judges for lc in j.languages}
    out = []
    for judge in families.judges:
        by_lang = {lc.lang: msgspec.structs.replace(
                       _card(lc, length_v.get((judge.judge_id, lc.lang)),
                             reliability.get((judge.judge_id, lc.lang), (None, None, None))),
                       by_perturbation=single.get((judge.judge_id, lc.lang), []))
                   for lc in judge.languages}
        out.append(AgenticJudgeCards(judge.judge, judge.judge_id, by_lang.pop(ALL), [
            AgenticLanguageCard(code, languages.name(code), card) for code, card in by_lang.items()]))
    return out


_Bounds = tuple[float | None, float | None, float | None]  # (value, lo, hi)


def _card(lc: Any, length: Interval | None, reliability: _Bounds) -> AgenticCard:
    """One language's agentic card from its family cards, its length-probe v and its
    R_agent (value, lo, hi)."""
    acc = {p.perturbation: p.card.accuracy for p in lc.perturbations}
    length = length if length is not None and length.value is not None else None
    measured = [f for f in WEIGHTS if f in acc and acc[f].value is not None]
    missing = [f for f in (*WEIGHTS, "length") if f not in measured and (f != "length" or length is None)]
    total = sum(WEIGHTS[f] for f in measured)
    accuracy = sum(WEIGHTS[f] * acc[f].value for f in measured) / total if total else float("nan")
    note = ""
    if missing:
        note = (f"not measured: {', '.join(missing)}; accuracy renormalised over "
                f"{', '.join(measured) or 'nothing'}" + ("; no length gate" if length is None else ""))
    items = lc.card.items
    r = Interval(*reliability, n=items)
    return AgenticCard(
        items=items, presentations=lc.card.presentations,
        tool_accuracy=acc.get("tool"), argument_accuracy=acc.get("argument"),
        hallucination_detection=acc.get("hallucination"), length_bias=length,
        position_bias=lc.card.position_bias, order_consistency=lc.card.order_consistency,
        accuracy=Interval(rounded(accuracy), None, None, items), reliability=r,
        not_measured=missing, note=note,
        verdict=verdict.verdict(r, items),
        below_chance=verdict.below_chance(*(acc.get(f) for f in measured)),
    )




def r_agent(sums: np.ndarray, families: list[str]) -> np.ndarray:
    """R_agent from item-table sums per block (shape (..., len(BLOCKS), len(STATS))), over the
    accuracy families ``families`` (those the card measured)."""
    block = {name: sums[..., i, :] for i, name in enumerate(BLOCKS)}
    family_sums = {"tool": block["tool"] + block["tool_probe"], "argument": block["argument"],
                   "hallucination": block["hallucination"]}
    acc = cast(np.ndarray, sum(WEIGHTS[f] * metrics.from_sums(family_sums[f])["accuracy"] for f in families))
    acc = acc / sum(WEIGHTS[f] for f in families)
    overall = metrics.from_sums(sums.sum(axis=-2))
    v = metrics.from_sums(block["tool_probe"] + block["step_pad"])["verbosity"]
    gate = np.where(np.isnan(v), 1.0, 1.0 - 0.7 * np.maximum(0.0, 2.0 * v - 1.0))
    r: np.ndarray = ((0.6 * acc + 0.4 * overall["order_consistency"])
                     * (1.0 - 0.8 * np.abs(overall["position_bias"])) * gate)
    return r


def _reliability(data: pa.Table, replicates: int, confidence: float,
                 seed: int) -> dict[tuple[str, str], tuple[float | None, float | None, float | None]]:
    """R_agent per (judge_id, language): its value, and its item-clustered bootstrap interval."""

    names = tuple(PREFIX + n for ns in BLOCKS.values() for n in ns)
    block_of = np.array([i for i, ns in enumerate(BLOCKS.values()) for _ in ns] + [-1])
    position = lookup(data["perturbation"], names)  # -1 where not found
    block = block_of[np.where(position < 0, len(names), position)]  # -1: no block
    keep = block >= 0
    if not keep.any():
        return {}
    data, block = data.filter(pa.array(keep)), block[keep]
    judge, judge_ids = codes(data["judge_id"])
    lang, langs = codes(data["lang"])
    n_blocks, n_stats = len(BLOCKS), len(metrics.STATS)
    cell = (judge * len(langs) + lang) * n_blocks + block
    bits = item_bits(data)
    by = by_cell_and_item(cell, bits)
    cell, bits = cell[by], bits[by]
    starts = np.flatnonzero(np.concatenate(([True], (cell[1:] != cell[:-1]) | (bits[1:] != bits[:-1]))))
    code = metrics.presentation_code(lookup(data["order"], metrics.ORDER_CODES),
                                     lookup(data["verdict"], metrics.VERDICTS),
                                     data["ref_len"].to_numpy(), data["pert_len"].to_numpy())
    table = metrics.item_table(starts, code[by])
    # An item's row with its block as one more column: the distinct such rows (a few dozen)
    # are laid out wide, each in its block's columns, so one multinomial draw over a card's
    # items resamples every block together.
    item_cell = cell[starts]
    rows, pattern_of = metrics.patterns(np.column_stack([table, item_cell % n_blocks]))
    wide = np.zeros((len(rows), n_blocks * n_stats))
    wide[np.arange(len(rows))[:, None], rows[:, -1:] * n_stats + np.arange(n_stats)] = rows[:, :-1]
    group = item_cell // n_blocks
    out: dict[tuple[str, str], _Bounds] = {}
    edges = np.flatnonzero(np.diff(group)) + 1
    for a, b in zip([0, *edges.tolist()], [*edges.tolist(), len(group)], strict=True):
        jid, code_ = judge_ids[group[a] // len(langs)], langs[group[a] % len(langs)]
        counts = np.bincount(pattern_of[a:b], minlength=len(rows))
        point = wide.T @ counts
        families = [f for f in WEIGHTS if _family_n(point.reshape(n_blocks, n_stats), f) > 0]
        value = float(r_agent(point.reshape(n_blocks, n_stats), families)) if families else np.nan
        out[(jid, code_)] = (rounded(value), None, None)
        if not families or not np.isfinite(value) or replicates == 0:
            continue
        digest = hashlib.blake2b(f"{seed}\x1f{jid}/{code_}/agentic".encode(), digest_size=8).digest()
        rng = np.random.default_rng(int.from_bytes(digest))
        weights = rng.multinomial(b - a, counts / (b - a), size=replicates).astype(np.float64)
        samples = r_agent((weights @ wide).reshape(replicates, n_blocks, n_stats), families)
        finite = samples[np.isfinite(samples)]
        if finite.size:
            tail = (1.0 - confidence) / 2.0
            lo, hi = np.quantile(finite, [tail, 1.0 - tail])
            out[(jid, code_)] = (rounded(value), rounded(lo), rounded(hi))
    return out


def _family_n(block_sums: np.ndarray, family: str) -> int:
    blocks = ("tool", "tool_probe") if family == "tool" else (family,)
    return int(sum(block_sums[list(BLOCKS).index(b), 0] for b in blocks))
