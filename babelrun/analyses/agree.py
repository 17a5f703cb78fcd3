"""``babelrun agree RUN_DIR LABELS``: how often a judge agrees with human labels.

The run's labelled pairs (perturbation ``pairs:<set>``) carry the data's gold label; a human
label file says, for some of the same pairs, which output a person preferred. This module
compares each judge's choices with those human labels, per judge and per set.

**Labels.** Either

- LLMBar / MT-Bench format (the files ``babelrun.corpus.labelled`` reads): a ``dataset.json``
  (a JSON list of ``{input, output_1, output_2, label}``) or a folder of
  ``<set>/dataset.json``. A pair's id is ``f"{set}-{index:04d}"`` as for the run; a pair
  whose two outputs are not the run's two outputs (in either order) is *mismatched*.
- CSV with a header ``item,label``: ``item`` a pair's ref_id (``LLMBar_Natural-0007``),
  ``label`` 1 or 2, which of the data's ``output_1`` / ``output_2`` is better, numbered as
  in the run's own ``dataset.json``. babelrun puts a labelled pair's better output (by the
  data's gold) in the reference's place, so a human label equal to the data's gold label
  agrees with a judge verdict ``reference``, and the other label with ``perturbed``.

Both need the run's own labelled data (the ``labelled_pairs`` paths in ``run.yaml``): its
gold label says where each output stood.

**Comparison.** Labels are compared in the data's frame: which output, 1 or 2, is better.
A judge's choice is the output it picked (``reference`` → the gold one, ``perturbed`` → the
other), ``tie`` or ``invalid``. A human never says tie, so ties and invalid replies never
agree; Cohen's κ keeps them as categories of their own (they lower the observed agreement
and, with no human mass on them, add nothing to the chance agreement) rather than dropping
them, which would flatter a judge that abstains. Views per judge and set:

- ``both orders``: per item, the judge's choice when both presentations pick the same
  output, else ``split``; an item agrees when both its verdicts agree with the human.
- ``ref_first`` / ``pert_first``: the presentations of one order.
- ``presentations``: both orders pooled (the Wilson interval then treats an item's two
  presentations as independent: narrower than it should be).

Labels whose item is no labelled pair of the run (*unknown*), whose outputs differ
(*mismatched*) or that no judge has a record for (*no records*) are counted and reported.
"""

from __future__ import annotations

import csv
from pathlib import Path

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..core.items import bare_name
from ..corpus import labelled
from ..errors import NotApplicable
from ..score import lookup
from ..score.metrics import ORDER_CODES, VERDICTS
from ..score.pointwise import all_pointwise, pairwise_only
from ..score.stats import cohen_kappa, fmt, landis_koch, wilson
from ..spec import LabelledPairsSource
from ..store import compact
from ..store.rundir import read_run_info

VIEWS = ("both orders", "ref_first", "pert_first", "presentations")
ALL_SETS = "all sets"
COLUMNS = ["judge_id", "judge", "item_id", "ref_id", "order", "kind", "perturbation", "verdict"]
_SPLIT = 5  # the "both orders" choice of an item whose two verdicts differ
_EXAMPLES = 5


class Figure(msgspec.Struct, frozen=True):
    """One view of a judge's agreement: agreeing cases of n, with interval and κ."""

    view: str
    n: int
    agree: int
    accuracy: float | None
    lo: float | None
    hi: float | None
    kappa: float | None
    band: str | None


class SetAgreement(msgspec.Struct, frozen=True):
    set: str
    figures: list[Figure]


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


def _run_pairs(run_dir: Path) -> dict[str, tuple[str, str, int]]:
    """The run's labelled pairs: id → (output_1, output_2, gold label), read from the data
    the run was built from, since only the data knows which output was numbered 1."""
    sources = [s for s in read_run_info(run_dir).manifest.corpus.sources
               if isinstance(s, LabelledPairsSource)]
    pairs = {}
    for source in sources:
        path = labelled.path_of(source)  # no path: the pairs bundled with babelrun
        if not path.exists():
            raise NotApplicable(f"the run's labelled pairs are gone from {path}: agree reads "
                            "their gold labels there")
        for pair_id, pair in _llmbar(str(path)).items():
            # the first source wins an id: another language condition of a pair shares its
            # alignment id (per-condition accuracy is `babelrun invariance`'s)
            pairs.setdefault(pair_id, pair)
    return pairs


def _llmbar(path: str) -> dict[str, tuple[str, str, int]]:
    """An LLMBar-format file or folder as id → (output_1, output_2, label), ids named as
    ``labelled.read_pairs`` names them."""
    try:
        return {pair_id: (row.output_1, row.output_2, row.label)
                for pair_id, _, row in labelled.rows(LabelledPairsSource(path=path))}
    except msgspec.DecodeError as e:
        raise NotApplicable(f"{path}: not LLMBar pairs ({e})") from None


def _csv(path: Path) -> list[tuple[str, int]]:
    """(item, label) rows of a CSV labels file; a bad row is an error naming its line."""
    with path.open(newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        if not {"item", "label"} <= set(reader.fieldnames or ()):
            raise NotApplicable(f"{path}: a labels CSV needs the columns item,label")
        rows = []
        for row in reader:
            if row["label"].strip() not in ("1", "2"):
                raise NotApplicable(f"{path}:{reader.line_num}: label {row['label']!r} is not 1 or 2")
            rows.append((row["item"].strip(), int(row["label"])))
    return rows


def _human(labels_path: Path, data: dict) -> tuple[dict[str, int], list[str], list[str], int]:
    """Human labels in the data's numbering: (id → 1 or 2, unknown ids, mismatched ids,
    labels read). An LLMBar-format label is renumbered when its file lists the two outputs
    the other way round."""
    if labels_path.suffix.lower() == ".csv":
        rows = _csv(labels_path)
        texts = {}
    elif labels_path.is_dir() or labels_path.suffix.lower() == ".json":
        texts = _llmbar(str(labels_path))
        rows = [(pid, label) for pid, (_, _, label) in texts.items()]
    else:
        raise NotApplicable(f"{labels_path}: labels are a .csv file, a dataset.json or a folder of them")
    human: dict[str, int] = {}
    unknown, mismatched = [], []
    for pid, label in rows:
        if pid not in data:
            unknown.append(pid)
            continue
        if pid in texts:
            ours, theirs = data[pid][:2], texts[pid][:2]
            if theirs != ours and theirs[::-1] != ours:
                mismatched.append(pid)
                continue
            label = label if theirs == ours else 3 - label
        if human.setdefault(pid, label) != label:
            raise NotApplicable(f"{labels_path}: item {pid} is labelled both 1 and 2")
    return human, unknown, mismatched, len(rows)


def _records(run_dir: Path, pair_ids: list[str], gold: np.ndarray, human: np.ndarray):
    """The run's records of labelled pairs, each row's pair (index into ``pair_ids``), the
    output the judge chose in the data's numbering (1, 2; 3 tie, 4 invalid) and the human's
    (0: no label). Choices are column operations: the gold flips a verdict into a number."""
    records = compact.load(run_dir, COLUMNS)
    if alone := all_pointwise(records):
        raise NotApplicable(f"{run_dir}: agreement compares pairwise verdicts with the labels, and every judge of "
                            f"the run is pointwise ({', '.join(alone)})")
    data = pairwise_only(records).unify_dictionaries()  # one dictionary per column
    data = data.filter(pc.equal(data["kind"], "labelled"))
    p = lookup(data["ref_id"], pair_ids)
    data, p = data.filter(pa.array(p >= 0)), p[p >= 0]
    verdict = lookup(data["verdict"], VERDICTS)
    g = gold[p]
    choice = np.select([verdict == 0, verdict == 1], [g, 3 - g], verdict + 1)
    return data, p, choice, human[p]


def _figure(view: str, choice: np.ndarray, human: np.ndarray, confidence: float) -> Figure:
    """Accuracy with its Wilson interval, and κ with its Landis–Koch band, of one view."""
    n, k = len(choice), int((choice == human).sum())
    if n == 0:
        return Figure(view, 0, 0, None, None, None, None, None)
    lo, hi = wilson(k, n, confidence)
    kappa = cohen_kappa(choice, human)
    # Banded after rounding off float noise: κ = 0.2 exactly is "slight", not "fair".
    return Figure(view, n, k, k / n, float(lo), float(hi), kappa, landis_koch(round(kappa, 12)))


def _views(order, item, choice, human, confidence) -> list[Figure]:
    """The four views of one group of records, sorted by (item, order)."""
    first = np.flatnonzero(np.r_[True, item[1:] != item[:-1]])
    both = first[np.diff(np.r_[first, len(item)]) == 2]
    item_choice = np.where(choice[both] == choice[both + 1], choice[both], _SPLIT)
    cases = {"both orders": (item_choice, human[both]),
             "ref_first": (choice[order == 0], human[order == 0]),
             "pert_first": (choice[order == 1], human[order == 1]),
             "presentations": (choice, human)}
    return [_figure(view, *cases[view], confidence) for view in VIEWS]


def _examples(ids) -> Unmatched:
    ids = sorted(ids)
    return Unmatched(len(ids), ids[:_EXAMPLES])


def run(run_dir: str | Path, labels_path: str | Path, confidence: float = 0.95) -> Agreement:
    """Every judge's agreement with the human labels, per labelled set (and all sets)."""
    run_dir, labels_path = Path(run_dir), Path(labels_path)
    if not labels_path.exists():
        raise NotApplicable(f"labels not found: {labels_path}")
    data_pairs = _run_pairs(run_dir)
    human_of, unknown, mismatched, read = _human(labels_path, data_pairs)
    pair_ids = sorted(data_pairs)
    gold = np.array([data_pairs[p][2] for p in pair_ids], dtype=np.int64)
    human = np.array([human_of.get(p, 0) for p in pair_ids], dtype=np.int64)
    records, p, choice, h = _records(run_dir, pair_ids, gold, human)
    judged = np.zeros(len(pair_ids), dtype=bool)
    judged[p] = True
    no_records = [pair_ids[i] for i in np.flatnonzero((human > 0) & ~judged)]
    labelled_rows = np.flatnonzero(h > 0)
    judges = _judges(records.take(pa.array(labelled_rows)), choice[labelled_rows],
                     h[labelled_rows], confidence)
    return Agreement(str(run_dir), str(labels_path), read, int((judged & (human > 0)).sum()),
                     _examples(unknown), _examples(mismatched), _examples(no_records),
                     int((judged & (human == 0)).sum()), judges, confidence)


def _judges(records: pa.Table, choice: np.ndarray, human: np.ndarray,
            confidence: float) -> list[JudgeAgreement]:
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
    judge, pset, item, order, choice, human = (x[by] for x in (judge, pset, item, order, choice, human))
    out = []
    for j in range(len(jids)):
        a, b = np.searchsorted(judge, [j, j + 1])
        bounds = a + np.searchsorted(pset[a:b], np.arange(len(sets) + 1))
        per_set = [SetAgreement(bare_name(sets[s]),
                                _views(order[x:y], item[x:y], choice[x:y], human[x:y], confidence))
                   for s, (x, y) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)) if y > x]
        if len(per_set) > 1:  # an item lies in one set: the judge's slice is sorted by item too
            per_set.append(SetAgreement(ALL_SETS, _views(order[a:b], item[a:b], choice[a:b],
                                                         human[a:b], confidence)))
        out.append(JudgeAgreement(records["judge"][int(by[a])].as_py(), jids[j], per_set))
    return out


def line(f: Figure) -> str:
    """One figure as a reviewer reads it: acc 0.94 [0.91, 0.96], κ 0.71 (substantial), n 300,
    both orders."""
    if f.n == 0:
        return f"acc –, κ –, n 0, {f.view}"
    return (f"acc {fmt(f.accuracy)} [{fmt(f.lo)}, {fmt(f.hi)}], κ {fmt(f.kappa)} ({f.band}), "
            f"n {f.n}, {f.view}")


def _unmatched(what: str, u: Unmatched) -> str:
    more = ", …" if u.count > len(u.examples) else ""
    return f"  {what}: {u.count}" + (f" ({', '.join(u.examples)}{more})" if u.count else "")


def text(agreement: Agreement) -> str:
    """The agreement as plain text: the label accounting first, then one block per judge."""
    a = agreement
    out = [
        f"Agreement with human labels: run {a.run_dir}, labels {a.labels}",
        f"  labels read: {a.labels_read}; matched to judged pairs: {a.matched}",
        _unmatched("unknown items (no labelled pair of the run)", a.unknown),
        _unmatched("mismatched (other outputs than the run's)", a.mismatched),
        _unmatched("labels with no records in the run", a.no_records),
        f"  judged pairs without a label: {a.unlabelled}",
        f"Wilson {a.confidence:.0%} intervals. Ties and invalid replies never agree with a "
        "human label; κ keeps them as categories of their own. Both orders: an item agrees "
        "when both its verdicts do.",
    ]
    if not a.judges:
        out.append("No judge has a record for a pair with a human label.")
    for judge in a.judges:
        out.append(f"\n{judge.judge} ({judge.judge_id[:8]})")
        for s in judge.sets:
            out.append(f"  {s.set}")
            out.extend(f"    {line(f)}" for f in s.figures)
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
