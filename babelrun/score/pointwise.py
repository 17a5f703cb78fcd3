"""Cards of pointwise judges: each answer scored alone, the gold being "the reference scores
higher". Documented in docs/metrics.md, *Pointwise metrics*.

An item has two records, ``reference`` and ``degraded`` (its two keys). Per item:

- discrimination accuracy = P(score(ref) > score(degraded)); equal scores (ties) and items
  with an invalid score count as wrong (never rewarded), as in pairwise;
- tie rate                = P(score(ref) = score(degraded)), over items;
- margin                  = mean of score(ref) − score(degraded), in scale units, over items
                            with both scores valid;
- verbosity v             = the pairwise definition applied to the implied preference (the
                            higher-scored answer; equal scores are not decisive);
- verbosity gain          = mean of score(degraded) − score(ref) over ``repeat_pad`` items:
                            what padding buys (negative: padding is penalised);
- score stability         = over references scored more than once (one reference stands in
                            every perturbation × severity item made from it, so it is scored
                            again in a different call), the share of pairs of those calls
                            that gave the same score; an invalid score agrees with nothing.
                            It replaces κ_ord: a pointwise judge has no slot order to be
                            consistent across, but it has repeated calls on the same answer;
- R                       = (0.6·acc + 0.4·stability)·(1 − 0.7·max(0, 2v − 1)), with acc in
                            place of a missing stability and the last factor 1 where v is
                            undefined because the plan held no length-differing pairs of
                            both kinds; where it held them but the judge decided none of
                            one kind (ties, invalid scores), v is unmeasured: the factor is
                            its worst, 0.3, and acc stands in for stability (a judge that
                            gives every answer the same score gets 0, not 0.4). No Δ: one
                            answer a call has no position. The scale
                            offset is not in R: it is relative to the other languages of the
                            run, and a language's R must not depend on which others ran;
- scale offset (language) = mean score of that language's references − the pooled mean of
                            all the judge's reference scores: the scale drift between languages;
- self-consistency        = for a judge asked k > 1 samples of each answer: over the pairs of
                            one presentation's (item and answer's) samples, the share with equal
                            scores (an invalid score equals none); each presentation with k
                            samples has k(k−1)/2 pairs, so each weighs equally;
- sample SD               = for such a judge, the mean over presentations of the standard
                            deviation (n − 1 in the denominator) of their valid sample scores,
                            over presentations with two valid scores or more. The other metrics
                            read each answer's mean valid score (G-Eval's weighting).

Intervals: percentile bootstrap over references (a reference and every item made from it
are resampled together; seeded from the manifest seed and the card), Wilson for the invalid
rate. The offset's interval resamples the language's references around the pooled point.
"""

from __future__ import annotations

import hashlib

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..core import languages
from ..core.items import FAMILY_PREFIX
from ..core.keys import sample_column
from ..core.records import ANSWERS
from ..perturb import lengthening
from . import stats, verdict
from .columns import codes, item_bits, lookup
from .metrics import LENGTH_GAP
from .stats import Interval, rounded

# The verbosity probes: the perturbations that declare they lengthen, and their code-switched twins.
PAD = tuple(prefix + name for name in lengthening()
            for prefix in (FAMILY_PREFIX["text"], FAMILY_PREFIX["code_switched"]))
COLUMNS = ["judge_id", "judge", "item_key", "order", "lang", "perturbation", "score", "ref_id", "ref_len",
           "pert_len"]
# Per-reference sums; every metric is a ratio of two of them.
SUMS = ("items", "correct", "tie", "margin_n", "margin", "calls", "invalid", "lw_n", "lw_long", "lb_n",
        "lb_long", "pad_n", "pad", "ref_n", "ref", "agree", "pairs", "lw_items", "lb_items",
        # A judge asked ``samples: k`` > 1: its presentations' sample pairs, those with equal
        # scores, and the sum and count of their sample SDs (0 for a judge asked once).
        "sample_pairs", "sample_agree", "sd", "sd_n")
_S = {name: i for i, name in enumerate(SUMS)}


class PointwiseCard(msgspec.Struct, frozen=True):
    items: int
    calls: int
    discrimination: Interval
    tie_rate: Interval
    margin: Interval
    verbosity: Interval
    verbosity_gain: Interval
    stability: Interval
    reliability: Interval
    invalid_rate: Interval
    reference_mean: Interval
    # What the card may claim, as a pairwise card's (score/verdict.py) on R_pw: pass / fail
    # against the deployment bar, or why neither (too few items, unreadable replies); and
    # whether the judge scores the degraded answer higher (margin interval below 0).
    verdict: str | None = None
    below_chance: bool = False
    # A judge asked ``samples: k`` > 1: the share of a presentation's sample pairs with equal
    # scores and the mean within-presentation SD. Absent from cards.json for a judge asked once.
    self_consistency: Interval | msgspec.UnsetType = msgspec.UNSET
    sample_sd: Interval | msgspec.UnsetType = msgspec.UNSET

    @property
    def accuracy(self) -> Interval:
        """Discrimination, under the name the report's shared tables read (leaderboard)."""
        return self.discrimination


class PointwiseLanguage(msgspec.Struct, frozen=True):
    lang: str
    language: str
    scale_offset: Interval
    card: PointwiseCard


class PointwisePerturbation(msgspec.Struct, frozen=True):
    perturbation: str
    card: PointwiseCard


class PointwiseJudgeCards(msgspec.Struct, frozen=True):
    judge: str
    judge_id: str
    overall: PointwiseCard
    languages: list[PointwiseLanguage]
    perturbations: list[PointwisePerturbation]


def is_pointwise(data: pa.Table) -> pa.ChunkedArray:
    """Which records are pointwise (their key's answer: reference or degraded)."""
    return pc.is_in(data["order"].cast(pa.string()), value_set=pa.array(ANSWERS))


class _Items(msgspec.Struct):
    """One judge's items as columns: scores (NaN: invalid or absent), and attributes."""

    ref: np.ndarray
    deg: np.ndarray
    ref_calls: np.ndarray  # 0/1: a record of the reference exists
    deg_calls: np.ndarray
    cluster: np.ndarray  # the reference each item was made from (codes)
    lang: np.ndarray
    pert: np.ndarray
    longer_is_ref: np.ndarray
    differs: np.ndarray
    tie_gold: np.ndarray | None = None  # tie-labelled pairs (kind labelled_tie): equal scores are right
    # A judge asked several samples: per item, its two presentations' ``_SPREAD`` sums (columns)
    spread: np.ndarray | None = None


def _items(data: pa.Table) -> tuple[_Items, list[str], list[str]]:
    bits = item_bits(data)
    items, inverse = np.unique(bits, return_inverse=True)
    n = len(items)
    second = lookup(data["order"], ANSWERS) == 1
    score = data["score"].to_numpy(zero_copy_only=False).astype(float)
    ref, deg = np.full(n, np.nan), np.full(n, np.nan)
    ref_calls, deg_calls = np.zeros(n), np.zeros(n)
    ref[inverse[~second]], deg[inverse[second]] = score[~second], score[second]
    ref_calls[inverse[~second]], deg_calls[inverse[second]] = 1, 1
    samples = sample_column(data)
    spread = None
    if samples is not None and samples.any():  # asked k times: each answer's mean valid score
        ref, deg = _mean_score(inverse, ~second, score, n), _mean_score(inverse, second, score, n)
        spread = _sample_spread(inverse, second, score, n)
    first = np.zeros(n, dtype=np.int64)
    first[inverse[::-1]] = np.arange(len(inverse))[::-1]  # a row of each item
    lang, langs = codes(data["lang"])
    pert, perts = codes(data["perturbation"])
    ref_ids = pc.binary_join_element_wise(data["lang"].cast(pa.string()), data["ref_id"].cast(pa.string()), "\x1f")
    cluster, _ = codes(ref_ids)
    ref_len = data["ref_len"].to_numpy().astype(np.int64)[first]
    pert_len = data["pert_len"].to_numpy().astype(np.int64)[first]
    differs = np.abs(ref_len - pert_len) >= LENGTH_GAP * np.maximum(np.maximum(ref_len, pert_len), 1)
    tie_gold = (pc.equal(data["kind"].cast(pa.string()), "labelled_tie").to_numpy(zero_copy_only=False)[first]
                if "kind" in data.column_names else None)
    return _Items(ref, deg, ref_calls, deg_calls, cluster[first], lang[first], pert[first],
                  ref_len > pert_len, differs, tie_gold, spread), langs, perts


def _mean_score(item: np.ndarray, mine: np.ndarray, score: np.ndarray, n: int) -> np.ndarray:
    """Per item, the mean of these records' valid scores (a judge's samples of one answer:
    G-Eval's weighting, every sample equal); NaN where none is valid."""
    valid = mine & ~np.isnan(score)
    total = np.bincount(item[valid], weights=score[valid], minlength=n)
    count = np.bincount(item[valid], minlength=n)
    out: np.ndarray = np.where(count > 0, total / np.maximum(count, 1), np.nan)
    return out


_SPREAD = ("sample_pairs", "sample_agree", "sd", "sd_n")


def _sample_spread(item: np.ndarray, second: np.ndarray, score: np.ndarray, n: int) -> np.ndarray:
    """Per item (rows), its two presentations' samples summed (columns: ``_SPREAD``): the
    m(m−1)/2 pairs of each presentation's m samples, those with equal valid scores, and the
    sample SD (n − 1 denominator) of each presentation with two valid scores or more."""
    presentation = item.astype(np.int64) * 2 + second.astype(np.int64)
    m = np.bincount(presentation, minlength=2 * n)
    valid = ~np.isnan(score)
    agree: np.ndarray = np.zeros(2 * n)
    if valid.any():
        _, group, counts = np.unique(np.column_stack([presentation[valid], score[valid]]), axis=0,
                                     return_inverse=True, return_counts=True)
        owner = np.zeros(len(counts), dtype=np.int64)
        owner[group.ravel()] = presentation[valid]
        agree = np.bincount(owner, weights=counts * (counts - 1) / 2, minlength=2 * n)
    v = np.bincount(presentation[valid], minlength=2 * n)
    total = np.bincount(presentation[valid], weights=score[valid], minlength=2 * n)
    squares = np.bincount(presentation[valid], weights=score[valid] ** 2, minlength=2 * n)
    spread = v >= 2
    with np.errstate(invalid="ignore", divide="ignore"):
        var = np.where(spread, (squares - total ** 2 / np.maximum(v, 1)) / np.maximum(v - 1, 1), 0.0)
    per_presentation = np.column_stack([m * (m - 1) / 2, agree, np.sqrt(np.maximum(var, 0.0)), spread])
    out: np.ndarray = per_presentation.reshape(n, 2, len(_SPREAD)).sum(axis=1)
    return out


def _sums(it: _Items, mask: np.ndarray, perts: list[str]) -> np.ndarray:
    """Per-reference sums (rows: references present in ``mask``; columns: ``SUMS``)."""
    ref, deg = it.ref[mask], it.deg[mask]
    complete = (it.ref_calls[mask] + it.deg_calls[mask]) == 2
    valid = complete & ~np.isnan(ref) & ~np.isnan(deg)
    tie = valid & (ref == deg)
    gold_tie = np.zeros(len(ref), dtype=bool) if it.tie_gold is None else it.tie_gold[mask]
    correct = valid & np.where(gold_tie, tie, ref > deg)  # a tie-labelled pair: equal scores are right
    decisive = valid & ~tie & ~gold_tie  # verbosity: on decisive-labelled pairs only
    chose_longer = decisive & ((ref > deg) == it.longer_is_ref[mask])
    lw = decisive & it.differs[mask] & ~it.longer_is_ref[mask]
    lb = decisive & it.differs[mask] & it.longer_is_ref[mask]
    pad_codes = [i for i, p in enumerate(perts) if p in PAD]
    pad = valid & np.isin(it.pert[mask], pad_codes)
    calls = it.ref_calls[mask] + it.deg_calls[mask]
    invalid = (it.ref_calls[mask] * np.isnan(ref)) + (it.deg_calls[mask] * np.isnan(deg))
    ref_valid = ~np.isnan(ref)
    _, cluster = np.unique(it.cluster[mask], return_inverse=True)
    k = int(cluster.max()) + 1 if len(cluster) else 0
    columns = {
        "items": complete, "correct": correct, "tie": tie, "margin_n": valid,
        "margin": np.where(valid, ref - deg, 0.0), "calls": calls, "invalid": invalid,
        "lw_n": lw, "lw_long": lw & chose_longer, "lb_n": lb, "lb_long": lb & chose_longer,
        "pad_n": pad, "pad": np.where(pad, deg - ref, 0.0),
        "ref_n": ref_valid, "ref": np.where(ref_valid, ref, 0.0),
        # The items that could measure v, whatever the judge replied: a v left undefined
        # while these exist is the judge's doing (ties or invalid scores), not the plan's.
        "lw_items": complete & it.differs[mask] & ~it.longer_is_ref[mask],
        "lb_items": complete & it.differs[mask] & it.longer_is_ref[mask],
    }
    if it.spread is not None:
        columns.update(zip(_SPREAD, it.spread[mask].T, strict=True))
    out = np.zeros((k, len(SUMS)))
    for name, values in columns.items():
        out[:, _S[name]] = np.bincount(cluster, weights=values.astype(float), minlength=k)
    # Stability: pairs of calls on the same reference that agree. The reference's calls are
    # its items' reference records; equal valid scores agree, invalid ones never do.
    has = it.ref_calls[mask] > 0
    value_key = np.where(ref_valid, ref, np.nan)
    calls_per = np.bincount(cluster[has], minlength=k)
    out[:, _S["pairs"]] = calls_per * (calls_per - 1)
    keep = has & ref_valid
    if keep.any():
        pairs = np.column_stack([cluster[keep], value_key[keep]])
        _, group, counts = np.unique(pairs, axis=0, return_inverse=True, return_counts=True)
        owner = np.zeros(len(counts), dtype=np.int64)
        owner[group.ravel()] = cluster[keep]
        out[:, _S["agree"]] = np.bincount(owner, weights=counts * (counts - 1.0), minlength=k)
    return out


def _points(s: np.ndarray) -> dict[str, np.ndarray]:
    """Every metric from summed rows (one row, or one per bootstrap replicate)."""
    col = {name: s[..., i] for i, name in enumerate(SUMS)}
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = col["correct"] / col["items"]
        v = 0.5 * (col["lw_long"] / col["lw_n"] + col["lb_long"] / col["lb_n"])
        stability = col["agree"] / col["pairs"]
        # v undefined although the plan held length-differing pairs of both kinds: the judge
        # decided none of one kind (all ties or invalid) and is unmeasured on length. It gets
        # the worst length factor and no credit for agreeing with itself (acc in place of
        # stability), so an unmeasurable judge (a constant score: discrimination 0, stability 1)
        # scores 0, never 0.4. Where the plan held no such pairs the factor is 1, as in R.
        unmeasured = np.isnan(v) & (col["lw_items"] > 0) & (col["lb_items"] > 0)
        penalty = np.where(unmeasured, 0.3, np.where(np.isnan(v), 1.0, 1 - 0.7 * np.maximum(0.0, 2 * v - 1)))
        credit = np.where(np.isnan(stability) | unmeasured, acc, stability)
        return {
            "discrimination": acc, "tie_rate": col["tie"] / col["items"],
            "margin": col["margin"] / col["margin_n"], "verbosity": v,
            "verbosity_gain": col["pad"] / col["pad_n"], "stability": stability,
            "reliability": (0.6 * acc + 0.4 * credit) * penalty,
            "reference_mean": col["ref"] / col["ref_n"],
            "self_consistency": col["sample_agree"] / col["sample_pairs"], "sample_sd": col["sd"] / col["sd_n"],
        }


_N = {"discrimination": "items", "tie_rate": "items", "margin": "margin_n", "verbosity": "lw_n",
      "verbosity_gain": "pad_n", "stability": "pairs", "reliability": "items", "reference_mean": "ref_n",
      "self_consistency": "sample_pairs", "sample_sd": "sd_n"}
# On a card only where their count is > 0: a judge asked ``samples: k`` > 1.
_SAMPLED = ("self_consistency", "sample_sd")


def _replicates(sums: np.ndarray, replicates: int, key: str, seed: int) -> np.ndarray:
    """Bootstrap replicates of the summed row: references resampled with replacement."""
    digest = hashlib.blake2b(f"{seed}\x1fpointwise\x1f{key}".encode(), digest_size=8).digest()
    rng = np.random.default_rng(int.from_bytes(digest))
    k = len(sums)
    weights = rng.multinomial(k, np.full(k, 1.0 / k), size=replicates) if k else np.zeros((replicates, 0))
    out: np.ndarray = weights @ sums
    return out


def _card(sums: np.ndarray, replicates: int, confidence: float, key: str, seed: int) -> PointwiseCard:
    total = sums.sum(axis=0)
    point = {name: float(v) for name, v in _points(total).items()}
    tail = (1 - confidence) / 2 * 100
    boot = _points(_replicates(sums, replicates, key, seed)) if replicates and len(sums) else None

    def interval(name: str) -> Interval:
        value = rounded(point[name])
        n = int(total[_S[_N[name]]] + (total[_S["lb_n"]] if name == "verbosity" else 0))
        n = n // 2 if name == "stability" else n  # ordered pairs counted: report unordered
        if value is None or boot is None:
            return Interval(value, None, None, n)
        draws = boot[name][np.isfinite(boot[name])]
        if not len(draws):
            return Interval(value, None, None, n)
        lo, hi = np.percentile(draws, [tail, 100 - tail])
        return Interval(value, rounded(float(lo)), rounded(float(hi)), n)

    calls, invalid = int(total[_S["calls"]]), int(total[_S["invalid"]])
    lo, hi = stats.wilson(invalid, calls, confidence)
    invalid_rate = Interval(rounded(invalid / calls) if calls else None, rounded(float(lo)), rounded(float(hi)), calls)
    values = {name: interval(name) for name in _N if name not in _SAMPLED or total[_S[_N[name]]] > 0}
    items = int(total[_S["items"]])
    margin = values["margin"]
    worse = margin.value is not None and margin.hi is not None and margin.hi < 0
    return PointwiseCard(items=items, calls=calls, invalid_rate=invalid_rate, **values,
                         verdict=verdict.verdict(values["reliability"], items, invalid=invalid_rate),
                         below_chance=worse and not verdict.unreadable(invalid_rate))


def _unreadable(jc: PointwiseJudgeCards) -> PointwiseJudgeCards:
    """An unreadable overall card withholds every language's verdict too (score/verdict.py)."""
    if jc.overall.verdict != verdict.UNREADABLE:
        return jc
    return msgspec.structs.replace(jc, languages=[msgspec.structs.replace(lc, card=msgspec.structs.replace(
        lc.card, verdict=verdict.UNREADABLE if lc.card.verdict else None, below_chance=False))
        for lc in jc.languages])


def _offset(sums: np.ndarray, pooled: float | None, replicates: int, confidence: float, key: str,
            seed: int) -> Interval:
    total = sums.sum(axis=0)
    n = int(total[_S["ref_n"]])
    if pooled is None or not n:
        return Interval(None, None, None, n)
    value = total[_S["ref"]] / n - pooled
    if not replicates:
        return Interval(rounded(value), None, None, n)
    boot = _replicates(sums, replicates, f"{key}/offset", seed)
    with np.errstate(invalid="ignore", divide="ignore"):
        draws = boot[:, _S["ref"]] / boot[:, _S["ref_n"]] - pooled
    draws = draws[np.isfinite(draws)]
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(draws, [tail, 100 - tail]) if len(draws) else (None, None)
    return Interval(rounded(value), rounded(lo), rounded(hi), n)


def cards(data: pa.Table, *, replicates: int = 1000, confidence: float = 0.95,
          seed: int = 0) -> list[PointwiseJudgeCards]:
    """Pointwise cards for every judge in ``data`` (pointwise records only, one per key)."""
    if data.num_rows == 0:
        return []
    data = data.unify_dictionaries()
    judge, judge_ids = codes(data["judge_id"])
    out = []
    for j, jid in enumerate(judge_ids):
        mine = data.filter(pa.array(judge == j))
        if mine.num_rows == 0:  # a dictionary value of a filtered-out (pairwise) judge
            continue
        name = mine["judge"][0].as_py()
        it, langs, perts = _items(mine)
        everything = np.ones(len(it.ref), dtype=bool)
        overall_sums = _sums(it, everything, perts)
        total = overall_sums.sum(axis=0)
        pooled = total[_S["ref"]] / total[_S["ref_n"]] if total[_S["ref_n"]] else None
        by_lang = []
        for li, code in enumerate(langs):
            sums = _sums(it, it.lang == li, perts)
            key = f"{jid}/{code}"
            by_lang.append(PointwiseLanguage(code, languages.name(code),
                                             _offset(sums, pooled, replicates, confidence, key, seed),
                                             _card(sums, replicates, confidence, key, seed)))
        by_pert = [PointwisePerturbation(p, _card(_sums(it, it.pert == pi, perts), replicates, confidence,
                                                  f"{jid}//{p}", seed))
                   for pi, p in enumerate(perts)]
        out.append(_unreadable(PointwiseJudgeCards(name, jid, _card(overall_sums, replicates, confidence, jid, seed),
                                                   by_lang, by_pert)))
    return sorted(out, key=lambda c: (c.judge, c.judge_id))


# ---- two runs of pointwise judges (babelrun diff) -------------------------------------------


class ScaleDrift(msgspec.Struct, frozen=True):
    """B − A on the keys both runs scored validly: the references alone (the same answers
    scored again: pure scale drift) and every answer; and each run's discrimination there."""

    lang: str
    language: str
    references: Interval
    answers: Interval
    discrimination_a: float | None
    discrimination_b: float | None


class PointwiseDrift(msgspec.Struct, frozen=True):
    judge_a: str
    judge_id_a: str
    judge_b: str
    judge_id_b: str
    matched: int  # keys scored (validly) in both runs
    overall: ScaleDrift
    languages: list[ScaleDrift]


def _by_judge(data: pa.Table) -> dict[str, list[tuple[str, pa.Table]]]:
    out: dict[str, list[tuple[str, pa.Table]]] = {}
    if data.num_rows == 0:
        return out
    ids = data["judge_id"].cast(pa.string())
    for jid in sorted(set(pc.unique(ids).to_pylist())):
        mine = data.filter(pc.equal(ids, jid))
        out.setdefault(mine["judge"].cast(pa.string())[0].as_py(), []).append((jid, mine))
    return out


def _keyed(t: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    second = (lookup(t["order"], ANSWERS) == 1).astype(np.uint64)
    key = (t["item_key"].to_numpy() << np.uint64(1)) | second
    lang, langs = codes(t["lang"])
    return key, t["score"].to_numpy(zero_copy_only=False).astype(float), second == 0, lang, np.array(langs)


def _mean_diff(d: np.ndarray, item: np.ndarray, replicates: int, confidence: float, key: str,
               seed: int) -> Interval:
    if not len(d):
        return Interval(None, None, None, 0)
    _, cluster = np.unique(item, return_inverse=True)
    k = int(cluster.max()) + 1
    sums = np.column_stack([np.bincount(cluster, weights=d, minlength=k), np.bincount(cluster, minlength=k)])
    value = float(d.mean())
    if not replicates:
        return Interval(rounded(value), None, None, len(d))
    boot = _replicates(sums, replicates, key, seed)
    with np.errstate(invalid="ignore", divide="ignore"):
        draws = boot[:, 0] / boot[:, 1]
    draws = draws[np.isfinite(draws)]
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(draws, [tail, 100 - tail])
    return Interval(rounded(value), rounded(lo), rounded(hi), len(d))


def _discrimination(key: np.ndarray, score: np.ndarray) -> float | None:
    """Share of items (both answers present) whose reference scored higher."""
    order = np.argsort(key)
    key, score = key[order], score[order]
    item = key >> np.uint64(1)
    pair = np.flatnonzero(item[1:] == item[:-1])
    if not len(pair):
        return None
    ref, deg = score[pair], score[pair + 1]  # sorted: the reference key (bit 0) first
    return rounded(float(np.mean(np.nan_to_num(ref, nan=-np.inf) > np.nan_to_num(deg, nan=np.inf))))


def _scale_drift(lang: str, a: tuple[np.ndarray, ...], b: tuple[np.ndarray, ...], ia: np.ndarray,
                 ib: np.ndarray, replicates: int, confidence: float, key: str, seed: int) -> ScaleDrift:
    (ka, sa, ra), (kb, sb) = (a[0][ia], a[1][ia], a[2][ia]), (b[0][ib], b[1][ib])
    valid = ~np.isnan(sa) & ~np.isnan(sb)
    d, item = (sb - sa)[valid], (ka >> np.uint64(1))[valid]
    refs = ra[valid]
    name = "all languages" if lang == "all" else languages.name(lang)
    return ScaleDrift(lang, name, _mean_diff(d[refs], item[refs], replicates, confidence, f"{key}/ref", seed),
                      _mean_diff(d, item, replicates, confidence, f"{key}/all", seed),
                      _discrimination(ka, sa), _discrimination(kb, sb))


def drift(data_a: pa.Table, data_b: pa.Table, *, replicates: int = 1000, confidence: float = 0.95,
          seed: int = 0) -> tuple[list[PointwiseDrift], list[str]]:
    """B − A for the pointwise judges of two runs, paired like the pairwise ones (the only
    judge of each, or the same name), matched by (item, answer)."""
    a, b = _by_judge(data_a), _by_judge(data_b)
    if len(a) == 1 and len(b) == 1 and len(next(iter(a.values()))) == 1 and len(next(iter(b.values()))) == 1:
        pairs = [(next(iter(a.values()))[0], next(iter(b.values()))[0])]
        notes: list[str] = []
    else:
        pairs, notes = [], []
        for name in sorted(set(a) | set(b)):
            if len(a.get(name, [])) == 1 and len(b.get(name, [])) == 1:
                pairs.append((a[name][0], b[name][0]))
            else:
                notes.append(f"pointwise judge '{name}': not one judge id in each run: not compared")
    out = []
    for (ida, ta), (idb, tb) in pairs:
        ka, kb = _keyed(ta), _keyed(tb)
        _, ia, ib = np.intersect1d(ka[0], kb[0], assume_unique=True, return_indices=True)
        seed_key = f"{ida}/{idb}"
        langs = ka[4][ka[3][ia]]
        per_lang = [_scale_drift(code, ka, kb, ia[langs == code], ib[langs == code], replicates, confidence,
                                 f"{seed_key}/{code}", seed) for code in sorted(set(langs.tolist()))]
        overall = _scale_drift("all", ka, kb, ia, ib, replicates, confidence, seed_key, seed)
        out.append(PointwiseDrift(ta["judge"].cast(pa.string())[0].as_py(), ida,
                                  tb["judge"].cast(pa.string())[0].as_py(), idb,
                                  int(overall.answers.n), overall, per_lang))
    return out, notes


def pairwise_only(data: pa.Table) -> pa.Table:
    """``data`` without its pointwise records: for the analyses defined on slot verdicts
    (calibration, agreement with human labels, invariance), which pointwise judges skip."""
    if data.num_rows == 0:
        return data
    alone = is_pointwise(data)
    return data.filter(pc.invert(alone)) if pc.any(alone).as_py() else data


def all_pointwise(data: pa.Table) -> list[str]:
    """The judges of ``data`` when it has records and every one is pointwise (nothing an
    analysis of slot verdicts can read: it refuses, naming them), else []."""
    if data.num_rows == 0 or not pc.all(is_pointwise(data)).as_py():
        return []
    return sorted({str(j) for j in data["judge"].unique().to_pylist()})
