"""Self-preference: does a judge favour answers written by its own model family?

A judge declares its family (``family:`` in the manifest); labelled pairs may name the
family that wrote each output (``family_1`` / ``family_2``, babelrun/corpus/labelled.py). Per
judge with a family F, over its decisive verdicts on labelled pairs whose two families are
both known:

- **own-worse rate**: how often it names the worse output when F wrote the worse output and
  another family the better one;
- **neutral rate**: the same where F wrote neither output (the judge's plain error rate);
- **self-preference** s = (own-worse − neutral) / (1 − neutral): the share of decisions a
  judge hands to its own family regardless of quality, which is what the simulated judge's
  ``self_preference`` knob sets (it names its family's answer with probability s, else
  judges as usual). Its interval is a seeded parametric bootstrap of the two rates.
  The difference of the two rates has Newcombe's hybrid-score interval and an exact
  two-sided test for two independent proportions (Fisher): the two rates come from different
  pairs, so that test is the unpaired one;
- **paired against the other families' judges**: on the same own-worse presentations (pair,
  order), this judge against every judge of another family in the run: b = this judge
  named the worse output and the other did not, c = the reverse, exact McNemar p. This
  pairing holds item difficulty fixed; pairs whose better output the rival's own family
  wrote are left out of that rival's comparison (they would measure the rival's preference);
- every figure again on the **length-neutral** pairs, where the worse output is not longer
  than the better (a verbosity bias cannot explain a preference for it).
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..score import stats
from ..score.stats import Interval, fisher_exact, fmt_interval, newcombe
from ..store import compact
from .judge_ls import condition, rate

_COLUMNS = ["judge_id", "judge", "kind", "lang", "ref_id", "perturbation", "order", "verdict"]


class Preference(msgspec.Struct, frozen=True):
    own_worse: Interval  # P(names the worse output | its family wrote the worse one)
    neutral: Interval  # P(names the worse output | its family wrote neither)
    difference: Interval  # own_worse − neutral (Newcombe)
    fisher_p: float | None
    self_preference: Interval  # (own_worse − neutral) / (1 − neutral), bootstrap interval
    paired_b: int = 0  # this judge named the worse output and an other-family judge did not
    paired_c: int = 0
    paired_p: float | None = None


class SelfPreferenceCard(msgspec.Struct, frozen=True):
    judge: str
    family: str
    other_judges: list[str]  # judges of other families, for the paired comparison
    all_pairs: Preference
    length_neutral: Preference  # pairs whose worse output is not longer than the better


class SelfPreference(msgspec.Struct, frozen=True):
    cards: list[SelfPreferenceCard]
    skipped: list[str]  # judges without a family, named so a reader knows why they are absent


def _estimate(k1: int, n1: int, k2: int, n2: int, confidence: float, seed: int = 0,
              replicates: int = 4000) -> Interval:
    if n1 == 0 or n2 == 0 or k2 == n2:
        return Interval(None, None, None, min(n1, n2))
    rng = np.random.default_rng(seed)
    own = rng.binomial(n1, k1 / n1, replicates) / n1
    neutral = rng.binomial(n2, k2 / n2, replicates) / n2
    with np.errstate(divide="ignore", invalid="ignore"):
        s = (own - neutral) / (1 - neutral)
    s = s[np.isfinite(s)]
    tail = (1 - confidence) / 2
    value = (k1 / n1 - k2 / n2) / (1 - k2 / n2)
    return Interval(round(value, 4), round(float(np.quantile(s, tail)), 4),
                    round(float(np.quantile(s, 1 - tail)), 4), n1 + n2)


def _preference(own: np.ndarray, neutral: np.ndarray, paired: tuple[int, int] | None,
                confidence: float) -> Preference:
    """``own``, ``neutral``: 1 where the judge named the worse output (decisive verdicts)."""
    k1, n1, k2, n2 = int(own.sum()), len(own), int(neutral.sum()), len(neutral)
    b, c = paired or (0, 0)
    return Preference(rate(k1, n1, confidence), rate(k2, n2, confidence), newcombe(k1, n1, k2, n2, confidence),
                      None if not n1 or not n2 else round(fisher_exact(k1, n1, k2, n2), 6),
                      _estimate(k1, n1, k2, n2, confidence), b, c,
                      None if paired is None else round(stats.mcnemar_exact(b, c), 6))


class _Pair(msgspec.Struct, frozen=True):
    better_family: str
    worse_family: str
    worse_not_longer: bool


def card(name: str, family: str, data: pa.Table, pairs: dict[tuple[str, str], _Pair],
         others: dict[str, str], confidence: float) -> SelfPreferenceCard:
    """``data``: decisive labelled records of every judge; ``others``: judge name -> family."""
    def keyed(judge: str) -> dict[tuple, tuple[bool, _Pair]]:
        mine = data.filter(pc.equal(data["judge"], judge))
        cols = [mine[c].to_pylist() for c in ("lang", "perturbation", "ref_id", "order", "verdict")]
        out = {}
        for lang, pert, rid, order, verdict in zip(*cols, strict=True):
            pair = pairs.get((rid, condition(lang, pert)))
            if pair is not None and pair.better_family and pair.worse_family:
                out[(rid, pert, order)] = (verdict == "perturbed", pair)
        return out

    mine = keyed(name)
    rivals = [j for j, f in others.items() if f != family and j != name]
    theirs = [(others[j], keyed(j)) for j in rivals]
    parts = []
    for only_short in (False, True):
        own, neutral, b, c = [], [], 0, 0
        for key, (worse, pair) in mine.items():
            if only_short and not pair.worse_not_longer:
                continue
            if pair.worse_family == family and pair.better_family != family:
                own.append(worse)
                for rival_family, other in theirs:
                    # a pair the rival's own family wrote would measure the rival's preference
                    if key in other and pair.better_family != rival_family:
                        b += worse and not other[key][0]
                        c += other[key][0] and not worse
            elif family not in (pair.worse_family, pair.better_family):
                neutral.append(worse)
        parts.append(_preference(np.array(own, dtype=bool), np.array(neutral, dtype=bool),
                                 (b, c) if rivals else None, confidence))
    return SelfPreferenceCard(name, family, rivals, parts[0], parts[1])


def compare(data: pa.Table, pairs: list, families: dict[str, str | None], confidence: float = 0.95) -> SelfPreference:
    """``pairs``: the run's LabelledPairs; ``families``: judge name -> its declared family."""
    by_key = {(p.pair_id, p.condition or p.lang): _Pair(p.better_family, p.worse_family, len(p.worse) <= len(p.better))
              for p in pairs}
    data = data.filter(pc.and_(pc.equal(data["kind"].cast(pa.string()), "labelled"),
                               pc.is_in(data["verdict"].cast(pa.string()), pa.array(["reference", "perturbed"]))))
    data = data.set_column(data.schema.get_field_index("judge"), "judge", data["judge"].cast(pa.string()))
    known = {j: f for j, f in families.items() if f}
    cards = [card(j, f, data, by_key, known, confidence) for j, f in sorted(known.items())]
    return SelfPreference(cards, sorted(j for j, f in families.items() if not f))


def run(run_dir: Path, confidence: float = 0.95) -> SelfPreference:
    from .. import corpus
    from ..errors import NotApplicable
    from ..store.rundir import read_run_info

    manifest = read_run_info(Path(run_dir)).manifest
    if not any(j.family for j in manifest.judges):
        raise NotApplicable("self-preference: no judge declares a family (family: in the manifest)")
    pairs = corpus.select(manifest).pairs
    if not any(p.better_family and p.worse_family for p in pairs):
        raise NotApplicable("self-preference: no labelled pair names the families that wrote its outputs "
                            "(family_1 and family_2 columns)")
    data = compact.load(Path(run_dir), _COLUMNS)
    return compare(data, pairs, {j.name: j.family for j in manifest.judges}, confidence)


def text(result: SelfPreference) -> str:
    lines = ["Self-preference (labelled pairs whose outputs name their model family)", ""]
    for c in result.cards:
        lines.append(f"{c.judge} (family {c.family}); paired against: {', '.join(c.other_judges) or 'no other family'}")
        for label, p in (("all pairs", c.all_pairs), ("length-neutral pairs", c.length_neutral)):
            paired = ("–" if p.paired_p is None else f"b={p.paired_b} c={p.paired_c} McNemar p={p.paired_p:.3g}")
            fisher = "–" if p.fisher_p is None else f"{p.fisher_p:.3g}"
            lines += [f"  {label}:",
                      f"    names the worse output when its family wrote it: {fmt_interval(p.own_worse, n=True)}",
                      f"    names the worse output when its family wrote neither: {fmt_interval(p.neutral, n=True)}",
                      f"    difference: {fmt_interval(p.difference, n=True)}, Fisher p={fisher}",
                      f"    self-preference s: {fmt_interval(p.self_preference, n=True)}",
                      f"    paired with other families' judges: {paired}"]
    if not result.cards:
        lines.append("No judge declares a family (family: in the manifest).")
    if result.skipped:
        lines.append(f"Judges without a family: {', '.join(result.skipped)}")
    return "\n".join(lines) + "\n"
