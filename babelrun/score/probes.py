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
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..perturb import probes as cues
from . import stats
from .cards import (
    Card,
    McNemar,
    ProbeCard,
    ProbeFamilyCards,
    ProbeJudgeCards,
    ProbeLanguageCard,
    ProbePerturbationCard,
)
from .stats import Interval, mcnemar_exact, rounded

FAMILY = "probes"
# presentations per (judge, lang, perturbation): (cluster, cued correct, cued named, twin correct or -1)
_Groups = dict[tuple[str, str, str], list[tuple[str, bool, bool, int]]]
_Cells = Callable[..., Any]
POINTWISE_FAMILY = "probes:pointwise"


def cards(data: pa.Table, *, replicates: int, confidence: float, seed: int,
          cells: _Cells) -> list[ProbeFamilyCards]:
    """Every probe card of ``data`` (the run's records of kind ``probe``); ``cells`` is
    ``columnar.cells`` (passed in: columnar calls this module)."""
    out = []
    pointwise = pc.is_in(data["order"].cast(pa.string()), pa.array(["reference", "degraded"]))
    pairwise = data.filter(pc.invert(pointwise))
    if pairwise.num_rows:
        out.append(ProbeFamilyCards(FAMILY, _family(pairwise, replicates, confidence, seed, cells)))
    if pc.any(pointwise).as_py():
        table = as_presentations(data.filter(pointwise))
        if table.num_rows:
            out.append(ProbeFamilyCards(POINTWISE_FAMILY, _family(table, replicates, confidence, seed, cells)))
    return out


def as_presentations(data: pa.Table) -> pa.Table:
    """Pointwise probe records as one pairwise-shaped presentation per item (module doc)."""
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    for r in data.select(["judge_id", "judge", "item_key", "order", "lang", "perturbation", "ref_id",
                          "ref_len", "pert_len", "kind", "score"]).to_pylist():
        entry = rows.setdefault((r["judge_id"], r["item_key"]), {**r, "scores": {}})
        entry["scores"][r["order"]] = r["score"]
    out = []
    for entry in rows.values():
        ref, deg = entry["scores"].get("reference"), entry["scores"].get("degraded")
        verdict = ("invalid" if ref is None or deg is None else
                   "reference" if ref > deg else "perturbed" if deg > ref else "tie")
        out.append({k: entry[k] for k in ("judge_id", "judge", "item_key", "lang", "perturbation", "ref_id",
                                          "ref_len", "pert_len", "kind")} | {"order": "ref_first", "verdict": verdict})
    return pa.Table.from_pylist(out)


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
    paired = _paired_rows(data, parsed)
    stats = _CueStats(paired, replicates, confidence, seed)
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


def _paired_rows(data: pa.Table, parsed: dict[str, cues.ProbeName | None]) -> _Groups:
    """Per (judge, lang, perturbation) of a cue probe or master key: an array of
    presentations (cluster, cued correct, cued answer named, twin correct: -1 where none)."""
    cols = data.select(["judge_id", "lang", "perturbation", "ref_id", "order", "verdict"]).to_pylist()
    twin: dict[tuple[str, ...], bool] = {}
    for r in cols:
        p = parsed.get(r["perturbation"])
        if p is not None and p.probe == cues.CLEAN:
            twin[(r["judge_id"], r["lang"], r["ref_id"], r["perturbation"], r["order"])] = r["verdict"] == "reference"
    groups: _Groups = defaultdict(list)
    for r in cols:
        p = parsed.get(r["perturbation"])
        if p is None or p.probe in (cues.CLEAN, "self_match"):
            continue
        cue_probe = cues.PROBES[p.probe] == "cue"
        t = twin.get((r["judge_id"], r["lang"], r["ref_id"], p.twin, r["order"])) if cue_probe else None
        groups[(r["judge_id"], r["lang"], r["perturbation"])].append(
            (f"{r['lang']}\x1f{r['ref_id']}", r["verdict"] == "reference", r["verdict"] == "perturbed",
             -1 if t is None else int(t)))
    return groups


class _CueStats:
    """cue_effect / cue_success with item-clustered bootstrap intervals, for any grouping."""

    def __init__(self, groups: _Groups, replicates: int, confidence: float, seed: int):
        self.groups, self.replicates, self.confidence, self.seed = groups, replicates, confidence, seed

    def probes(self, jid: str) -> list[str]:
        return sorted({p for j, _, p in self.groups if j == jid})

    def _rows(self, jid: str, lang: str | None, pert: str | None) -> list[tuple[str, bool, bool, int]]:
        out: list[tuple[str, bool, bool, int]] = []
        for (j, lg, p), rows in self.groups.items():
            if j == jid and (lang is None or lg == lang) and (pert is None or p == pert):
                out += rows
        return out

    def _metrics(self, rows: list[tuple[str, bool, bool, int]], key: str) -> dict[str, Interval | McNemar | None]:
        clusters = {c: i for i, c in enumerate(dict.fromkeys(r[0] for r in rows))}
        # per cluster: n, cued correct, cued named, paired n, paired twin correct, paired cued correct
        sums = np.zeros((len(clusters), 6))
        b = c = 0
        for cl, ok, named, t in rows:
            s = sums[clusters[cl]]
            s[0] += 1
            s[1] += ok
            s[2] += named
            if t >= 0:
                s[3] += 1
                s[4] += t
                s[5] += ok
                b += t and not ok
                c += ok and not t
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
            out["mcnemar"] = McNemar(int(b), int(c), mcnemar_exact(int(b), int(c)))
        return out

    def _bootstrap(self, sums: np.ndarray, key: str) -> dict[str, tuple[float, float]]:
        k = len(sums)
        if not self.replicates or not k:
            return {}
        digest = hashlib.blake2b(f"{self.seed}\x1fprobe\x1f{key}".encode(), digest_size=8).digest()
        rng = np.random.default_rng(int.from_bytes(digest))
        weights = rng.multinomial(k, np.full(k, 1.0 / k), size=self.replicates).astype(np.float64)
        rs = weights @ sums
        tail = (1.0 - self.confidence) / 2.0
        with np.errstate(invalid="ignore", divide="ignore"):
            values = {"accuracy": rs[:, 1] / rs[:, 0], "cue_success": rs[:, 2] / rs[:, 0],
                      "cue_effect": (rs[:, 4] - rs[:, 5]) / rs[:, 3]}
        out = {}
        for name, v in values.items():
            v = v[np.isfinite(v)]
            if v.size:
                lo, hi = np.quantile(v, [tail, 1.0 - tail])
                out[name] = (float(lo), float(hi))
        return out

    def card(self, card: Card, where: tuple[str, str | None, str | None]) -> ProbeCard:
        """``card`` (from ``cells``) with the cue metrics of its presentations."""
        jid, lang, pert = where
        rows = self._rows(jid, lang, pert)
        fields = msgspec.structs.asdict(card)
        if not rows:
            return ProbeCard(**fields)
        m = self._metrics(rows, f"{jid}/{lang}/{pert}")
        fields["accuracy"] = m["accuracy"]  # the same value; its interval widened as the cue metrics'
        return ProbeCard(**fields, cue_effect=m.get("cue_effect"), cue_success=m.get("cue_success"),  # type: ignore[arg-type]
                         mcnemar=m.get("mcnemar"))  # type: ignore[arg-type]

    def pooled(self, jid: str, pert: str) -> ProbeCard:
        """One probe over every language: accuracy and the cue metrics (the other fields
        are the language cards' business)."""
        rows = self._rows(jid, None, pert)
        m = self._metrics(rows, f"{jid}/*/{pert}")
        empty = Interval(None, None, None, 0)
        acc = m["accuracy"]
        assert isinstance(acc, Interval)
        return ProbeCard(items=len({r[0] for r in rows}), presentations=len(rows), accuracy=acc,
                         position_bias=empty, verbosity=empty, order_consistency=empty, reliability=empty,
                         tie_rate=empty, invalid_rate=empty,
                         cue_effect=m.get("cue_effect"), cue_success=m.get("cue_success"),  # type: ignore[arg-type]
                         mcnemar=m.get("mcnemar"))  # type: ignore[arg-type]

