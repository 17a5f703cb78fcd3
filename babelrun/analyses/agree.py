"""``babelrun agree RUN_DIR [LABELS]``: how often a judge agrees with human labels.

The run's labelled pairs (perturbation ``pairs:<set>``) carry the data's gold label; human
labels say, for some of the same pairs, which output a person preferred. This module compares
each judge's choices with those human labels, per judge and per set.

**Labels.** Either

- the run's own: no ``LABELS``, the labels of its ``labelled_pairs`` sources as the audit read
  them (``columns``, ``label_map``, ``join``, a ``labels`` file);
- a label file, read like a source (``corpus.labelled.read_label_file``, ``LabelOptions``:
  the same ``columns``, ``label_map`` and ``join``): any CSV / JSON / JSON Lines table; CSV
  ``item,label`` / ``item,annotator,label`` as they are (``item`` a pair's ref_id,
  ``LLMBar_Natural-0007``); an LLMBar-format ``dataset.json`` or folder of them (a pair's id
  ``f"{set}-{index:04d}"`` as for the run). A label file that names the texts and lists the two
  outputs the other way round is renumbered; other outputs than the run's: *mismatched*.

Labels are numbered as in the run's own data: babelrun puts a labelled pair's better output (by
the data's gold) in the reference's place, so a human label equal to the data's gold label
agrees with a judge verdict ``reference``, and the other label with ``perturbed``. The run's
own labelled data (the ``labelled_pairs`` paths in ``run.yaml``) must still be there.

Labels are ``1``, ``2`` or ``tie`` (neither better). A pair may carry several annotators'
labels (``labels: [..]`` in the JSON, or CSV ``item,annotator,label``): the human label is
their majority; a pair whose top count is shared has no majority and is left out (counted as
``no_majority``). With two or more annotators, ``humans`` (``analyses/humans.py``: linear in
the labels, its output bounded) gives the human–human agreement, the ceiling to read a
judge's agreement against.

**Comparison.** Labels are compared in the data's frame: output 1 better, output 2 better,
or tie. A judge's choice is the output it picked (``reference`` → the gold one, ``perturbed``
→ the other; on a tie-labelled pair of the run, the reference is output 1), ``tie``, or
``invalid``. A tie agrees with a tie label. Cohen's κ keeps invalid replies (and a both-orders
``split``) as categories of their own (they lower the observed agreement and, with no human
mass on them, add nothing to the chance agreement) rather than dropping them, which would
flatter a judge that abstains. Per figure: agreement with ties (3-way) and without the
tie-labelled pairs (``agreement_no_ties``, the MT-Bench convention), κ with its band, the
confusion matrix (rows: the human's label; columns: the judge's, ``other`` for invalid and
split), precision / recall / F1 per class and their macro averages, and the base rates of
both sides next to κ. Precision and recall carry Wilson intervals; agreement too; F1, the
macro averages and κ a percentile bootstrap over the figure's cases (seeded: the same run
gives the same numbers). Views per judge and set:

- ``both orders`` (rule ``label_both``): per item, the judge's choice when both presentations
  pick the same output, else ``split``; an item agrees when both its verdicts agree with the
  human (tie/tie agrees with a tie label).
- ``two orders: both`` (rule ``both``, MT-Bench's): the common choice of the two orders,
  otherwise a tie (one invalid reply: the other order's choice).
- ``two orders: votes`` (rule ``votes``, JudgeBench's): each order votes for the output it
  names, a tie or an invalid reply abstains; the item's choice is the output with more votes,
  a tie when they are even (invalid when both replies are).
- ``ref_first`` / ``pert_first``: the presentations of one order.
- ``data order``: the presentations showing output 1 first (the order the file lists the
  outputs in), as published tables report.
- ``presentations``: both orders pooled (the Wilson interval then treats an item's two
  presentations as independent: narrower than it should be).

The item views carry ``outcomes``, the counts their rule's benchmarks publish:
``both orders`` the items whose two verdicts both agree with the human, one does, or neither;
``two orders: votes`` the items with more votes for the human's output than against, fewer,
and even. Per judge and set, ``consistency`` counts the items seen in both orders whose two
verdicts name the same output (*decision consistency*, the cards' κ_ord: on a tie-labelled
pair of the run, tie in both orders is its decision) and whose two verdicts are the same verdict,
tie/tie included (*same verdict*, the cards' κ_same); neither reads the human labels.

Labels whose item is no labelled pair of the run (*unknown*), whose outputs differ
(*mismatched*) or that no judge has a record for (*no records*) are counted and reported.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..core.items import LABELLED_KINDS, bare_name
from ..corpus import labelled
from ..errors import NotApplicable
from ..score import lookup
from ..score.composite import TWO_ORDER_RULES
from ..score.metrics import ORDER_CODES, VERDICTS
from ..score.pointwise import all_pointwise, pairwise_only
from ..score.stats import cohen_kappa, confusion, fmt, landis_koch, precision_recall_f1, rounded, wilson
from ..store import compact
from .agree_labels import OWN_LABELS, LabelOptions, _human, _own_votes, _read_labels, _run_pairs, _sources
from .humans import AnnotatorPair, AnnotatorVsRest, Humans, humans

# the label reading is .agree_labels's, the human–human part .humans's
__all__ = ["OWN_LABELS", "AnnotatorPair", "AnnotatorVsRest", "Humans", "LabelOptions", "humans"]

VIEWS = ("both orders", "two orders: both", "two orders: votes", "ref_first", "pert_first", "data order",
         "presentations")
RULES = {"both orders": "label_both", "two orders: both": "both", "two orders: votes": "votes"}  # view -> rule
CLASSES = labelled.LABELS  # "1", "2", "tie": the data's frame
OTHER = "other"  # the judge's invalid replies and both-orders splits
BOOTSTRAP = 1000
ALL_SETS = "all sets"
COLUMNS = ["judge_id", "judge", "item_id", "ref_id", "order", "kind", "perturbation", "verdict"]
_SPLIT = 4  # the "both orders" choice of an item whose two verdicts differ (codes: 0 "1", 1 "2", 2 tie, 3 invalid)
_EXAMPLES = 5


Bounds = list[float | None]  # an interval: [lo, hi]


class ClassRates(msgspec.Struct, frozen=True):
    """One class's precision, recall and F1 (the judge's choice against the human label),
    plain numbers with their intervals beside them; ``support``: the cases the human gave it."""

    precision: float | None
    recall: float | None
    f1: float | None
    support: int
    precision_interval: Bounds
    recall_interval: Bounds
    f1_interval: Bounds


class Macro(msgspec.Struct, frozen=True):
    """The unweighted means over the classes the human labels hold."""

    precision: float | None
    recall: float | None
    f1: float | None
    precision_interval: Bounds
    recall_interval: Bounds
    f1_interval: Bounds


class Figure(msgspec.Struct, frozen=True):
    """One view of a judge's agreement: agreeing cases of n, with interval and κ, and the
    class-conditional rates (module docstring)."""

    view: str
    n: int
    agree: int
    accuracy: float | None
    lo: float | None
    hi: float | None
    kappa: float | None
    band: str | None
    agreement: float | None = None  # = accuracy: 3-way, ties counted
    agreement_interval: Bounds = []
    agreement_no_ties: float | None = None  # on the cases whose human label is not tie
    agreement_no_ties_interval: Bounds = []
    n_no_ties: int = 0
    kappa_interval: Bounds = []
    confusion: dict[str, dict[str, int]] = {}  # human label -> judge's choice -> cases
    per_class: dict[str, ClassRates] = {}
    macro: Macro | None = None
    base_rates: dict[str, dict[str, float]] = {}  # "human" / "judge" -> class -> share
    rule: str | None = None  # a two-order view's rule (score/composite.py TWO_ORDER_RULES)
    outcomes: dict[str, int] = {}  # the rule's published counts (module docstring)


class Consistency(msgspec.Struct, frozen=True):
    """Order consistency in both definitions, over the items seen in both orders."""

    items: int
    decision: int  # both verdicts name the same output (tie/tie on the run's tie-labelled pairs)
    decision_rate: float | None
    same_verdict: int  # the same verdict in both orders, tie/tie included
    same_verdict_rate: float | None


class SetAgreement(msgspec.Struct, frozen=True):
    set: str
    figures: list[Figure]
    consistency: Consistency | None = None


class JudgeAgreement(msgspec.Struct, frozen=True):
    judge: str
    judge_id: str
    sets: list[SetAgreement]


class Unmatched(msgspec.Struct, frozen=True):
    count: int
    examples: list[str]


class Agreement(msgspec.Struct, frozen=True):
    run_dir: str
    labels: str
    labels_read: int
    matched: int  # labels of pairs that some judge has records for
    unknown: Unmatched  # ids that are no labelled pair of the run's data
    mismatched: Unmatched  # same id, other outputs (LLMBar-format labels only)
    no_records: Unmatched  # pairs of the run's data that no judge has a record for
    unlabelled: int  # judged pairs without a human label
    judges: list[JudgeAgreement]
    confidence: float
    no_majority: Unmatched = Unmatched(0, [])  # labelled pairs whose annotators have no majority: left out
    tie_labelled: int = 0  # matched pairs the human labels a tie
    humans: Humans | None = None  # with two or more annotators


def _records(run_dir: Path, pair_ids: list[str], gold: np.ndarray, human: np.ndarray):
    """The run's records of labelled pairs, each row's pair (index into ``pair_ids``), the
    output the judge chose in the data's numbering (codes 0: output 1, 1: output 2, 2 tie,
    3 invalid), the human's (-1: no label) and whether the presentation shows output 1 first
    (the data's order). Choices are column operations: the gold flips a verdict into a number."""
    records = compact.load(run_dir, COLUMNS)
    if alone := all_pointwise(records):
        raise NotApplicable(f"{run_dir}: agreement compares pairwise verdicts with the labels, and every judge of "
                            f"the run is pointwise ({', '.join(alone)})")
    data = pairwise_only(records).unify_dictionaries()  # one dictionary per column
    data = data.filter(pc.is_in(data["kind"].cast(pa.string()), pa.array(LABELLED_KINDS)))
    p = lookup(data["ref_id"], pair_ids)
    data, p = data.filter(pa.array(p >= 0)), p[p >= 0]
    verdict = lookup(data["verdict"], VERDICTS)
    g = gold[p]
    first = np.where(g == 1, 1, 0)  # the output in the reference's place: the gold one; output 1 for a tie
    choice = np.select([verdict == 0, verdict == 1], [first, 1 - first], verdict)
    order = lookup(data["order"], ORDER_CODES)
    data_order = (order == 0) == (first == 0)
    return data, p, choice, human[p], data_order


def _bounds(lo: float | None, hi: float | None) -> Bounds:
    return [rounded(lo), rounded(hi)]


def _rates(choice: np.ndarray, human: np.ndarray) -> dict[str, np.ndarray]:
    """κ, per-class P/R/F1 and macro means of (replicates × cases) codings, vectorised."""
    k = len(CLASSES)
    reps, n = choice.shape
    codes = human * (k + 1) + np.minimum(choice, k)
    flat = codes + (np.arange(reps) * k * (k + 1))[:, None]
    tables = np.bincount(flat.ravel(), minlength=reps * k * (k + 1)).reshape(reps, k, k + 1)
    tp = np.diagonal(tables[:, :, :k], axis1=1, axis2=2).astype(np.float64)
    predicted, true = tables[:, :, :k].sum(axis=1), tables.sum(axis=2)
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.where(predicted > 0, tp / np.maximum(predicted, 1), 0.0)
        recall = np.where(true > 0, tp / np.maximum(true, 1), 0.0)
        f1 = np.where(precision + recall > 0, 2 * precision * recall / np.maximum(precision + recall, 1e-300), 0.0)
    # κ over the categories 0..k (k: other), from the full table's margins
    po = tp.sum(axis=1) / n
    pe = (true / n * predicted / n).sum(axis=1)  # "other" has no human mass: it adds no chance agreement
    with np.errstate(invalid="ignore", divide="ignore"):
        kappa = np.where(pe < 1, (po - pe) / np.where(pe < 1, 1 - pe, 1), np.where(po == 1, 1.0, 0.0))
    return {"precision": precision, "recall": recall, "f1": f1, "kappa": kappa, "true": true}


_BOOT_CELLS = 1 << 21  # replicates × cases resampled at once: memory bounded whatever the number of labels


def _bootstrap(rng: np.random.Generator, choice: np.ndarray, human: np.ndarray) -> dict[str, np.ndarray]:
    """``_rates`` of BOOTSTRAP resamples, drawn in chunks of replicates (the same draws, in the
    same order, as one (BOOTSTRAP × n) draw: the figures do not change, the memory stays bounded)."""
    n = len(choice)
    step = max(1, min(BOOTSTRAP, _BOOT_CELLS // max(n, 1)))
    parts = []
    for start in range(0, BOOTSTRAP, step):
        draws = rng.integers(0, n, size=(min(step, BOOTSTRAP - start), n))
        parts.append(_rates(choice[draws], human[draws]))
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def _figure(view: str, choice: np.ndarray, human: np.ndarray, confidence: float, seed: str = "") -> Figure:
    """Agreement with its Wilson interval, κ with its Landis–Koch band, and the class-conditional
    rates of one view."""
    n, k = len(choice), int((choice == human).sum())
    if n == 0:
        return Figure(view, 0, 0, None, None, None, None, None)
    lo, hi = wilson(k, n, confidence)
    kappa = cohen_kappa(choice, human)
    decisive = human != 2
    nt, kt = int(decisive.sum()), int((choice[decisive] == human[decisive]).sum())
    lo_t, hi_t = wilson(kt, nt, confidence) if nt else (np.nan, np.nan)
    table = confusion(human, choice, len(CLASSES))
    precision, recall, f1 = precision_recall_f1(table)
    present = table.sum(axis=1) > 0  # macro means over the classes the human labels hold
    rng = np.random.default_rng(int.from_bytes(hashlib.blake2b(f"{seed}\x1f{view}".encode(), digest_size=8).digest()))
    boot = _bootstrap(rng, choice, human)
    tail = (1 - confidence) / 2

    def q(values: np.ndarray) -> Bounds:
        finite = values[np.isfinite(values)]
        return _bounds(*np.quantile(finite, [tail, 1 - tail])) if finite.size else [None, None]

    predicted = table[:, : len(CLASSES)].sum(axis=0)
    per_class = {}
    for c, name in enumerate(CLASSES):
        tp = int(table[c, c])
        p_lo, p_hi = wilson(tp, int(predicted[c]), confidence) if predicted[c] else (np.nan, np.nan)
        r_lo, r_hi = wilson(tp, int(table[c].sum()), confidence) if table[c].sum() else (np.nan, np.nan)
        per_class[name] = ClassRates(rounded(precision[c]), rounded(recall[c]), rounded(f1[c]), int(table[c].sum()),
                                     _bounds(p_lo, p_hi), _bounds(r_lo, r_hi), q(boot["f1"][:, c]))
    boot_present = boot["true"] > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        macro_boot = {m: (boot[m] * boot_present).sum(axis=1) / boot_present.sum(axis=1)
                      for m in ("precision", "recall", "f1")}
    macro = Macro(rounded(precision[present].mean()), rounded(recall[present].mean()), rounded(f1[present].mean()),
                  q(macro_boot["precision"]), q(macro_boot["recall"]), q(macro_boot["f1"]))
    columns = (*CLASSES, OTHER)
    matrix = {name: {col: int(table[c, j]) for j, col in enumerate(columns)} for c, name in enumerate(CLASSES)}
    judge_counts = table.sum(axis=0)
    base = {"human": {name: rounded(table[c].sum() / n) for c, name in enumerate(CLASSES)},
            "judge": {col: rounded(judge_counts[j] / n) for j, col in enumerate(columns)}}
    # Banded after rounding off float noise: κ = 0.2 exactly is "slight", not "fair".
    return Figure(view, n, k, k / n, float(lo), float(hi), kappa, landis_koch(round(kappa, 12)),
                  agreement=rounded(k / n), agreement_interval=_bounds(lo, hi),
                  agreement_no_ties=rounded(kt / nt) if nt else None, agreement_no_ties_interval=_bounds(lo_t, hi_t),
                  n_no_ties=nt, kappa_interval=q(boot["kappa"]), confusion=matrix, per_class=per_class,
                  macro=macro, base_rates=base)


def _views(order, item, choice, human, data_order, tie_gold, confidence,
           seed: str = "") -> tuple[list[Figure], Consistency]:
    """The views of one group of records, sorted by (item, order), and its order consistency.
    The two-order rules see the judge's two choices only; the human label enters at the
    comparison."""
    first = np.flatnonzero(np.r_[True, item[1:] != item[:-1]])
    both = first[np.diff(np.r_[first, len(item)]) == 2]
    a, b, h = choice[both], choice[both + 1], human[both]
    cases = {"both orders": (np.where(a == b, a, _SPLIT), h),
             "two orders: both": (TWO_ORDER_RULES["both"](a, b), h),
             "two orders: votes": (TWO_ORDER_RULES["votes"](a, b), h),
             "ref_first": (choice[order == 0], human[order == 0]),
             "pert_first": (choice[order == 1], human[order == 1]),
             "data order": (choice[data_order], human[data_order]),
             "presentations": (choice, human)}
    hits = (a == h).astype(np.int64) + (b == h)
    decisive = h != 2  # votes against: for the other output of a decisive label
    margin = (hits - (a == 1 - h) - (b == 1 - h))[decisive]
    outcomes = {"both orders": {"both": int((hits == 2).sum()), "one": int((hits == 1).sum()),
                                "neither": int((hits == 0).sum())},
                "two orders: votes": {"more_for": int((margin > 0).sum()), "more_against": int((margin < 0).sum()),
                                      "even": int((margin == 0).sum()), "tie_labelled": int((~decisive).sum())}}
    figures = [msgspec.structs.replace(_figure(view, *cases[view], confidence, seed), rule=RULES.get(view),
                                       outcomes=outcomes.get(view, {})) for view in VIEWS]
    same = (a == b) & (a <= 2)
    decision = (a == b) & ((a <= 1) | (tie_gold[both] & (a == 2)))
    n = len(both)
    consistency = Consistency(n, int(decision.sum()), rounded(decision.mean()) if n else None,
                              int(same.sum()), rounded(same.mean()) if n else None)
    return figures, consistency


def _examples(ids) -> Unmatched:
    ids = sorted(ids)
    return Unmatched(len(ids), ids[:_EXAMPLES])


def run(run_dir: str | Path, labels_path: str | Path | None = None, confidence: float = 0.95,
        options: LabelOptions | None = None) -> Agreement:
    """Every judge's agreement with the human labels, per labelled set (and all sets): the
    labels of ``labels_path`` (read with ``options``), or without one the run's own labelled
    sources' labels, with their mapping."""
    run_dir = Path(run_dir)
    sources = _sources(run_dir)
    data_pairs = _run_pairs(sources)
    if labels_path is None:
        votes, unknown, mismatched, read = _human(_own_votes(sources), {}, data_pairs, own=True)
    else:
        labels_path = Path(labels_path)
        if not labels_path.exists():
            raise NotApplicable(f"labels not found: {labels_path}")
        votes, unknown, mismatched, read = _human(*_read_labels(labels_path, options or LabelOptions()), data_pairs)
    human_of = {pid: labelled.majority(list(v.values())) for pid, v in votes.items()}
    no_majority = [pid for pid, g in human_of.items() if g is None]
    pair_ids = sorted(data_pairs)
    code = {name: i for i, name in enumerate(CLASSES)}
    gold = np.array([code[data_pairs[p][2]] for p in pair_ids], dtype=np.int64)
    # -1: no human label; -2: labels without a majority (left out, counted)
    human = np.array([-1 if p not in human_of else code.get(human_of[p] or "", -2) for p in pair_ids],
                     dtype=np.int64)
    records, p, choice, h, data_order = _records(run_dir, pair_ids, gold, human)
    tie_gold = gold[p] == 2
    judged = np.zeros(len(pair_ids), dtype=bool)
    judged[p] = True
    no_records = [pair_ids[i] for i in np.flatnonzero((human >= 0) & ~judged)]
    labelled_rows = np.flatnonzero(h >= 0)
    judges = _judges(records.take(pa.array(labelled_rows)), choice[labelled_rows],
                     h[labelled_rows], data_order[labelled_rows], tie_gold[labelled_rows], confidence)
    matched = judged & (human >= 0)
    return Agreement(str(run_dir), OWN_LABELS if labels_path is None else str(labels_path), read, int(matched.sum()),
                     _examples(unknown), _examples(mismatched), _examples(no_records),
                     int((judged & (human == -1)).sum()),
                     judges, confidence, no_majority=_examples(no_majority),
                     tie_labelled=int((matched & (human == 2)).sum()),
                     humans=humans({pid: v for pid, v in votes.items()}))


def _judges(records: pa.Table, choice: np.ndarray, human: np.ndarray, data_order: np.ndarray,
            tie_gold: np.ndarray, confidence: float) -> list[JudgeAgreement]:
    """Sort the records by (judge, set, item, order) once: each judge, each of its sets and
    each item is then a slice, and no loop runs per record."""
    if records.num_rows == 0:
        return []
    jids = sorted(set(pc.unique(records["judge_id"]).to_pylist()))
    sets = sorted(set(pc.unique(records["perturbation"]).to_pylist()))
    judge, pset = lookup(records["judge_id"], jids), lookup(records["perturbation"], sets)
    item = pc.dictionary_encode(records["item_id"]).combine_chunks().indices.to_numpy()
    order = lookup(records["order"], ORDER_CODES)
    by = np.lexsort((order, item, pset, judge))
    judge, pset, item, order, choice, human, data_order, tie_gold = (
        x[by] for x in (judge, pset, item, order, choice, human, data_order, tie_gold))
    out = []
    for j in range(len(jids)):
        a, b = np.searchsorted(judge, [j, j + 1])
        bounds = a + np.searchsorted(pset[a:b], np.arange(len(sets) + 1))
        per_set = [SetAgreement(bare_name(sets[s]),
                                *_views(order[x:y], item[x:y], choice[x:y], human[x:y], data_order[x:y],
                                        tie_gold[x:y], confidence, f"{jids[j]}/{sets[s]}"))
                   for s, (x, y) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)) if y > x]
        if len(per_set) > 1:  # an item lies in one set: the judge's slice is sorted by item too
            per_set.append(SetAgreement(ALL_SETS, *_views(order[a:b], item[a:b], choice[a:b], human[a:b],
                                                          data_order[a:b], tie_gold[a:b], confidence, jids[j])))
        out.append(JudgeAgreement(records["judge"][int(by[a])].as_py(), jids[j], per_set))
    return out


def line(f: Figure) -> str:
    """One figure as a reviewer reads it: acc 0.94 [0.91, 0.96], κ 0.71 (substantial), n 300,
    both orders (with the agreement without tie-labelled pairs where the labels hold ties)."""
    if f.n == 0:
        return f"acc –, κ –, n 0, {f.view}"
    no_ties = (f", no ties {fmt(f.agreement_no_ties)} {_iv(f.agreement_no_ties_interval)} (n {f.n_no_ties})"
               if f.n_no_ties != f.n else "")
    rule = f" (rule {f.rule}: " + ", ".join(f"{k} {v}" for k, v in f.outcomes.items()) + ")" if f.outcomes else (
        f" (rule {f.rule})" if f.rule else "")
    return (f"acc {fmt(f.accuracy)} [{fmt(f.lo)}, {fmt(f.hi)}]{no_ties}, κ {fmt(f.kappa)} "
            f"{_iv(f.kappa_interval)} ({f.band}), n {f.n}, {f.view}{rule}")


def _iv(bounds: Bounds) -> str:
    return f"[{fmt(bounds[0])}, {fmt(bounds[1])}]" if len(bounds) == 2 and None not in bounds else "[–]"


DETAILED = ("both orders", "data order")  # the views whose class-conditional rates text shows


def detail(f: Figure) -> list[str]:
    """A figure's class-conditional rates: base rates, confusion matrix, P/R/F1 per class, macro."""
    if f.n == 0 or f.macro is None:
        return []
    columns = (*CLASSES, OTHER)
    out = ["base rates: human " + " · ".join(f"{c} {fmt(f.base_rates['human'][c])}" for c in CLASSES)
           + " | judge " + " · ".join(f"{c} {fmt(f.base_rates['judge'][c])}" for c in columns),
           "confusion (rows: human; columns: judge " + " ".join(columns) + ")"]
    out += [f"  {c:<4}" + "".join(f"{f.confusion[c][col]:>7}" for col in columns) for c in CLASSES]
    out.append("per class: precision, recall, F1 (n human)")
    for c in CLASSES:
        r = f.per_class[c]
        out.append(f"  {c:<4} P {fmt(r.precision)} {_iv(r.precision_interval)}, R {fmt(r.recall)} "
                   f"{_iv(r.recall_interval)}, F1 {fmt(r.f1)} {_iv(r.f1_interval)} (n {r.support})")
    m = f.macro
    out.append(f"macro: P {fmt(m.precision)} {_iv(m.precision_interval)}, R {fmt(m.recall)} "
               f"{_iv(m.recall_interval)}, F1 {fmt(m.f1)} {_iv(m.f1_interval)}")
    return out


def _humans(h: Humans | None) -> list[str]:
    if h is None:
        return ["Human–human agreement: one label per pair (no ceiling to show)."]
    listed = f" ({len(h.annotators)} listed: the most labels)" if h.n_annotators > len(h.annotators) else ""
    out = [f"Human–human agreement (the ceiling): {h.n_annotators or len(h.annotators)} annotators{listed}, "
           f"{h.pairs_with_several} pairs with two or more labels",
           f"  Fleiss' κ {fmt(h.fleiss_kappa)} (n {h.fleiss_n}, pairs every annotator labelled); "
           f"Krippendorff's α {fmt(h.krippendorff_alpha)} (nominal, n {h.alpha_n}); "
           f"pairwise agreement {fmt(h.mean_pairwise_agreement)} (n {h.label_pairs} label pairs), "
           f"without ties {fmt(h.agreement_no_ties)} (n {h.label_pairs_no_ties})"]
    out += [f"  {p.a} vs {p.b}: agreement {fmt(p.agreement)}, κ {fmt(p.kappa)}, n {p.n}" for p in h.pairwise]
    out += [f"  {r.annotator} vs the others' majority: agreement {fmt(r.agreement)}, κ {fmt(r.kappa)}, n {r.n}"
            for r in h.vs_rest]
    return out


def _unmatched(what: str, u: Unmatched) -> str:
    more = ", …" if u.count > len(u.examples) else ""
    return f"  {what}: {u.count}" + (f" ({', '.join(u.examples)}{more})" if u.count else "")


def text(agreement: Agreement) -> str:
    """The agreement as plain text: the label accounting first, the human–human ceiling, then
    one block per judge."""
    a = agreement
    out = [
        f"Agreement with human labels: run {a.run_dir}, labels {a.labels}",
        f"  labels read: {a.labels_read}; matched to judged pairs: {a.matched} ({a.tie_labelled} tie-labelled)",
        _unmatched("unknown items (no labelled pair of the run)", a.unknown),
        _unmatched("mismatched (other outputs than the run's)", a.mismatched),
        _unmatched("no majority among the annotators (left out)", a.no_majority),
        _unmatched("labels with no records in the run", a.no_records),
        f"  judged pairs without a label: {a.unlabelled}",
        *_humans(a.humans),
        f"Wilson {a.confidence:.0%} intervals (agreement, precision, recall); bootstrap for κ, F1 and "
        "macro. A tie agrees with a tie label; invalid replies never agree, and κ keeps them as a "
        "category of their own (other). No ties: on the pairs the human does not label a tie. Both "
        "orders: an item agrees when both its verdicts do; two orders: both, a win needs both orders "
        "(else tie); votes, each order votes, ties and invalid replies abstain. Data order: output 1 "
        "shown first.",
    ]
    if not a.judges:
        out.append("No judge has a record for a pair with a human label.")
    for judge in a.judges:
        out.append(f"\n{judge.judge} ({judge.judge_id[:8]})")
        for s in judge.sets:
            out.append(f"  {s.set}")
            if (c := s.consistency) is not None:
                out.append(f"    order consistency over {c.items} items in both orders: decision "
                           f"{fmt(c.decision_rate)} ({c.decision}), same verdict {fmt(c.same_verdict_rate)} "
                           f"({c.same_verdict}, tie/tie included)")
            for f in s.figures:
                out.append(f"    {line(f)}")
                if f.view in DETAILED:
                    out.extend(f"      {d}" for d in detail(f))
    return "\n".join(out) + "\n"


def below(agreement: Agreement, min_kappa: float) -> list[str]:
    """The judges whose κ with the human labels (both orders, all sets) is below
    ``min_kappa`` or undefined (``agree --min-kappa``), one line each."""
    out = []
    for judge in agreement.judges:
        whole = next((s for s in judge.sets if s.set == ALL_SETS), judge.sets[-1] if judge.sets else None)
        f = next((f for f in whole.figures if f.view == "both orders"), None) if whole else None
        kappa = None if f is None else f.kappa
        if kappa is None or kappa < min_kappa:
            out.append(f"{judge.judge}: κ {'undefined' if kappa is None else f'{kappa:.3f}'} < {min_kappa}")
    return out
