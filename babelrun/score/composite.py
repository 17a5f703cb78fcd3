"""Mitigation judges (``composites`` in the manifest), computed from their inner judges' records.

A composite makes no calls: its inner judges are ordinary judges of the run, whose records
are ordinary log records under their own keys. So resume, retries, rate limits and costs
are theirs, and a composite's verdicts are recomputed from the log at every scoring. Each
composite becomes rows shaped like records (its own judge id and name) that score as any
judge; its card adds the calls it spends per decision and its change against its base judge.

Rules, per presentation (item, order); verdicts are ``reference``, ``perturbed``, ``tie``,
``invalid``; a soft verdict is P(A), P(B), P(tie):

- ``dual_order``: the inner judge's two presentations of the item, combined by its ``rule``
  (``TWO_ORDER_RULES``; docs/composites.md, *Two-order rules*, says where each comes from).
  ``both`` (the default): soft, the mean of P(reference), P(perturbed), P(tie) over the two
  orders, the strictly largest deciding (an exact tie for the largest is a tie, never the
  reference); otherwise equal verdicts stand, one invalid → the other, decisive but different
  → tie. ``label_both``: equal verdicts stand (tie/tie is a tie), any difference is no
  decision (invalid: right against no label). ``votes``: each order votes for the answer it
  names, a tie or an invalid reply abstains; more votes for one answer decide, equal votes
  are a tie (both invalid: invalid). ``label_both`` and ``votes`` read the hard verdicts,
  soft judges' too. Both presentations of the item carry the combined verdict (so Δ is 0 by
  construction); 2 calls per decision.
- ``ensemble``: the members' verdicts on the same presentation. ``majority``: more
  reference than perturbed votes → reference, and vice versa; equal → tie (ties and invalid
  replies abstain; all invalid → invalid). ``soft``: mean probabilities, the strictly
  largest (exact ties are ties). k calls.
- ``cascade``: the cheap judge's verdict stands unless it is a tie or invalid, its soft
  margin |P(A) − P(B)| is under ``margin``, or (``on_flip``) its two orders are decisive and
  disagree (or the other order is missing); then the strong judge's verdict on the same
  presentation. Calls: 1 (2 with ``on_flip``: both orders of the cheap judge) + the
  escalation rate; a deterministic cheap stage (``backend: rule``) makes no model call, so
  its cascade costs the escalation rate alone.
- ``calibrated``: items are split by their id hash; on the calibration share the slot bias
  β = mean log P(A)/P(B) over both orders (where the answers' quality cancels) is
  estimated per language (pooled where a language has fewer than ``min_items``). On the
  other items, P(A)·e^(−β/2), P(B)·e^(β/2), P(tie), renormalised, the strictly largest
  (exact ties are ties). 1 call.

A presentation a composite cannot decide for want of an inner record (an inner call that
failed, a strong judge not yet run) is left out and counted as ``unresolved``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..core.keys import sample_column
from ..judges.rule import SERVED as RULE_SERVED
from ..spec import (
    CalibratedSpec,
    CascadeSpec,
    CompositeSpec,
    DualOrderSpec,
    EnsembleSpec,
    SampledSpec,
    inner_judges,
)
from . import metrics, paired, stats
from .cards import CompositeCard
from .columnar import SCORING_COLUMNS
from .columns import lookup
from .stats import ROUND, Interval, rounded

REF, PERT, TIE, INVALID = range(4)  # metrics.VERDICTS
# Columns a composite needs beyond the scoring ones: the tie probability, and what the
# provider served (for the comparison with the base judge).
COLUMNS = [*SCORING_COLUMNS, "p_tie", "served_model", "fingerprint"]
_EPS = 1e-9
# Probabilities (in [0, 1]) closer than this are an exact tie: the float rounding of a mean or a
# renormalisation must not decide a verdict (see _from_slots).
_TIE_TOL = 1e-9
# What each mitigation is meant to fix, in card metrics (the report marks them).
TARGETS = {"dual_order": ["position_bias", "order_consistency"], "calibrated": ["position_bias"],
           "ensemble": ["accuracy"], "cascade": ["accuracy"], "sampled": ["accuracy", "order_consistency"]}


class _Judged(msgspec.Struct):
    """One judge's counted records, sorted by key = item_key << 1 | order (pert_first = 1)."""

    rows: np.ndarray  # row numbers in the run's table
    key: np.ndarray
    verdict: np.ndarray  # codes into metrics.VERDICTS
    probs: np.ndarray  # (n, 3): P(A), P(B), P(tie); NaN where the record has none

    def find(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Positions of ``keys`` here, and which of them exist."""
        at = np.minimum(np.searchsorted(self.key, keys), max(len(self.key) - 1, 0))
        found = (self.key[at] == keys) if len(self.key) else np.zeros(len(keys), dtype=bool)
        return at, found


class Derived(msgspec.Struct):
    """A composite's presentations: rows of the run's table to copy, with new verdicts."""

    spec: CompositeSpec
    judge_id: str
    rows: np.ndarray
    verdict: np.ndarray
    probs: np.ndarray
    calls_per_decision: float
    unresolved: int = 0
    escalated: int | None = None  # cascade: presentations sent to the strong judge
    considered: int = 0  # cascade: the cheap judge's presentations
    slot_bias: dict[str, float] | None = None  # calibrated: β per language (and "all")
    calibration_items: int | None = None


def composite_id(spec: CompositeSpec, ids: dict[str, str]) -> str:
    """Short hash of the composite's rule and settings and its inner judges' ids (not names)."""
    fields = msgspec.structs.asdict(spec)
    fields.pop("name")
    fields.pop("base")
    if fields.get("rule") == "both":  # the rule before it was named: the ids of existing runs stay
        fields.pop("rule")
    identity = {"kind": spec.kind, **fields, "inner": [ids[n] for n in inner_judges(spec)]}
    blob = msgspec.json.encode(identity, order="sorted")
    return "c" + hashlib.blake2b(blob, digest_size=6).hexdigest()[1:]


def _judged(data: pa.Table, judge: np.ndarray, code: int, order: np.ndarray, verdict: np.ndarray,
            probs: np.ndarray, sample: np.ndarray | None = None) -> _Judged:
    """A judge's records by key; with ``sample``, only those of sample 0 (its first asks: what
    every composite but ``sampled`` combines)."""
    mine = judge == code
    rows = np.flatnonzero(mine if sample is None else mine & (sample == 0))
    key = (data["item_key"].to_numpy()[rows] << np.uint64(1)) | order[rows].astype(np.uint64)
    by = np.argsort(key, kind="stable")
    rows, key = rows[by], key[by]
    return _Judged(rows, key, verdict[rows], probs[rows])


def _from_slots(probs: np.ndarray, ref_first: np.ndarray) -> np.ndarray:
    """Verdict codes from soft verdicts: the slot whose probability is strictly the largest,
    named by where the reference stood; an exact tie for the largest (within float rounding,
    ``_TIE_TOL``) is a tie, whichever two slots share it; no probabilities → invalid.

    The rule is symmetric in A and B, so it can be applied in the reference's frame
    ((P(reference), P(perturbed), P(tie)), ``ref_first`` all True) without leaking the gold:
    a plain ``argmax`` there breaks an exact P(reference) = P(perturbed) toward index 0, the
    reference (the dual-order leak: an always-``A`` judge read as always right)."""
    p = np.nan_to_num(probs, nan=-1.0)
    a, b, t = p[:, 0], p[:, 1], p[:, 2]

    def over(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return np.asarray(x - y > _TIE_TOL)

    chose_a, chose_b = over(a, b) & over(a, t), over(b, a) & over(b, t)
    chose_ref = np.where(ref_first, chose_a, chose_b)
    chose_pert = np.where(ref_first, chose_b, chose_a)
    verdict = np.where(chose_ref, REF, np.where(chose_pert, PERT, TIE))
    return np.where(np.isnan(probs).any(axis=1), INVALID, verdict)


def _ref_view(probs: np.ndarray, ref_first: np.ndarray) -> np.ndarray:
    """(P(reference), P(perturbed), P(tie)) from (P(A), P(B), P(tie))."""
    out = probs.copy()
    out[~ref_first, 0], out[~ref_first, 1] = probs[~ref_first, 1], probs[~ref_first, 0]
    return out


def _combine_hard(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``both``: two verdicts on one item: equal stand; one invalid → the other; else tie."""
    return np.where(a == b, a, np.where(a == INVALID, b, np.where(b == INVALID, a, TIE)))


def _combine_label_both(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``label_both``: equal verdicts stand (tie/tie too); any difference decides nothing."""
    return np.where(a == b, a, INVALID)


def _combine_votes(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``votes``: a vote per order for the answer it names; ties and invalid replies abstain."""
    score = (a == REF).astype(np.int64) - (a == PERT) + (b == REF) - (b == PERT)
    undecided = np.where((a == INVALID) & (b == INVALID), INVALID, TIE)
    return np.where(score > 0, REF, np.where(score < 0, PERT, undecided))


# Each is symmetric in reference and perturbed (swap REF and PERT in both inputs and the output
# swaps): none can lean toward the gold (tests/unit/test_gold_blind.py).
TWO_ORDER_RULES: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "both": _combine_hard, "label_both": _combine_label_both, "votes": _combine_votes}


def dual_order(spec: DualOrderSpec, j: _Judged) -> Derived:
    first = (j.key & np.uint64(1)) == 0
    rf = np.flatnonzero(first)
    at, found = j.find(j.key[rf] | np.uint64(1))
    rf, pf = rf[found], at[found]
    hard = TWO_ORDER_RULES[spec.rule](j.verdict[rf], j.verdict[pf])
    ref = (_ref_view(j.probs[rf], np.ones(len(rf), bool)) + _ref_view(j.probs[pf], np.zeros(len(pf), bool))) / 2
    if spec.rule == "both":  # the only rule with a soft form: the mean probabilities
        soft = ~np.isnan(ref).any(axis=1)
        verdict = np.where(soft, _from_slots(ref, np.ones(len(rf), bool)), hard)
    else:
        verdict, ref = hard, np.full_like(ref, np.nan)
    rows = np.concatenate([j.rows[rf], j.rows[pf]])
    # Back to (P(A), P(B), P(tie)) for each presentation: the swap undoes itself.
    probs = np.concatenate([ref, _ref_view(ref, np.zeros(len(pf), bool))])
    unresolved = int(len(j.key) - 2 * len(rf))
    return Derived(spec, "", rows, np.concatenate([verdict, verdict]), probs, 2.0, unresolved)


def ensemble(spec: EnsembleSpec, members: list[_Judged]) -> Derived:
    lead = members[0]
    keep = np.ones(len(lead.key), dtype=bool)
    positions = []
    for m in members:
        at, found = m.find(lead.key)
        keep &= found
        positions.append(at)
    positions = [at[keep] for at in positions]
    verdicts = np.stack([m.verdict[at] for m, at in zip(members, positions, strict=True)])
    ref_first = (lead.key[keep] & np.uint64(1)) == 0
    if spec.vote == "soft":
        probs = np.nanmean(np.stack([m.probs[at] for m, at in zip(members, positions, strict=True)]), axis=0)
        verdict = _from_slots(probs, ref_first)
    else:
        refs, perts = (verdicts == REF).sum(axis=0), (verdicts == PERT).sum(axis=0)
        verdict = np.where(refs > perts, REF, np.where(perts > refs, PERT, TIE))
        verdict = np.where((verdicts == INVALID).all(axis=0), INVALID, verdict)
        probs = np.full((len(verdict), 3), np.nan)
    return Derived(spec, "", lead.rows[keep], verdict, probs, float(len(members)), int((~keep).sum()))


def escalated(spec: CascadeSpec, cheap: _Judged) -> np.ndarray:
    """Which of the cheap judge's presentations go to the strong judge."""
    escalate = cheap.verdict >= TIE
    if spec.margin is not None:
        margin = np.abs(cheap.probs[:, 0] - cheap.probs[:, 1])
        escalate |= np.nan_to_num(margin, nan=0.0) < spec.margin
    if spec.on_flip:
        at, found = cheap.find(cheap.key ^ np.uint64(1))  # the same item's other order
        other = np.where(found, cheap.verdict[at], INVALID) if len(cheap.key) else cheap.verdict
        flipped = (cheap.verdict <= PERT) & (other <= PERT) & (other != cheap.verdict)
        escalate |= flipped | ~found
    return escalate


def cascade(spec: CascadeSpec, cheap: _Judged, strong: _Judged, cheap_is_free: bool = False) -> Derived:
    """``cheap_is_free``: the cheap stage is a deterministic rule (``backend: rule``), which
    makes no model call: the calls per decision are the escalations alone."""
    escalate = escalated(spec, cheap)
    at, found = strong.find(cheap.key)
    resolved = ~escalate | found
    if not len(strong.key):  # nothing to take from: only what the cheap judge settles
        strong = _Judged(np.zeros(1, np.int64), np.zeros(1, np.uint64), np.full(1, INVALID), np.full((1, 3), np.nan))
    verdict = np.where(escalate, strong.verdict[at], cheap.verdict)[resolved]
    probs = np.where(escalate[:, None], strong.probs[at], cheap.probs)[resolved]
    # The rate over every cheap presentation: escalations the strong judge has not answered
    # yet (unresolved) are escalations all the same.
    n_escalated, n = int(escalate.sum()), len(escalate)
    calls = (0.0 if cheap_is_free else 2.0 if spec.on_flip else 1.0) + (n_escalated / n if n else 0.0)
    return Derived(spec, "", cheap.rows[resolved], verdict, probs, calls, int((~resolved).sum()),
                   escalated=n_escalated, considered=n)


def calibrated(spec: CalibratedSpec, j: _Judged, lang: np.ndarray, langs: list[str]) -> Derived:
    item = j.key >> np.uint64(1)
    held_out = (item % np.uint64(10_000)) < np.uint64(round(spec.calibration_share * 10_000))
    has = ~np.isnan(j.probs).any(axis=1)
    log_ratio = np.log(np.clip(j.probs[:, 0], _EPS, None)) - np.log(np.clip(j.probs[:, 1], _EPS, None))
    cal = held_out & has
    pooled = float(log_ratio[cal].mean()) if cal.any() else 0.0
    bias = {"all": pooled}
    beta = np.full(len(j.key), pooled)
    row_lang = lang[j.rows]
    for code in np.unique(row_lang):
        here = row_lang == code
        if len(np.unique(item[cal & here])) >= spec.min_items:
            bias[langs[code]] = float(log_ratio[cal & here].mean())
            beta[here] = bias[langs[code]]
    scored = ~held_out
    p = j.probs[scored] * np.column_stack([np.exp(-beta[scored] / 2), np.exp(beta[scored] / 2),
                                           np.ones(int(scored.sum()))])
    p = p / p.sum(axis=1, keepdims=True)
    verdict = _from_slots(p, (j.key[scored] & np.uint64(1)) == 0)
    return Derived(spec, "", j.rows[scored], verdict, p, 1.0, 0,
                   slot_bias={k: round(float(v), ROUND) + 0.0 for k, v in sorted(bias.items())},  # as rounded()
                   calibration_items=len(np.unique(item[held_out])))


def _judges(data: pa.Table, ids: dict[str, str]) -> Callable[..., _Judged]:
    """A lookup of each named judge's records in ``data`` (built on first use)."""
    present = sorted(set(pc.unique(data["judge_id"].cast(pa.string())).to_pylist()))
    judge = lookup(data["judge_id"], present)
    order = lookup(data["order"], metrics.ORDER_CODES)
    verdict = lookup(data["verdict"], metrics.VERDICTS)
    probs = np.column_stack([data[c].to_numpy(zero_copy_only=False).astype(float) for c in ("p_a", "p_b", "p_tie")])
    sample = sample_column(data)
    empty = _Judged(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64),
                    np.zeros((0, 3)))
    judged: dict[tuple[str, bool], _Judged] = {}

    def of(name: str, every_sample: bool = False) -> _Judged:
        if (name, every_sample) not in judged:
            jid = ids.get(name)
            judged[(name, every_sample)] = (
                _judged(data, judge, present.index(jid), order, verdict, probs, None if every_sample else sample)
                if jid in present else empty)
        return judged[(name, every_sample)]

    return of


def escalations(data: pa.Table, specs: list[CompositeSpec], ids: dict[str, str],
                strong_judges: set[str]) -> dict[str, np.ndarray]:
    """The keys (item_key << 1 | order) each of ``strong_judges`` must judge: what its
    cascades escalate, from the cheap judges' records so far. By judge id."""
    wanted: dict[str, list[np.ndarray]] = {ids[name]: [] for name in strong_judges}
    if data.num_rows:
        of = _judges(data, ids)
        for spec in specs:
            if isinstance(spec, CascadeSpec) and spec.strong in strong_judges:
                cheap = of(spec.cheap)
                wanted[ids[spec.strong]].append(cheap.key[escalated(spec, cheap)])
    return {jid: np.unique(np.concatenate(keys)) if keys else np.zeros(0, np.uint64) for jid, keys in wanted.items()}


def derive(data: pa.Table, specs: list[CompositeSpec], ids: dict[str, str]) -> list[Derived]:
    """Every composite's presentations from the run's counted records (``COLUMNS``)."""
    if not specs or data.num_rows == 0:
        return []
    of = _judges(data, ids)
    langs = sorted(set(pc.unique(data["lang"].cast(pa.string())).to_pylist()))
    lang = lookup(data["lang"], langs)

    def rule(s: CompositeSpec) -> Derived:
        if isinstance(s, DualOrderSpec):
            return dual_order(s, of(s.of))
        if isinstance(s, EnsembleSpec):
            return ensemble(s, [of(n) for n in s.of])
        if isinstance(s, CascadeSpec):
            return cascade(s, of(s.cheap), of(s.strong), _is_rule(data, of(s.cheap)))
        if isinstance(s, SampledSpec):
            return sampled(s, of(s.of, every_sample=True))
        return calibrated(s, of(s.of), lang, langs)

    return [msgspec.structs.replace(rule(s), judge_id=composite_id(s, ids)) for s in specs]


def sampled(spec: SampledSpec, judged: _Judged) -> Derived:
    """Each presentation's samples as one verdict. Soft (every sample of the presentation with
    probabilities): the mean probabilities, read as ``_from_slots`` reads one. Hard: the verdict
    named by strictly more samples than each other verdict (reference, perturbed, tie); equal
    counts are a tie; all invalid stays invalid. Both rules are symmetric in reference and
    perturbed, so neither leans toward the gold. The presentation's row is its first sample's."""
    if not len(judged.key):
        return Derived(spec, "", judged.rows, judged.verdict, judged.probs, 0.0)
    starts = np.flatnonzero(np.concatenate(([True], judged.key[1:] != judged.key[:-1])))
    votes = np.add.reduceat(np.eye(4, dtype=np.int64)[judged.verdict], starts, axis=0)  # REF, PERT, TIE, INVALID
    decided = votes[:, :3]
    top = decided.max(axis=1)
    alone = (decided == top[:, None]).sum(axis=1) == 1
    verdict = np.where(top == 0, INVALID, np.where(alone, decided.argmax(axis=1), TIE))
    counts = np.diff(np.append(starts, len(judged.key)))
    have = np.add.reduceat((~np.isnan(judged.probs).any(axis=1)).astype(np.int64), starts)
    probs = np.add.reduceat(np.nan_to_num(judged.probs), starts, axis=0) / counts[:, None]
    soft = have == counts
    probs[~soft] = np.nan
    if soft.any():
        ref_first = (judged.key[starts] & np.uint64(1)) == 0
        verdict = np.where(soft, _from_slots(probs, ref_first), verdict)
    return Derived(spec, "", judged.rows[starts], verdict.astype(np.int64), probs,
                   calls_per_decision=float(counts.mean()))


def _is_rule(data: pa.Table, judged: _Judged) -> bool:
    """Whether every record of a judge comes from the rule backend (what it says it served)."""
    if not len(judged.rows) or "served_model" not in data.column_names:
        return False
    served = data["served_model"].take(pa.array(judged.rows, type=pa.int64())).cast(pa.string())
    return bool(pc.all(pc.equal(served, RULE_SERVED)).as_py())


def table(data: pa.Table, derived: Derived) -> pa.Table:
    """The composite's presentations as record rows: the inner rows with the composite's
    judge id and name, verdict and probabilities."""
    rows = data.take(pa.array(derived.rows, type=pa.int64()))
    n = rows.num_rows
    new = {
        "judge_id": pa.array([derived.judge_id] * n),
        "judge": pa.array([derived.spec.name] * n),
        "verdict": pa.array(np.array(metrics.VERDICTS, dtype=object)[derived.verdict]),
        "p_a": pa.array(derived.probs[:, 0], from_pandas=True),
        "p_b": pa.array(derived.probs[:, 1], from_pandas=True),
        "p_tie": pa.array(derived.probs[:, 2], from_pandas=True),
    }
    for name, column in new.items():
        if name in rows.column_names:
            i = rows.column_names.index(name)
            rows = rows.set_column(i, rows.schema.field(name), column.cast(rows.schema.field(name).type))
    return rows


def card(derived: Derived, data: pa.Table, rows: pa.Table, ids: dict[str, str], *,
         replicates: int, confidence: float, seed: int) -> CompositeCard:
    """The composite's own facts and its change against its base judge (``base``, or its
    first inner judge) on the same presentations."""
    spec = derived.spec
    base_name = spec.base or inner_judges(spec)[0]
    base = data.filter(pc.equal(data["judge_id"].cast(pa.string()), ids[base_name]))
    if "sample" in base.column_names:  # a sampled base: its first asks, what it gives asked once
        base = base.filter(pc.equal(pc.fill_null(base["sample"], 0), 0))
    changes = paired.compare_tables(base, rows, replicates=replicates, confidence=confidence, seed=seed)
    n = rows.num_rows
    escalation = None
    if derived.escalated is not None:
        k, m = derived.escalated, derived.considered
        lo, hi = stats.wilson(k, m, confidence)
        escalation = Interval(rounded(k / m) if m else None, rounded(float(lo)), rounded(float(hi)), m)
    return CompositeCard(
        name=spec.name, kind=spec.kind, judge_id=derived.judge_id, inner=inner_judges(spec),
        base=base_name, targets=TARGETS[spec.kind], calls_per_decision=round(derived.calls_per_decision, 4),
        presentations=n,
        unresolved=derived.unresolved, escalation_rate=escalation, slot_bias=derived.slot_bias,
        calibration_items=derived.calibration_items, change=changes,
    )
