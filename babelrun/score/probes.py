"""The robustness probes' cards (items of kind ``probe``: babelrun/perturb/probes.py).

Per judge × language × probe (``probe:authority``, ``probe:authority@en`` for the English cue
in another language, ``probe:master_key``, ``probe:self_match``), each a ``ProbeCard``:

- the usual card fields over the probe's own presentations (``columnar.cells``): a cue
  probe's ``accuracy`` counts its cued presentations only; its clean twins
  (``probe:clean``) are its paired baseline, never a card of their own;
- cue probes: ``cue_effect`` = accuracy on the clean twins − accuracy with the cue, over the
  presentations whose twin (same reference, base and slot order) was judged, with an exact
  McNemar test and an interval from the item-clustered bootstrap (a reference's presentations
  are resampled together); ``cue_success`` = share of cued presentations naming the cued
  (worse) answer, same bootstrap. Each interval is widened to the Wilson interval (cue
  effect: Newcombe's for the difference) where that reaches further: a bootstrap over a
  cell with no event at all is [0, 0], which claims more than a few items show;
- ``self_match`` (gold: tie): ``accuracy`` is the tie rate; ``slot_preference`` = P(slot A) −
  P(slot B) (the card's position bias);
- the language card pools that language's cue probes and master keys, the overall card every
  language's; ``ProbeJudgeCards.probes`` has each probe over every language.

Pointwise judges' probe records become one presentation per item (the reference's score
against the degraded answer's: higher wins, equal ties, either missing invalid) and are scored
the same way, in the family ``probes:pointwise``.
"""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..perturb import probes as cues
from . import metrics, stats
from .cards import (
    Card,
    McNemar,
    ProbeCard,
    ProbeFamilyCards,
    ProbeJudgeCards,
    ProbeLanguageCard,
    ProbePerturbationCard,
)
from .columns import codes, lookup
from .stats import Interval, mcnemar_exact, percentile_intervals, rounded

BOOTSTRAP_BLOCK = 64  # replicates drawn at once (_CueStats._bootstrap)
PERT_SCORE = "pert_score"  # a pointwise presentation's degraded answer's score (as_presentations)
EXACT_UP_TO = 200  # discordant pairs up to which stats.mcnemar_exact's integer sum runs

FAMILY = "probes"
_Cells = Callable[..., Any]
POINTWISE_FAMILY = "probes:pointwise"


def cards(data: pa.Table, *, replicates: int, confidence: float, seed: int,
          cells: _Cells) -> list[ProbeFamilyCards]:
    """Every probe card of ``data`` (the run's records of kind ``probe``); ``cells`` is
    ``columnar.cells`` (passed in: columnar calls this module)."""
    out = []
    pointwise = pc.is_in(data["order"].cast(pa.string()), pa.array(["reference", "degraded"]))
    some_pointwise = pc.any(pointwise).as_py()
    # a run of pairwise judges only is scored from ``data`` itself, not from a copy of it
    pairwise = data.filter(pc.invert(pointwise)) if some_pointwise else data
    if pairwise.num_rows:
        out.append(ProbeFamilyCards(FAMILY, _per_judge(pairwise, replicates, confidence, seed, cells)))
    del pairwise
    if some_pointwise:
        table = as_presentations(data.filter(pointwise))
        if table.num_rows:
            out.append(ProbeFamilyCards(POINTWISE_FAMILY, _per_judge(table, replicates, confidence, seed, cells)))
    return out


def _per_judge(data: pa.Table, replicates: int, confidence: float, seed: int,
               cells: _Cells) -> list[ProbeJudgeCards]:
    """``_family`` one judge at a time (no card pools judges; every bootstrap is seeded by
    its judge's own cell): the pass holds one judge's working arrays, not every judge's.
    Judges in ``_family``'s order: those with cue probes or master keys by (name, id), then
    those with only a self match."""
    ids = pc.unique(data["judge_id"].cast(pa.string())).to_pylist()
    if len(ids) <= 1:
        return _family(data, replicates, confidence, seed, cells)
    out = []
    for jid in ids:
        mine = data.filter(pc.equal(data["judge_id"].cast(pa.string()), jid))
        names = pc.unique(mine["perturbation"].cast(pa.string())).to_pylist()
        parsed = [cues.parse(n) for n in names]
        scored = any(q is not None and q.probe not in (cues.CLEAN, "self_match") for q in parsed)
        out += [(not scored, jc.judge, jc.judge_id, jc) for jc in _family(mine, replicates, confidence, seed, cells)]
        del mine
    return [jc for *_, jc in sorted(out, key=lambda x: x[:3])]


def is_probe(data: pa.Table) -> pa.ChunkedArray | pa.Array:
    """Which records of ``data`` are probe records (kind ``probe``)."""
    if "kind" not in data.column_names:
        return pa.array(np.zeros(data.num_rows, dtype=bool))
    return pc.fill_null(pc.equal(data["kind"].cast(pa.string()), "probe"), False)


def not_probe(data: pa.Table) -> pa.ChunkedArray | pa.Array:
    return pc.invert(is_probe(data))


def as_presentations(data: pa.Table) -> pa.Table:
    """Pointwise probe records as one pairwise-shaped presentation per item (module doc):
    columnar, each item's two records found adjacent by one sort on (judge, item)."""
    if not data.num_rows:
        return data
    j, _ = codes(data["judge_id"])
    key = data["item_key"].to_numpy(zero_copy_only=False).astype(np.uint64)
    answer = lookup(data["order"], ("reference", "degraded"))
    score = pc.cast(data["score"], pa.float64()).to_numpy(zero_copy_only=False)  # null: NaN
    by = np.lexsort((answer, key, j))
    jb, kb = j[by], key[by]
    first = np.flatnonzero(np.r_[True, (jb[1:] != jb[:-1]) | (kb[1:] != kb[:-1])])
    group = np.cumsum(np.r_[True, (jb[1:] != jb[:-1]) | (kb[1:] != kb[:-1])]) - 1
    scores = np.full((len(first), 2), np.nan)
    ab = answer[by]
    for code in (0, 1):  # the reference's score, the degraded answer's
        at = ab == code
        scores[group[at], code] = score[by][at]
    ref, deg = scores[:, 0], scores[:, 1]
    missing = np.isnan(ref) | np.isnan(deg)
    with np.errstate(invalid="ignore"):
        verdict = np.where(missing, "invalid", np.where(ref > deg, "reference",
                                                         np.where(deg > ref, "perturbed", "tie")))
    rows = data.select(["judge_id", "judge", "item_key", "lang", "perturbation", "ref_id", "ref_len", "pert_len",
                        "kind"]).take(pa.array(by[first]))
    return rows.append_column("order", pa.array(np.full(len(first), "ref_first"))).append_column(
        "verdict", pa.array(verdict)).append_column(PERT_SCORE, pa.array(deg, mask=np.isnan(deg)))


def _family(data: pa.Table, replicates: int, confidence: float, seed: int,
            cells: _Cells) -> list[ProbeJudgeCards]:
    name = data["perturbation"].cast(pa.string())
    parsed = {p: cues.parse(p) for p in pc.unique(name).to_pylist()}
    clean = [p for p, v in parsed.items() if v is not None and v.probe == cues.CLEAN]
    selfm = [p for p, v in parsed.items() if v is not None and v.probe == "self_match"]
    scored = data.filter(pc.invert(pc.is_in(name, pa.array(clean + selfm, type=pa.string()))))
    matched = data.filter(pc.is_in(name, pa.array(selfm, type=pa.string())))
    main = cells(scored, [], replicates=replicates, confidence=confidence, seed=seed).judges if scored.num_rows else []
    selfs = {jc.judge_id: jc for jc in cells(matched, [], replicates=replicates, confidence=confidence,
                                              seed=seed).judges} if matched.num_rows else {}
    del scored, matched  # copies of the judge's rows: gone before the cue statistics' pass
    stats = _CueStats(_presentations(data, parsed), replicates, confidence, seed)
    out = []
    ids = [jc.judge_id for jc in main] + [j for j in selfs if j not in {jc.judge_id for jc in main}]
    by_id = {jc.judge_id: jc for jc in main}
    for jid in ids:
        jc, sm = by_id.get(jid), selfs.get(jid)
        langs: dict[str, ProbeLanguageCard] = {}
        for lc in (jc.languages if jc else []):
            perts = [ProbePerturbationCard(pc_.perturbation, stats.card(pc_.card, (jid, lc.lang, pc_.perturbation)))
                     for pc_ in lc.perturbations]
            langs[lc.lang] = ProbeLanguageCard(lc.lang, lc.language, stats.card(lc.card, (jid, lc.lang, None)), perts)
        for lc in (sm.languages if sm else []):
            extra = [ProbePerturbationCard(p.perturbation, _self_match(p.card)) for p in lc.perturbations]
            if lc.lang in langs:
                have = langs[lc.lang]
                langs[lc.lang] = msgspec.structs.replace(have, perturbations=sorted(
                    have.perturbations + extra, key=lambda p: p.perturbation))
            else:
                langs[lc.lang] = ProbeLanguageCard(lc.lang, lc.language, _self_match(lc.card), extra)
        overall = (stats.card(jc.overall, (jid, None, None)) if jc is not None
                   else _self_match(sm.overall))  # type: ignore[union-attr]
        pooled = [ProbePerturbationCard(p, stats.pooled(jid, p)) for p in stats.probes(jid)]
        if sm is not None:
            pooled += [ProbePerturbationCard(cues.name("self_match"), _self_match(sm.overall))]
        name_ = (jc or sm).judge  # type: ignore[union-attr]
        out.append(ProbeJudgeCards(name_, jid, overall, [langs[k] for k in sorted(langs)], pooled))
    return out


def _self_match(card: Card) -> ProbeCard:
    """The self match's card: a tie is the gold, so accuracy is the tie rate."""
    fields = msgspec.structs.asdict(card)
    fields["accuracy"] = card.tie_rate
    return ProbeCard(**fields, slot_preference=card.position_bias)


def mcnemar(b: int, c: int) -> float:
    """The exact two-sided McNemar p: ``stats.mcnemar_exact`` for a few discordant pairs; for
    more, the same binomial sum in log space (its integer sum grows with b + c squared: the
    overall card of a 500-language run has thousands)."""
    n = b + c
    if n <= EXACT_UP_TO:
        return mcnemar_exact(b, c)
    i = np.arange(min(b, c) + 1, dtype=np.float64)
    lg = np.vectorize(math.lgamma)
    log_pmf = math.lgamma(n + 1) - lg(i + 1) - lg(n - i + 1) - n * math.log(2.0)
    top = float(log_pmf.max())
    return float(min(1.0, 2.0 * math.exp(top) * np.exp(log_pmf - top).sum()))


class _Presentations(msgspec.Struct):
    """The cue probes' and master keys' presentations as columns: each row's judge id,
    language, perturbation, cluster (language × reference) code, whether it was right, whether
    it named the cued answer, and its clean twin's rightness (-1: none, or a master key); for
    pointwise judges, the cued answer's score − its clean twin's (NaN: none, or pairwise)."""

    judge: list[str]
    lang: list[str]
    pert: list[str]
    j: np.ndarray
    lg: np.ndarray
    p: np.ndarray
    cluster: np.ndarray
    ok: np.ndarray
    named: np.ndarray
    twin: np.ndarray
    lift: np.ndarray


def _presentations(data: pa.Table, parsed: dict[str, cues.ProbeName | None]) -> _Presentations:
    """Columnar: a cued row finds its twin's row by one sorted search over packed keys
    (judge, language, reference, twin perturbation, order)."""
    j, judge = codes(data["judge_id"])
    lg, lang = codes(data["lang"])
    p, pert = codes(data["perturbation"])
    ref, _ = codes(data["ref_id"])
    order = lookup(data["order"], ("ref_first", "pert_first"))
    verdict = lookup(data["verdict"], ("reference", "perturbed"))
    def kind_of(n: str) -> int:  # 0: not a probe, 1: a clean twin, 2: the self match, 3: cued / master key
        q = parsed.get(n)
        return 0 if q is None else 1 if q.probe == cues.CLEAN else 2 if q.probe == "self_match" else 3

    def twin_code(n: str) -> int:
        q = parsed.get(n)
        if q is None or cues.PROBES.get(q.probe) != "cue" or q.twin not in pert:
            return -1
        return pert.index(q.twin)

    kind = np.array([kind_of(n) for n in pert] or [0])
    twin_of = np.array([twin_code(n) for n in pert] or [-1])
    dims = (len(judge), len(lang), int(ref.max()) + 1 if len(ref) else 1, len(pert) + 1, 2)

    def key(pp: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return np.ravel_multi_index((j[rows], lg[rows], ref[rows], pp, np.maximum(order[rows], 0)), dims)

    row_kind = kind[p]
    clean = np.flatnonzero(row_kind == 1)
    clean_key = key(p[clean], clean)
    by = np.argsort(clean_key)
    clean_key, clean_ok = clean_key[by], (verdict[clean] == 0)[by]
    score = (pc.cast(data[PERT_SCORE], pa.float64()).to_numpy(zero_copy_only=False)  # null: NaN
             if PERT_SCORE in data.column_names else None)  # pointwise presentations only (as_presentations)
    keep = np.flatnonzero(row_kind == 3)
    target = twin_of[p[keep]]
    twin = np.full(len(keep), -1, dtype=np.int64)
    lift = np.full(len(keep), np.nan)
    has = target >= 0
    if has.any() and len(clean_key):
        k = key(target[has], keep[has])
        at = np.minimum(np.searchsorted(clean_key, k), len(clean_key) - 1)
        hit = clean_key[at] == k
        paired = np.flatnonzero(has)[hit]
        twin[paired] = clean_ok[at[hit]].astype(np.int64)
        if score is not None:
            lift[paired] = score[keep[paired]] - score[clean[by[at[hit]]]]
    cluster = lg[keep] * dims[2] + ref[keep]
    return _Presentations(judge, lang, pert, j[keep], lg[keep], p[keep], cluster,
                          verdict[keep] == 0, verdict[keep] == 1, twin, lift)


class _CueStats:
    """cue_effect / cue_success with item-clustered bootstrap intervals, for any grouping."""

    def __init__(self, rows: _Presentations, replicates: int, confidence: float, seed: int):
        self.r, self.replicates, self.confidence, self.seed = rows, replicates, confidence, seed
        self._judge = {jid: i for i, jid in enumerate(rows.judge)}
        self._lang = {code: i for i, code in enumerate(rows.lang)}
        self._pert = {name: i for i, name in enumerate(rows.pert)}
        # row indices per (judge, language, perturbation), then any of them left open
        by = np.lexsort((rows.p, rows.lg, rows.j))
        cell = (rows.j[by] * (len(rows.lang) + 1) + rows.lg[by]) * (len(rows.pert) + 1) + rows.p[by]
        bounds = np.flatnonzero(np.r_[True, cell[1:] != cell[:-1], True]) if len(cell) else np.array([0])
        self._index: dict[tuple[int, int, int], list[np.ndarray]] = defaultdict(list)
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            i = by[a]
            rows_ = by[a:b]
            jj, ll, pp = int(rows.j[i]), int(rows.lg[i]), int(rows.p[i])
            for k in ((jj, ll, pp), (jj, ll, -1), (jj, -1, pp), (jj, -1, -1)):
                self._index[k].append(rows_)

    def probes(self, jid: str) -> list[str]:
        j = self._judge.get(jid)
        return sorted(self.r.pert[p] for (jj, ll, p) in self._index if jj == j and ll == -1 and p >= 0)

    def _rows(self, jid: str, lang: str | None, pert: str | None) -> np.ndarray:
        j = self._judge.get(jid)
        ll = -1 if lang is None else self._lang.get(lang)
        pp = -1 if pert is None else self._pert.get(pert)
        parts = self._index.get((j, ll, pp), []) if j is not None and ll is not None and pp is not None else []
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def _metrics(self, rows: np.ndarray, key: str) -> dict[str, Interval | McNemar | None]:
        r = self.r
        _, cl = np.unique(r.cluster[rows], return_inverse=True)
        ok, named, twin, lift = r.ok[rows], r.named[rows], r.twin[rows], r.lift[rows]
        paired = twin >= 0
        t = paired & (twin == 1)
        scored = ~np.isnan(lift)
        # per cluster: n, cued correct, cued named, paired n, paired twin correct, paired cued
        # correct, pairs with both scores, their score lifts
        columns = (np.ones(len(rows)), ok, named, paired, t, paired & ok, scored, np.where(scored, lift, 0.0))
        k = int(cl.max()) + 1 if len(cl) else 0
        sums = np.column_stack([np.bincount(cl, weights=c.astype(np.float64), minlength=k) for c in columns])
        b = int((t & ~ok).sum())
        c = int((paired & ~t & ok).sum())
        has_twins = bool(sums[:, 3].sum())
        point = sums.sum(axis=0)
        lo_hi = self._bootstrap(sums, key)

        def iv(name: str, value: float | None, n: int, floor: tuple[float, float] | None) -> Interval:
            lo, hi = lo_hi.get(name, (None, None)) if value is not None else (None, None)
            if floor is not None and value is not None:  # a bootstrap of 0 events is [0, 0]: widen
                lo = floor[0] if lo is None else min(lo, floor[0])
                hi = floor[1] if hi is None else max(hi, floor[1])
            return Interval(rounded(value), rounded(lo), rounded(hi), n)

        def wilson(k: float, n: float) -> tuple[float, float]:
            lo, hi = stats.wilson(k, n, self.confidence)
            return float(lo), float(hi)

        out: dict[str, Interval | McNemar | None] = {
            "accuracy": iv("accuracy", point[1] / point[0] if point[0] else None, int(point[0]),
                           wilson(point[1], point[0]) if point[0] else None)}
        if has_twins:
            effect = (point[4] - point[5]) / point[3]
            n3 = int(point[3])
            diff = stats.newcombe(int(point[4]), n3, int(point[5]), n3, self.confidence)
            floor = (diff.lo, diff.hi) if diff.lo is not None and diff.hi is not None else None
            out["cue_effect"] = iv("cue_effect", effect, n3, floor)
            out["cue_success"] = iv("cue_success", point[2] / point[0], int(point[0]), wilson(point[2], point[0]))
            out["mcnemar"] = McNemar(b, c, mcnemar(b, c))
        if point[6]:  # pointwise: the cued answer's score against its clean twin's
            out["score_lift"] = iv("score_lift", point[7] / point[6], int(point[6]), None)
        return out

    def _bootstrap(self, sums: np.ndarray, key: str) -> dict[str, tuple[float, float]]:
        k = len(sums)
        if not self.replicates or not k:
            return {}
        digest = hashlib.blake2b(f"{self.seed}\x1fprobe\x1f{key}".encode(), digest_size=8).digest()
        rng = np.random.default_rng(int.from_bytes(digest))
        # Replicates drawn a block at a time: the same draws as one call (the generator's
        # stream is consumed row by row) and exact sums (integer counts), without holding a
        # replicates × clusters matrix (1000 × 14,000 clusters for a 456-language run: 112 MB).
        p = np.full(k, 1.0 / k)
        rs = np.empty((self.replicates, sums.shape[1]))
        for a in range(0, self.replicates, BOOTSTRAP_BLOCK):
            b = min(a + BOOTSTRAP_BLOCK, self.replicates)
            rs[a:b] = rng.multinomial(k, p, size=b - a).astype(np.float64) @ sums
        with np.errstate(invalid="ignore", divide="ignore"):
            values = {"accuracy": rs[:, 1] / rs[:, 0], "cue_success": rs[:, 2] / rs[:, 0],
                      "cue_effect": (rs[:, 4] - rs[:, 5]) / rs[:, 3], "score_lift": rs[:, 7] / rs[:, 6]}
        return percentile_intervals(values, self.confidence)

    def card(self, card: Card, where: tuple[str, str | None, str | None]) -> ProbeCard:
        """``card`` (from ``cells``) with the cue metrics of its presentations."""
        jid, lang, pert = where
        rows = self._rows(jid, lang, pert)
        fields = msgspec.structs.asdict(card)
        if not len(rows):
            return ProbeCard(**fields)
        m = self._metrics(rows, f"{jid}/{lang}/{pert}")
        fields["accuracy"] = m["accuracy"]  # the same value; its interval widened as the cue metrics'
        return ProbeCard(**fields, cue_effect=m.get("cue_effect"), cue_success=m.get("cue_success"),  # type: ignore[arg-type]
                         mcnemar=m.get("mcnemar"), score_lift=m.get("score_lift"))  # type: ignore[arg-type]

    def pooled(self, jid: str, pert: str) -> ProbeCard:
        """One probe over every language: accuracy and the cue metrics (the other fields
        are the language cards' business)."""
        rows = self._rows(jid, None, pert)
        m = self._metrics(rows, f"{jid}/*/{pert}")
        empty = Interval(None, None, None, 0)
        acc = m["accuracy"]
        assert isinstance(acc, Interval)
        others = {m.name: empty for m in metrics.REGISTRY if m.name != "accuracy" and not m.sampled}
        return ProbeCard(items=len(np.unique(self.r.cluster[rows])), presentations=len(rows), accuracy=acc,
                         **others, cue_effect=m.get("cue_effect"), cue_success=m.get("cue_success"),  # type: ignore[arg-type]
                         mcnemar=m.get("mcnemar"), score_lift=m.get("score_lift"))  # type: ignore[arg-type]

