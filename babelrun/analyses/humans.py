"""Human–human agreement for ``babelrun agree``: the ceiling a judge's agreement is read
against, linear in the number of labels.

Every figure comes from one pass over the labels and the per-pair label counts (a pairs ×
classes table), never from a loop over pairs of annotators:

- **pairwise agreement**: of all pairs of labels given to one pair, the share that agree,
  pooled over the pairs (Σ n_c(n_c − 1) / Σ n(n − 1)) — MT-Bench's human–human agreement;
  also without the label pairs where either label is a tie (its "without tie");
- **each annotator against the others' majority** (the others' counts: the pair's counts less
  the annotator's own label): agreement and Cohen's κ, from one 3 × 3 table per annotator;
- **Fleiss' κ** over the pairs every annotator labelled, and **Krippendorff's α** (nominal)
  over every pair with two or more labels, both from the counts;
- **annotator pairs**: agreement and κ between each two of the ``LISTED`` annotators with
  the most labels that labelled a pair in common (the only quadratic part, bounded by ``LISTED``).

The output is bounded whatever the number of annotators: ``annotators``, ``vs_rest`` and
``pairwise`` list at most ``LISTED`` annotators (the most labels first, then by name);
``n_annotators`` counts them all.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec
import numpy as np

from ..score import stats
from ..score.stats import cohen_kappa, rounded

CLASSES = ("1", "2", "tie")
LISTED = 10  # annotators listed one by one (and their pairs): the output's bound


class AnnotatorPair(msgspec.Struct, frozen=True):
    a: str
    b: str
    n: int  # pairs both labelled
    agreement: float | None
    kappa: float | None


class AnnotatorVsRest(msgspec.Struct, frozen=True):
    annotator: str
    n: int  # pairs it labelled where the others have a majority
    agreement: float | None
    kappa: float | None


class Humans(msgspec.Struct, frozen=True):
    """Human–human agreement: the ceiling a judge's agreement is read against (module docstring)."""

    annotators: list[str]  # the listed ones: at most LISTED, those with the most labels, by name
    pairs_with_several: int  # pairs with two or more labels
    pairwise: list[AnnotatorPair]
    vs_rest: list[AnnotatorVsRest]
    mean_pairwise_agreement: float | None  # pooled over all pairs of labels on one pair
    fleiss_kappa: float | None  # over the pairs every annotator labelled
    fleiss_n: int
    krippendorff_alpha: float | None  # nominal, over every pair with two or more labels
    alpha_n: int
    n_annotators: int = 0  # every annotator, listed or not
    labels: int = 0  # labels counted
    label_pairs: int = 0  # pairs of labels on one pair (the pooled agreement's denominator)
    agreement_no_ties: float | None = None  # pooled, leaving out label pairs with a tie
    label_pairs_no_ties: int = 0


class Codes(msgspec.Struct, frozen=True):
    """Labels as three aligned arrays: pair index, annotator index, class code (CLASSES)."""

    pair: np.ndarray
    annotator: np.ndarray
    label: np.ndarray
    annotators: list[str]
    n_pairs: int


def codes(votes: Mapping[str, Mapping[str, str]]) -> Codes:
    """``votes`` (pair id → {annotator: label}) as arrays, in one pass."""
    index: dict[str, int] = {}
    code = {c: i for i, c in enumerate(CLASSES)}
    pair, annotator, label = [], [], []
    for p, (_, v) in enumerate(votes.items()):
        for a, x in v.items():
            pair.append(p)
            annotator.append(index.setdefault(a, len(index)))
            label.append(code[x])
    return Codes(np.asarray(pair, dtype=np.int64), np.asarray(annotator, dtype=np.int64),
                 np.asarray(label, dtype=np.int64), list(index), len(votes))


def humans(votes: Mapping[str, Mapping[str, str]]) -> Humans | None:
    """Human–human agreement of labels with two or more annotators (None with fewer)."""
    return from_codes(codes(votes))


def _kappas(tables: np.ndarray) -> np.ndarray:
    """Cohen's κ of each of a stack of k × k tables (NaN for an empty one)."""
    n = tables.sum(axis=(1, 2)).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        po = np.trace(tables, axis1=1, axis2=2) / n
        pe = (tables.sum(axis=2) * tables.sum(axis=1)).sum(axis=1) / (n * n)
        kappa = (po - pe) / (1 - pe)
    return np.where(pe == 1, np.where(po == 1, 1.0, 0.0), kappa)


def _vs_rest(c: Codes, counts: np.ndarray, listed: np.ndarray) -> list[AnnotatorVsRest]:
    """Each listed annotator against the others' majority on the pairs it labelled."""
    k = len(CLASSES)
    others = counts[c.pair] - np.eye(k, dtype=np.int64)[c.label]  # labels × classes
    top = others.max(axis=1)
    unique = (others == top[:, None]).sum(axis=1) == 1
    majority = np.where(unique & (top > 0), others.argmax(axis=1), -1)
    keep = majority >= 0
    cells = c.annotator[keep] * k * k + c.label[keep] * k + majority[keep]
    tables = np.bincount(cells, minlength=len(c.annotators) * k * k).reshape(-1, k, k)
    kappas = _kappas(tables[listed])
    out = []
    for j, a in enumerate(listed):
        n = int(tables[a].sum())
        agreement = float(np.trace(tables[a]) / n) if n else None
        out.append(AnnotatorVsRest(c.annotators[a], n, rounded(agreement), rounded(kappas[j]) if n else None))
    return out


def _pairwise(c: Codes, listed: np.ndarray) -> list[AnnotatorPair]:
    """Agreement and κ between each two listed annotators, over the pairs both labelled."""
    slot = np.full(len(c.annotators), -1, dtype=np.int64)
    slot[listed] = np.arange(len(listed))
    mine = slot[c.annotator] >= 0
    grid = np.full((c.n_pairs, len(listed)), -1, dtype=np.int64)  # pairs × listed annotators
    grid[c.pair[mine], slot[c.annotator[mine]]] = c.label[mine]
    out = []
    for i in range(len(listed)):
        for j in range(i + 1, len(listed)):
            both = (grid[:, i] >= 0) & (grid[:, j] >= 0)
            x, y = grid[both, i], grid[both, j]
            n = int(both.sum())
            if not n:
                continue  # two listed annotators who never labelled the same pair: nothing to show
            out.append(AnnotatorPair(c.annotators[listed[i]], c.annotators[listed[j]], n,
                                     rounded(float((x == y).mean())), rounded(cohen_kappa(x, y))))
    return out


def from_codes(c: Codes) -> Humans | None:
    """Human–human agreement from the label arrays (module docstring); None with fewer than
    two annotators or no pair labelled twice."""
    k = len(CLASSES)
    counts = np.bincount(c.pair * k + c.label, minlength=c.n_pairs * k).reshape(c.n_pairs, k)
    n = counts.sum(axis=1)
    several = counts[n >= 2]
    if len(c.annotators) < 2 or not len(several):
        return None
    agreeing = (several * (several - 1)).sum()
    total = (several.sum(axis=1) * (several.sum(axis=1) - 1)).sum()
    decisive = several[:, :2]
    d_total = (decisive.sum(axis=1) * (decisive.sum(axis=1) - 1)).sum()
    per_annotator = np.bincount(c.annotator, minlength=len(c.annotators))
    order = sorted(range(len(c.annotators)), key=lambda a: (-per_annotator[a], c.annotators[a]))
    listed = np.array(sorted(order[:LISTED], key=lambda a: c.annotators[a]), dtype=np.int64)
    full = counts[n == len(c.annotators)]
    fleiss = stats.fleiss_kappa(full) if len(full) else None
    return Humans([c.annotators[a] for a in listed], len(several), _pairwise(c, listed), _vs_rest(c, counts, listed),
                  rounded(float(agreeing / total)) if total else None, rounded(fleiss), len(full),
                  rounded(stats.krippendorff_alpha_nominal(several)), len(several),
                  n_annotators=len(c.annotators), labels=int(len(c.label)), label_pairs=int(total // 2),
                  agreement_no_ties=rounded(float((decisive * (decisive - 1)).sum() / d_total)) if d_total else None,
                  label_pairs_no_ties=int(d_total // 2))
