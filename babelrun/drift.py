"""``babelrun diff RUN_A RUN_B``: what changed between two runs over the same items.

A judge before and after a provider update, or under two prompt versions, is audited twice
on the same manifest content; this compares the two. Records are matched by
(item, order) — the item by the 60 bits of its content-hash id that ``judgements.parquet``
keeps as ``item_key`` — within a pair of judges: the only judge of each run, or else judges
of the same name (a name with several judge ids in one run is ambiguous and left out, with
a line saying so).

Per language and overall, on the matched records only:

- every card metric of each run (accuracy, Δ, κ_ord, v, R) with its interval, from
  ``babelrun.score.score`` on each run's matched subset;
- their change B − A, with a paired item-clustered percentile bootstrap: one resampling of
  the matched items weighs both runs' item tables alike, so the interval reflects the
  difference's own variance (smaller than the two runs' when their verdicts correlate).
  Seeded from ``seed`` and the judge pair and language: the same runs give the same output;
- an exact McNemar test on per-presentation correctness (b: correct in A only, c: correct
  in B only);
- a flag when the model name or fingerprint the provider reported (their sets per run)
  changed.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import compact, languages, score
from .score import Change, LanguageDrift, McNemar, lookup, metrics
from .score.stats import mcnemar_exact, rounded

METRICS = ("accuracy", "position_bias", "order_consistency", "verbosity", "reliability")
COLUMNS = [*score.SCORING_COLUMNS, "item_id", "served_model", "fingerprint"]
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


class _Run(msgspec.Struct):
    """One run's records, with each row's judge code and (item, order) key."""

    data: pa.Table
    ids: list[str]
    names: list[str]
    judge: np.ndarray
    key: np.ndarray


def _load(run_dir: Path) -> _Run:
    from .run import read_run_info  # run scores composites through this module

    read_run_info(run_dir)  # a clear error for a folder that is no run directory
    return _of_table(compact.load(run_dir, COLUMNS))


def _of_table(data: pa.Table) -> _Run:
    data = data.unify_dictionaries()  # one dictionary per column
    ids = sorted(set(pc.unique(data["judge_id"]).to_pylist()))
    judge = lookup(data["judge_id"], ids)
    _, first = np.unique(judge, return_index=True)  # a row of each judge, for its name
    names = data["judge"].take(pa.array(first, type=pa.int64())).to_pylist()
    order = lookup(data["order"], metrics.ORDER_CODES).astype(np.uint64)
    key = (data["item_key"].to_numpy() << np.uint64(1)) | order
    return _Run(data, ids, names, judge, key)


def _pairs(a: _Run, b: _Run) -> tuple[list[tuple[int, int]], list[str]]:
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


def _served(a: _Run, ja: int, b: _Run, jb: int) -> Served:
    def values(run: _Run, j: int, column: str) -> list[str]:
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
    out = {}
    for name in METRICS:
        d = sb[name] - sa[name]
        d = d[np.isfinite(d)]
        if d.size:
            out[name] = tuple(float(q) for q in np.quantile(d, [tail, 1.0 - tail]))
    return out


def _language(lang, ta, tb, correct_a, correct_b, card_a, card_b, replicates, confidence,
              rng) -> LanguageDrift:
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


def _compare(a: _Run, ja: int, b: _Run, jb: int, replicates: int, confidence: float,
             seed: int) -> JudgeDrift:
    """Match one judge pair's records, score each run's matched subset, and compare."""
    rows_a, rows_b = np.flatnonzero(a.judge == ja), np.flatnonzero(b.judge == jb)
    _, ia, ib = np.intersect1d(a.key[rows_a], b.key[rows_b], assume_unique=True, return_indices=True)
    sub_a, sub_b = a.data.take(pa.array(rows_a[ia])), b.data.take(pa.array(rows_b[ib]))
    head = (a.names[ja], a.ids[ja], b.names[jb], b.ids[jb], len(ia), len(rows_a) - len(ia),
            len(rows_b) - len(ib), _served(a, ja, b, jb))
    if len(ia) == 0:
        return JudgeDrift(*head, None, [])
    cards_a = score.score(sub_a.select(score.SCORING_COLUMNS), [], replicates=replicates,
                          confidence=confidence, seed=seed).judges[0]
    cards_b = score.score(sub_b.select(score.SCORING_COLUMNS), [], replicates=replicates,
                          confidence=confidence, seed=seed).judges[0]

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

    def drift(code: str, items: np.ndarray, records: np.ndarray, card_a, card_b) -> LanguageDrift:
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


def run(run_a: str | Path, run_b: str | Path, *, replicates: int = 1000, confidence: float = 0.95,
        seed: int = 0) -> Drift:
    """Compare two runs' verdicts on their shared items, per judge pair and language."""
    a, b = _load(Path(run_a)), _load(Path(run_b))
    pairs, notes = _pairs(a, b)
    judges = [_compare(a, ja, b, jb, replicates, confidence, seed) for ja, jb in pairs]
    notes += [f"judges '{j.judge_a}' and '{j.judge_b}' share no (item, order): nothing to compare"
              for j in judges if j.matched == 0]
    return Drift(str(run_a), str(run_b), judges, notes, replicates, confidence, seed)


def compare_tables(a: pa.Table, b: pa.Table, *, replicates: int = 1000, confidence: float = 0.95,
                   seed: int = 0) -> list[LanguageDrift]:
    """B − A for two tables of one judge each (``COLUMNS``), on their shared (item, order)
    keys: overall first, then per language; empty when they share none."""
    if a.num_rows == 0 or b.num_rows == 0:
        return []
    ra, rb = _of_table(a), _of_table(b)
    compared = _compare(ra, 0, rb, 0, replicates, confidence, seed)
    return [compared.overall, *compared.languages] if compared.overall else []


_LABELS = {"accuracy": "accuracy", "position_bias": "position bias Δ",
           "order_consistency": "order consistency", "verbosity": "verbosity v",
           "reliability": "R"}


def _num(x: float | None, sign: bool = False) -> str:
    if x is None:
        return "–"
    x = 0.0 if abs(x) < 5e-4 else x  # no "−0.000"
    return f"{x:+.3f}".replace("-", "−") if sign else f"{x:.3f}".replace("-", "−")


def _interval(i: score.Interval) -> str:
    return f"{_num(i.value)} [{_num(i.lo)}, {_num(i.hi)}]"


def _block(d: LanguageDrift) -> list[str]:
    m = d.mcnemar
    title = d.language if d.lang == ALL else f"{d.lang} {d.language}"
    out = [f"  {title}: {d.items} items, {d.presentations} presentations; "
           f"McNemar b {m.b}, c {m.c}, p {m.p:.3g}"]
    for c in d.changes:
        out.append(f"    {_LABELS[c.metric]:<18} {_interval(c.a):<25} → {_interval(c.b):<25} "
                   f"change {_num(c.delta, True)} [{_num(c.lo, True)}, {_num(c.hi, True)}]")
    return out


def text(drift: Drift) -> str:
    """The comparison as plain text: unmatched judges, then one block per judge pair."""
    out = [f"Drift: A = {drift.run_a}, B = {drift.run_b}",
           f"Changes are B − A over matched (item, order) records; {drift.confidence:.0%} intervals: "
           f"each run's item bootstrap, and for the change a paired item bootstrap "
           f"({drift.bootstrap} replicates, seed {drift.seed}). McNemar: b correct in A only, "
           "c correct in B only."]
    out += [f"! {note}" for note in drift.unmatched]
    for j in drift.judges:
        s = j.served
        out.append(f"\n{j.judge_a} ({j.judge_id_a[:8]}) → {j.judge_b} ({j.judge_id_b[:8]}): "
                   f"{j.matched} presentations matched, {j.only_a} only in A, {j.only_b} only in B")
        if s.changed:
            out.append("  ! the provider reported another model or fingerprint")
        out.append(f"  served model {', '.join(s.model_a) or '–'} → {', '.join(s.model_b) or '–'}; "
                   f"fingerprint {', '.join(s.fingerprint_a) or '–'} → {', '.join(s.fingerprint_b) or '–'}")
        for d in ([j.overall] if j.overall else []) + j.languages:
            out.extend(_block(d))
    return "\n".join(out) + "\n"
