"""Two runs' verdicts on the same (item, order) keys, compared: each metric's change with a
paired item-clustered bootstrap interval, an exact McNemar test, and what the provider said
it served. ``babelrun diff`` (``analyses/drift.py``) compares whole runs with it; composite
judges compare themselves with their base judge through ``compare_tables``.

Records are matched by (item, order): the item by the 60 bits of its content-hash id that
``judgements.parquet`` keeps as ``item_key``. An item's rows in both runs are resampled
together, so an interval reflects the difference's own variance (smaller than the two runs'
when their verdicts correlate). Seeded from ``seed``, the judge pair and the language: the
same records give the same output.
"""

from __future__ import annotations

import hashlib

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..core import languages
from . import metrics, pointwise
from .cards import Card, Change, LanguageDrift, McNemar
from .columnar import SCORING_COLUMNS, score
from .columns import lookup
from .stats import mcnemar_exact, rounded

METRICS = metrics.COMPARED  # every metric the registry marks compared, in its comparison order
COLUMNS = [*SCORING_COLUMNS, "item_id", "served_model", "fingerprint"]
ALL = "all"


class Served(msgspec.Struct, frozen=True):
    """What the provider said it served: the distinct values in each run's records."""

    model_a: list[str]
    model_b: list[str]
    fingerprint_a: list[str]
    fingerprint_b: list[str]
    changed: bool


class JudgeDrift(msgspec.Struct, frozen=True):
    judge_a: str
    judge_id_a: str
    judge_b: str
    judge_id_b: str
    matched: int  # presentations in both runs
    only_a: int
    only_b: int
    served: Served
    overall: LanguageDrift | None
    languages: list[LanguageDrift]


class Drift(msgspec.Struct, frozen=True):
    run_a: str
    run_b: str
    judges: list[JudgeDrift]
    unmatched: list[str]  # judges that could not be paired, and why
    bootstrap: int
    confidence: float
    seed: int
    # Pointwise judges' scale drift (score.pointwise.drift); absent when neither run has one.
    pointwise: list[pointwise.PointwiseDrift] | msgspec.UnsetType = msgspec.UNSET


class Matched(msgspec.Struct):
    """One run's records, with each row's judge code and (item, order) key."""

    data: pa.Table
    ids: list[str]
    names: list[str]
    judge: np.ndarray
    key: np.ndarray


def of_table(data: pa.Table) -> Matched:
    data = data.unify_dictionaries()  # one dictionary per column
    ids = sorted(set(pc.unique(data["judge_id"]).to_pylist()))
    judge = lookup(data["judge_id"], ids)
    _, first = np.unique(judge, return_index=True)  # a row of each judge, for its name
    names = data["judge"].take(pa.array(first, type=pa.int64())).to_pylist()
    order = lookup(data["order"], metrics.ORDER_CODES).astype(np.uint64)
    key = (data["item_key"].to_numpy() << np.uint64(1)) | order
    return Matched(data, ids, names, judge, key)


def pair_judges(a: Matched, b: Matched) -> tuple[list[tuple[int, int]], list[str]]:
    """Which judge of A goes with which of B: the only one of each, or the same name; the
    rest as lines saying why not."""
    if len(a.ids) == 1 and len(b.ids) == 1:
        return [(0, 0)], []
    pairs, notes = [], []
    for name in sorted(set(a.names) | set(b.names)):
        ja = [i for i, n in enumerate(a.names) if n == name]
        jb = [i for i, n in enumerate(b.names) if n == name]
        if len(ja) == 1 and len(jb) == 1:
            pairs.append((ja[0], jb[0]))
        elif not ja or not jb:
            notes.append(f"judge '{name}' is only in run {'A' if ja else 'B'}")
        else:
            notes.append(f"judge '{name}' has {len(ja)} judge ids in run A and {len(jb)} in run B "
                         "(settings changed within a run directory): not compared")
    return pairs, notes


def _served(a: Matched, ja: int, b: Matched, jb: int) -> Served:
    def values(run: Matched, j: int, column: str) -> list[str]:
        rows = run.data[column].take(pa.array(np.flatnonzero(run.judge == j)))
        return sorted(v for v in pc.unique(rows).to_pylist() if v is not None)

    ma, mb = values(a, ja, "served_model"), values(b, jb, "served_model")
    fa, fb = values(a, ja, "fingerprint"), values(b, jb, "fingerprint")
    return Served(ma, mb, fa, fb, ma != mb or fa != fb)


def _seed(*key: object) -> np.random.Generator:
    digest = hashlib.blake2b("\x1f".join(map(str, key)).encode(), digest_size=8).digest()
    return np.random.default_rng(int.from_bytes(digest))


def _paired(ta: np.ndarray, tb: np.ndarray, replicates: int, confidence: float,
            rng: np.random.Generator) -> dict[str, tuple[float, float]]:
    """Percentile interval of each metric's change B − A, resampling matched items.

    An item's rows in both runs are drawn together: the joint rows (A's counts beside B's)
    take few distinct values, so a replicate is multinomial counts over the distinct joint
    rows (as in ``metrics.bootstrap``) and two matrix products, one per run.
    """
    n = len(ta)
    if replicates == 0 or n == 0:
        return {}
    rows, pattern_of = metrics.patterns(np.hstack([ta, tb]))
    counts = np.bincount(pattern_of, minlength=len(rows))
    weights = rng.multinomial(n, counts / n, size=replicates).astype(np.float64)
    width = ta.shape[1]
    sa, sb = metrics.from_sums(weights @ rows[:, :width]), metrics.from_sums(weights @ rows[:, width:])
    tail = (1.0 - confidence) / 2.0
    out: dict[str, tuple[float, float]] = {}
    for name in METRICS:
        d = sb[name] - sa[name]
        d = d[np.isfinite(d)]
        if d.size:
            lo, hi = np.quantile(d, [tail, 1.0 - tail])
            out[name] = (float(lo), float(hi))
    return out


def _language(lang: str, ta: np.ndarray, tb: np.ndarray, correct_a: np.ndarray, correct_b: np.ndarray,
              card_a: Card, card_b: Card, replicates: int, confidence: float,
              rng: np.random.Generator) -> LanguageDrift:
    """One language's (or the overall) changes from its item tables and correctness."""
    pa_, pb_ = metrics.from_sums(ta.sum(axis=0)), metrics.from_sums(tb.sum(axis=0))
    ci = _paired(ta, tb, replicates, confidence, rng)
    changes = []
    for m in METRICS:
        delta = rounded(pb_[m] - pa_[m])
        lo, hi = ci.get(m, (None, None)) if delta is not None else (None, None)
        changes.append(Change(m, getattr(card_a, m), getattr(card_b, m), delta, rounded(lo), rounded(hi)))
    b, c = int((correct_a & ~correct_b).sum()), int((~correct_a & correct_b).sum())
    name = "all languages" if lang == ALL else languages.name(lang)
    return LanguageDrift(lang, name, len(ta), int(ta[:, 0].sum()), changes,
                         McNemar(b, c, mcnemar_exact(b, c)))


def compare(a: Matched, ja: int, b: Matched, jb: int, replicates: int, confidence: float,
             seed: int) -> JudgeDrift:
    """Match one judge pair's records, score each run's matched subset, and compare."""
    rows_a, rows_b = np.flatnonzero(a.judge == ja), np.flatnonzero(b.judge == jb)
    _, ia, ib = np.intersect1d(a.key[rows_a], b.key[rows_b], assume_unique=True, return_indices=True)
    sub_a, sub_b = a.data.take(pa.array(rows_a[ia])), b.data.take(pa.array(rows_b[ib]))
    head = (a.names[ja], a.ids[ja], b.names[jb], b.ids[jb], len(ia), len(rows_a) - len(ia),
            len(rows_b) - len(ib), _served(a, ja, b, jb))
    if len(ia) == 0:
        return JudgeDrift(*head, None, [])
    scored_a, scored_b = (score(sub.select(SCORING_COLUMNS), [], replicates=replicates, confidence=confidence,
                                seed=seed).judges for sub in (sub_a, sub_b))
    if not scored_a or not scored_b:  # matched on labelled pairs alone: no degradation card to compare
        return JudgeDrift(*head, None, [])
    cards_a, cards_b = scored_a[0], scored_b[0]

    # Both subsets hold the same (item, order) keys, sorted by key: sort once more by
    # (language, key) and the rows line up, each item's records adjacent, in both runs.
    langs = sorted(set(pc.unique(sub_a["lang"]).to_pylist()))
    lang = lookup(sub_a["lang"], langs)
    key = a.key[rows_a[ia]]
    by = np.lexsort((key, lang))
    lang, key = lang[by], key[by]
    starts = np.flatnonzero(np.r_[True, (key[1:] >> np.uint64(1)) != (key[:-1] >> np.uint64(1))])
    order = (key & np.uint64(1)).astype(np.int64)
    verdicts = [lookup(sub["verdict"], metrics.VERDICTS)[by] for sub in (sub_a, sub_b)]
    ref_len, pert_len = (sub_a[c].to_numpy()[by] for c in ("ref_len", "pert_len"))
    ta, tb = (metrics.item_table(starts, metrics.presentation_code(order, v, ref_len, pert_len))
              for v in verdicts)
    correct_a, correct_b = verdicts[0] == 0, verdicts[1] == 0
    item_lang = lang[starts]

    def drift(code: str, items: np.ndarray, records: np.ndarray, card_a: Card, card_b: Card) -> LanguageDrift:
        rng = _seed(seed, a.ids[ja], b.ids[jb], code)
        return _language(code, ta[items], tb[items], correct_a[records], correct_b[records],
                         card_a, card_b, replicates, confidence, rng)

    everything = np.ones(len(lang), dtype=bool)
    overall = drift(ALL, np.ones(len(starts), dtype=bool), everything, cards_a.overall, cards_b.overall)
    card_of_a = {lc.lang: lc.card for lc in cards_a.languages}
    card_of_b = {lc.lang: lc.card for lc in cards_b.languages}
    per_lang = [drift(code, item_lang == i, lang == i, card_of_a[code], card_of_b[code])
                for i, code in enumerate(langs)]
    return JudgeDrift(*head, overall, per_lang)


def compare_tables(a: pa.Table, b: pa.Table, *, replicates: int = 1000, confidence: float = 0.95,
                   seed: int = 0) -> list[LanguageDrift]:
    """B − A for two tables of one judge each (``COLUMNS``), on their shared (item, order)
    keys: overall first, then per language; empty when they share none."""
    if a.num_rows == 0 or b.num_rows == 0:
        return []
    ra, rb = of_table(a), of_table(b)
    compared = compare(ra, 0, rb, 0, replicates, confidence, seed)
    return [compared.overall, *compared.languages] if compared.overall else []


