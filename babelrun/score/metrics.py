"""Card metrics as ratios of per-item sums: vectorised, and cheap to bootstrap.

Every presentation (one record) has a verdict: ``reference`` (correct), ``perturbed``,
``tie`` or ``invalid``. Per item (the two orders of one pair) we sum a few counts
(``STATS``); every metric is a ratio of such sums, so a bootstrap replicate is one matrix
product of resampling weights with the item table.

Definitions (documented in docs/metrics.md):

- accuracy          = P(verdict = reference); ties and invalid replies count as wrong.
- position bias Δ   = P(judge names slot A) − P(judge names slot B), over the presentations of
                      items seen in both orders (an item judged in one order only would show
                      its answer's slot as a bias: its order is all it has); an unbiased
                      judge is then at 0; ties and invalid replies name no slot.
- order consistency = over items seen in both orders, the share whose two verdicts name the
  (κ_ord)             same answer (both the reference or both the perturbed one); a tie or an
                      invalid reply is never a consistent decision (decision consistency; on a
                      tie-labelled pair, tie in both orders is its decision).
- same verdict      = over items seen in both orders, the share whose two verdicts are the same
  (κ_same)            verdict, tie/tie included everywhere (an invalid reply is no verdict): the
                      consistency published judge benchmarks report (1 − JudgeBench's
                      inconsistency).
- verbosity v       = ½·[P(longer | longer is worse) + P(longer | longer is better)] over
                      decisive verdicts on pairs whose lengths differ by ≥ 10 %: the judge's
                      preference for the longer answer with accuracy cancelled out; 0.5 is
                      neutral. Needs pairs of both kinds (undefined otherwise).
- self-consistency  = for a judge asked k > 1 samples of each presentation: over the pairs of
                      one presentation's samples, the share that agree (the same verdict; an
                      invalid reply agrees with none), per order and overall. Each presentation
                      has k(k−1)/2 pairs, so presentations weigh equally where each has k samples.
                      The other metrics then count every sample; κ_ord and κ_same pair the two
                      orders' samples of one index.
- R                 = (0.6·acc + 0.4·κ_ord)·(1 − 0.8·|Δ|)·(1 − 0.7·max(0, 2v − 1)),
                      the last factor taken as 1 where v is undefined.

A judge whose every reply is invalid has acc = 0 and κ_ord = 0, hence R = 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from .stats import percentile_rows

# Columns of the per-item table.
STATS = (
    "n", "correct", "slot_a", "slot_b", "tie", "invalid",
    "pairs", "consistent", "lw_n", "lw_long", "lb_n", "lb_long",
    # Tie-labelled pairs (labelled sets whose gold is "neither better"): their presentations
    # and items. Last, and 0 everywhere else, so other items' rows (and bootstraps) are as before.
    "gold_tie", "tie_items",
    # Both orders gave the same verdict, tie/tie included. A function of the row's other columns
    # (consistent, or two ties), so it is left out of ``patterns``' key: the distinct rows, their
    # order and every bootstrap draw are the same as without it.
    "same_verdict",
    # Decisive-labelled presentations of items seen in both orders: Δ's denominator (a function
    # of n, pairs and gold_tie, so left out of ``patterns``' key like same_verdict).
    "paired_slots",
    # A judge asked ``samples: k`` (k > 1): per order, the pairs of one presentation's samples
    # and how many of them agree (the same verdict; an invalid reply agrees with none). Last,
    # and 0 for a judge asked once, so its rows, patterns and bootstrap draws are as before.
    "sample_pairs_rf", "sample_agree_rf", "sample_pairs_pf", "sample_agree_pf",
)
_I = {name: i for i, name in enumerate(STATS)}
DERIVED = ("same_verdict", "paired_slots")
_KEYED = np.array([name not in DERIVED for name in STATS])
LENGTH_GAP = 0.10  # relative length difference for a pair to count in v



class Metric(NamedTuple):
    """One card metric, as every reader of cards sees it: scoring (its interval and the count
    behind it), both reports' metric tables, the mitigations' change table (summary) and the
    tidy export. ``REGISTRY`` lists them in the reports' column order.

    Adding a metric: its computation in ``from_sums`` (and, for a bootstrap interval, nothing
    more: ``bootstrap`` resamples every metric ``from_sums`` returns), its field on
    ``score.cards.Card``, and one line here (docs/extending.md, *A metric*).
    """

    name: str  # the Card field and from_sums key
    header: str  # the reports' column header
    n: tuple[str, ...]  # STATS columns summed for the count behind the interval; () = the card's items
    wilson: str | None = None  # a STATS column k: a Wilson interval of k in n; None = the item bootstrap
    signed: bool = False  # printed with a sign (a bias whose direction matters)
    rate: bool = False  # reports print the value alone (0 where undefined), right-aligned
    higher_is_better: bool | None = True  # None: neither (0 or 0.5 is the neutral point)
    # Compared between two sets of verdicts (``babelrun diff`` and its --fail-if-worse gate, a
    # mitigation's change against its base judge): the metric's place, 1 first, in a comparison's
    # list of changes (cards.json keeps that order); 0: not compared.
    compared: int = 0
    flag: str | None = None  # a remark the reports append: "verdict", "below_chance", "consistently_wrong"
    kinds: tuple[str, ...] = ("degradation", "pairs")  # the card families the metric is on
    less: tuple[str, ...] = ()  # STATS columns taken off the count (tie-labelled presentations)
    # On a card only where its count is > 0: a judge asked ``samples: k`` > 1. The reports'
    # metric table and the tidy export leave it out of cards that lack it.
    sampled: bool = False


REGISTRY: tuple[Metric, ...] = (
    Metric("reliability", "R", (), compared=5, flag="verdict"),
    Metric("accuracy", "accuracy", ("n",), compared=1, flag="below_chance"),
    Metric("position_bias", "Δ (slot A)", ("paired_slots",), signed=True, higher_is_better=None, compared=2),
    Metric("verbosity", "v (longer)", ("lw_n", "lb_n"), higher_is_better=None, compared=4),
    Metric("order_consistency", "κ_ord", ("pairs",), compared=3, flag="consistently_wrong"),
    Metric("verdict_consistency", "κ_same", ("pairs",), higher_is_better=None),
    Metric("tie_rate", "ties", ("n",), wilson="tie", rate=True, higher_is_better=None),
    Metric("invalid_rate", "invalid", ("n",), wilson="invalid", rate=True, higher_is_better=False),
    Metric("self_consistency", "self-cons.", ("sample_pairs_rf", "sample_pairs_pf"), sampled=True),
    Metric("self_consistency_ref_first", "self-cons. (ref first)", ("sample_pairs_rf",), sampled=True),
    Metric("self_consistency_pert_first", "self-cons. (pert first)", ("sample_pairs_pf",), sampled=True),
)
BY_NAME = {m.name: m for m in REGISTRY}
# The metrics a comparison (score.paired: diff, a mitigation's change) computes, in its order.
COMPARED: tuple[str, ...] = tuple(m.name for m in sorted((m for m in REGISTRY if m.compared), key=lambda m: m.compared))


def interval_n(sums: np.ndarray, items: int) -> dict[str, int]:
    """Each metric's count behind its interval, from a card's summed item table."""
    return {m.name: int(sum(int(sums[_I[c]]) for c in m.n) - sum(int(sums[_I[c]]) for c in m.less))
            if m.n else items for m in REGISTRY}


VERDICTS = ("reference", "perturbed", "tie", "invalid")
ORDER_CODES = ("ref_first", "pert_first")


def presentation_code(order: np.ndarray, verdict: np.ndarray, ref_len: np.ndarray,
                      pert_len: np.ndarray, tie_gold: np.ndarray | None = None) -> np.ndarray:
    """All a record contributes to its item, in one byte: verdict (bits 0–1), order (bit 2),
    the pair's length stratum (bits 3–4: 1 = the longer answer is the worse one,
    2 = the longer is the better one, 0 = lengths within 10 %) and whether the item is a
    tie-labelled pair (bit 5: its correct verdict is ``tie``; no length stratum, since neither
    answer is the better one). One byte per record is cheap to reorder; four int64 columns
    are not."""
    longer_is_ref = ref_len > pert_len
    differs = np.abs(ref_len - pert_len) >= LENGTH_GAP * np.maximum(np.maximum(ref_len, pert_len), 1)
    stratum = np.where(differs, np.where(longer_is_ref, 2, 1), 0)
    tie = np.zeros(len(verdict), dtype=np.int64) if tie_gold is None else np.asarray(tie_gold).astype(np.int64)
    stratum = np.where(tie == 1, 0, stratum)
    code: np.ndarray = (verdict | (order << 2) | (stratum << 3) | (tie << 5)).astype(np.uint8)
    return code


def item_table(starts: np.ndarray, code: np.ndarray) -> np.ndarray:
    """Sum each presentation into its item's row.

    The records come sorted so that each item's records are adjacent (one or two of them:
    its two orders); ``starts`` holds each item's first record and ``code`` each record's
    ``presentation_code``.
    """
    verdict, order, stratum, gold_tie = code & 3, (code >> 2) & 1, (code >> 3) & 3, (code >> 5) & 1 == 1
    # A tie-labelled pair is right when the judge says tie; its decisive verdicts name a slot
    # but say nothing of position bias or verbosity, which are measured on decisive-labelled pairs.
    correct = np.where(gold_tie, verdict == 2, verdict == 0)
    chose_ref = verdict == 0
    decisive = verdict <= 1
    # The judge named slot A when it chose the answer standing in A.
    slot_a = decisive & ~gold_tie & (chose_ref == (order == 0))
    chose_longer = decisive & (chose_ref == (stratum == 2))
    lw = (stratum == 1) & decisive  # the longer answer is the perturbed (worse) one
    lb = (stratum == 2) & decisive

    # An item has one or two records (its orders), adjacent: add the second where there is
    # one. Column by column, each a contiguous gather (ten times faster than np.add.reduceat).
    n = len(verdict)
    counts = np.diff(np.append(starts, n))
    if counts.max() > 2:
        raise ValueError("an item has more than two records: the records are not counted ones")
    both = counts == 2
    second = np.where(both, starts + 1, starts)
    table = np.empty((len(starts), len(STATS)), dtype=np.int32, order="F")
    for name, values in (
        ("correct", correct), ("slot_a", slot_a), ("slot_b", decisive & ~gold_tie & ~slot_a),
        ("gold_tie", gold_tie),
        ("tie", verdict == 2), ("invalid", verdict == 3),
        ("lw_n", lw), ("lw_long", lw & chose_longer), ("lb_n", lb), ("lb_long", lb & chose_longer),
    ):
        table[:, _I[name]] = values[starts].astype(np.uint8) + (values[second] & both)
    table[:, _I["n"]] = counts
    # Δ is a two-order metric: an item's slots count only when both its orders are in.
    table[:, _I["slot_a"]] *= both
    table[:, _I["slot_b"]] *= both
    table[:, _I["paired_slots"]] = both * (counts - table[:, _I["gold_tie"]])

    # Order consistency needs both orders of the item: its two adjacent verdicts.
    first_v, second_v = verdict[starts], verdict[second]
    table[:, _I["pairs"]] = both
    # On a tie-labelled pair, tie in both orders is a consistent decision too.
    table[:, _I["consistent"]] = both & (first_v == second_v) & ((first_v <= 1) | (gold_tie[starts] & (first_v == 2)))
    table[:, _I["tie_items"]] = gold_tie[starts]
    table[:, _I["same_verdict"]] = both & (first_v == second_v) & (first_v <= 2)
    for name in ("sample_pairs_rf", "sample_agree_rf", "sample_pairs_pf", "sample_agree_pf"):
        table[:, _I[name]] = 0  # filled by ``sample_table`` for a judge asked several samples
    return table


def sample_table(item_of: np.ndarray, n_items: int, code: np.ndarray) -> np.ndarray:
    """The four ``sample_*`` columns per item: for each presentation (item and order) with m
    samples, its m(m−1)/2 sample pairs and those whose verdicts agree (reference, perturbed or
    tie alike; invalid agrees with none). ``item_of``: each record's item row; ``code``: its
    ``presentation_code``."""
    verdict, order = (code & 3).astype(np.int64), ((code >> 2) & 1).astype(np.int64)
    presentation = item_of.astype(np.int64) * 2 + order
    m = np.bincount(presentation, minlength=2 * n_items)
    by_verdict = np.bincount(presentation * 4 + verdict, minlength=8 * n_items).reshape(2 * n_items, 4)
    pairs = m * (m - 1) // 2
    agree = (by_verdict[:, :3] * (by_verdict[:, :3] - 1) // 2).sum(axis=1)
    out = np.zeros((n_items, 4), dtype=np.int64)
    out[:, 0], out[:, 1] = pairs[0::2], agree[0::2]
    out[:, 2], out[:, 3] = pairs[1::2], agree[1::2]
    return out


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def from_sums(s: np.ndarray) -> dict[str, np.ndarray]:
    """Metrics from summed item tables; ``s`` has shape (..., len(STATS))."""
    g = {name: s[..., i] for name, i in _I.items()}
    acc = _ratio(g["correct"], g["n"])
    delta = _ratio(g["slot_a"] - g["slot_b"], g["paired_slots"])  # decisive-labelled, both orders in
    kappa = _ratio(g["consistent"], g["pairs"])
    v = 0.5 * (_ratio(g["lw_long"], g["lw_n"]) + _ratio(g["lb_long"], g["lb_n"]))
    length_factor = np.where(np.isnan(v), 1.0, 1.0 - 0.7 * np.maximum(0.0, 2.0 * v - 1.0))
    r = (0.6 * acc + 0.4 * kappa) * (1.0 - 0.8 * np.abs(delta)) * length_factor
    return {
        "accuracy": acc,
        "position_bias": delta,
        "verbosity": v,
        "order_consistency": kappa,
        "verdict_consistency": _ratio(g["same_verdict"], g["pairs"]),
        "reliability": r,
        "tie_rate": _ratio(g["tie"], g["n"]),
        "invalid_rate": _ratio(g["invalid"], g["n"]),
        "self_consistency": _ratio(g["sample_agree_rf"] + g["sample_agree_pf"],
                                   g["sample_pairs_rf"] + g["sample_pairs_pf"]),
        "self_consistency_ref_first": _ratio(g["sample_agree_rf"], g["sample_pairs_rf"]),
        "self_consistency_pert_first": _ratio(g["sample_agree_pf"], g["sample_pairs_pf"]),
    }


def patterns(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of an item table and each item's row number among them.

    An item's row holds a few small counts (each 0, 1 or 2: an item has two presentations),
    so a whole run has only some dozens of distinct rows. Rows are numbered through one
    integer key per row (the counts as digits), which sorts far faster than rows do.
    """
    keyed = table[:, np.resize(_KEYED, table.shape[1])]  # side by side tables repeat STATS' columns
    base = int(keyed.max()) + 1 if keyed.size else 1
    key = keyed.astype(np.int64) @ (base ** np.arange(keyed.shape[1], dtype=np.int64))
    _, first, pattern_of = np.unique(key, return_index=True, return_inverse=True)
    return table[first], pattern_of


def bootstrap(counts: np.ndarray, rows: np.ndarray, replicates: int, confidence: float,
              rng: np.random.Generator) -> dict[str, tuple[float, float]]:
    """Item-clustered percentile bootstrap: both orders of an item are resampled together.

    ``counts[k]`` items of the card have the distinct row ``rows[k]`` (see ``patterns``).
    Drawing n items with replacement is drawing multinomial counts over the distinct rows
    with probabilities ``counts / n``: the same distribution as resampling items, at a cost
    of replicates × distinct rows instead of replicates × items.
    """
    return bootstraps([counts], rows, replicates, confidence, [rng])[0]


def bootstraps(counts: Sequence[np.ndarray], rows: np.ndarray, replicates: int, confidence: float,
               rngs: Sequence[np.random.Generator]) -> list[dict[str, tuple[float, float]]]:
    """``bootstrap`` of several cards over the same distinct ``rows``, card c drawn from
    ``rngs[c]``: the same intervals as one call per card, with the metrics and percentiles of
    all of them computed in one pass (per card, those dozens of small array operations were
    most of a run's scoring). ``bootstrap_block`` says how many cards to give at a time."""
    out: list[dict[str, tuple[float, float]]] = [{} for _ in counts]
    drawn = [c for c, k in enumerate(counts) if replicates and int(k.sum())]
    if not drawn:
        return out
    weights = np.empty((len(drawn), replicates, len(rows)))
    for at, c in enumerate(drawn):
        n = int(counts[c].sum())
        weights[at] = rngs[c].multinomial(n, counts[c] / n, size=replicates)
    for c, intervals in zip(drawn, percentile_rows(from_sums(weights @ rows), confidence), strict=True):
        out[c] = intervals
    return out


def bootstrap_block(replicates: int, rows: np.ndarray) -> int:
    """How many cards ``bootstraps`` takes at a time: its arrays (cards × replicates × the
    wider of the distinct rows and the stats) stay near 4 MB of float64. At 11,818 calls the
    cards took 0.13 s so (0.20 s one card at a time) and 0.11 s with 8 MB blocks, but those
    raised the whole audit's peak by 10 MB (165 against 155 MiB, ``bench/full_plan.py``)."""
    return max(1, (1 << 19) // max(1, replicates * max(len(rows), len(STATS))))
