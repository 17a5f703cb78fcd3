"""CBC: cross-lingual bias calibration of judges audited over the same languages and tasks.

A *task* is an item family: the ``perturbation`` column (``truncate``, ``shuffle``, …, or
``pairs:<set>``). A record scores 1 when its verdict is the reference, else 0 (ties and invalid
replies count 0, as in docs/metrics.md's accuracy). Averaging records gives the cell means
``scores[j, l, t]`` (judge × language × task); only the language × task cells where every judge
has records are kept, so that judges are always compared on the same tasks.

Model (two-way with a judge × language interaction, tasks as an additive effect)::

    score[j, l, t] = mu + a_j + b_l + c_t + (ab)_jl + noise

``(ab)_jl`` is judge j's language-specific bias. With ``M[j, l]`` the mean over a language's
tasks, the sum-to-zero estimate is the double-centred matrix
``I = M − row means − column means + grand mean`` (task effects are the same for every judge in
a language, so they cancel in the column centring); the calibrated scores are ``M − I``.
Within the data the calibrated ranking of every language is then the judges' overall
ranking, by construction — so the honest check is out of sample:

- **Held-out agreement.** B times (seeded ``numpy`` Generator) the tasks are split into a
  train half and a held-out half; I is estimated on train; on held-out, each language ranks
  the judges by raw means and by calibrated means (held-out means − train I). Cross-language
  rank agreement = the mean Kendall τ_b over all pairs of languages' judge rankings; its mean
  and percentile interval over replicates are reported for raw and calibrated, and for their
  paired difference (the gain).
- **Rank reversals.** For judges i, k ranked i > k overall (mean over languages) and each
  language l, the per-task differences ``x_t = score[i,l,t] − score[k,l,t]`` are tested with a
  one-sided paired t-test (tasks are the units), H1: mean x < 0, i.e. l reverses the overall
  order. A sign test on tasks cannot reach p < 2^-T (1/32 with the default five
  perturbations), too weak to survive any multiplicity correction; the t-test uses the size
  of the differences, not just their signs. Its Student-t tail is exact for integer degrees
  of freedom (a finite series, no SciPy). All p-values are adjusted together with
  Benjamini–Hochberg; reversals with adjusted p < alpha are reported. The overall order is
  taken as given (it is estimated from all languages, this one included).

Everything is vectorised over judges, languages, tasks and replicates; no Python loop runs
per record (``cell_means`` groups with ``np.bincount``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import NotApplicable, UserError
from ..score import codes
from ..score.pointwise import pairwise_only
from ..score.stats import Interval, benjamini_hochberg, fmt, fmt_interval, pair_signs, rounded, t_sf
from ..store import compact

# The columns ``run`` reads from each run directory.
COLUMNS = ["judge_id", "judge", "item_id", "order", "lang", "perturbation", "verdict"]


class Dropped(msgspec.Struct, frozen=True):
    """A language × task cell left out because some judges have no records there."""

    lang: str
    task: str
    missing: list[str]  # the judges without records in the cell


class Cells(NamedTuple):
    judges: list[str]      # display labels, unique (a name, with its id's prefix if shared)
    langs: list[str]
    tasks: list[str]
    scores: np.ndarray     # [judge, lang, task]; NaN where the cell was not kept
    dropped: list[Dropped]


class Agreement(msgspec.Struct, frozen=True):
    """Held-out cross-language rank agreement (mean pairwise Kendall τ_b) over task splits."""

    replicates: int
    seed: int
    confidence: float
    train_tasks: int
    heldout_tasks: int
    raw: Interval
    calibrated: Interval
    gain: Interval               # calibrated − raw, paired within each replicate
    valid_replicates: int        # replicates where τ_b was defined for some language pair


class Reversal(msgspec.Struct, frozen=True):
    """In ``lang``, ``better`` (ranked above ``worse`` overall) scores below it."""

    lang: str
    better: str
    worse: str
    overall: float               # better − worse, mean over languages
    in_lang: float               # better − worse in this language (< 0: reversed)
    tasks: int
    t: float | None
    p: float
    p_adjusted: float


Matrix = list[list[float | None]]


class Calibration(msgspec.Struct, frozen=True):
    """CBC's result. Matrices are [judge][language], in the order of ``judges`` and ``langs``."""

    judges: list[str]
    judge_ids: list[str]
    langs: list[str]
    tasks: list[str]
    cells: int                   # language × task cells kept (every judge has data there)
    dropped: list[Dropped]
    raw: Matrix                  # mean over the language's tasks
    interaction: Matrix          # the estimated language-specific bias (ab)_jl
    calibrated: Matrix           # raw − interaction
    overall: list[float]         # each judge's mean over languages
    ranks_raw: list[list[int]]   # rank of each judge in each language, 1 = best
    ranks_calibrated: list[list[int]]
    noise_sd: float | None       # residual SD of a cell score (complete grids only)
    interaction_se: float | None  # standard error of one interaction entry (complete grids)
    agreement_in_sample: float | None  # raw cross-language agreement on all tasks
    agreement: Agreement | None  # None with fewer than two tasks
    alpha: float
    reversal_tests: int
    reversals: list[Reversal]


# --- statistics -------------------------------------------------------------------------

def rank_agreement(scores: np.ndarray) -> np.ndarray:
    """Mean Kendall τ_b over all pairs of languages' judge rankings.

    ``scores`` has shape (..., judges, languages); the result has shape (...). Languages with
    a NaN score, and pairs where τ_b is undefined (a language ranks every judge equal), are
    left out of the mean; NaN where no pair is left.
    """
    s = pair_signs(scores, -2)  # (..., pairs of judges, languages)
    with np.errstate(invalid="ignore", divide="ignore"):
        num = np.einsum("...pl,...pm->...lm", s, s)
        norm = np.einsum("...pl,...pl->...l", s, s)
        tau = num / np.sqrt(norm[..., :, None] * norm[..., None, :])
    a, b = np.triu_indices(scores.shape[-1], 1)
    return _nanmean(tau[..., a, b], axis=-1)


def _nanmean(x: np.ndarray, axis, keepdims: bool = False) -> np.ndarray:
    """np.nanmean without the warning for all-NaN slices (they are expected: NaN marks a
    language without tasks in a split, or a pair of languages where τ_b is undefined)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(x, axis=axis, keepdims=keepdims)


def interaction(M: np.ndarray) -> np.ndarray:
    """The judge × language interaction of ``M`` (..., judges, languages) by double centring:
    I = M − row means − column means + grand mean, so that I sums to zero over judges and
    over languages. Languages whose column is all NaN (no data) are left out of the means
    and stay NaN."""
    M = np.asarray(M, dtype=np.float64)
    row = _nanmean(M, axis=-1, keepdims=True)
    col = _nanmean(M, axis=-2, keepdims=True)
    grand = _nanmean(M, axis=(-2, -1), keepdims=True)
    return M - row - col + grand


def _ranks(S: np.ndarray) -> np.ndarray:
    """Rank of each judge (rows) within each language (columns): 1 + the number of judges
    strictly above it, so ties share the better rank. Rounded first, so that values equal
    up to floating-point error tie."""
    S = np.round(S, 10)
    return 1 + (S[None, :, :] > S[:, None, :]).sum(axis=1)


def _language_means(scores: np.ndarray, tasks: np.ndarray) -> np.ndarray:
    """Mean over the tasks selected by each row of ``tasks`` (B, T), of each judge × language:
    (B, J, L); NaN where a language has no selected task with data."""
    available = np.isfinite(scores[0]).astype(np.float64)  # (L, T): the same for every judge
    weights = tasks.astype(np.float64)
    sums = np.einsum("jlt,bt->bjl", np.nan_to_num(scores), weights)
    counts = weights @ available.T  # (B, L)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts[:, None, :] > 0, sums / counts[:, None, :], np.nan)


def _interval(values: np.ndarray, confidence: float) -> Interval:
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return Interval(None, None, None, 0)
    tail = (1 - confidence) / 2
    lo, hi = np.quantile(finite, [tail, 1 - tail])
    return Interval(rounded(finite.mean()), rounded(lo), rounded(hi), int(finite.size))


def task_split_agreement(scores: np.ndarray, replicates: int = 200, seed: int = 0,
                         confidence: float = 0.95) -> tuple[Agreement, np.ndarray, np.ndarray]:
    """Held-out agreement under random train / held-out splits of the tasks (see the module
    docstring). Returns the summary and the per-replicate raw and calibrated agreements.

    The train half gets the larger half of the tasks (it estimates J·L interaction terms).
    A language with no task on either side of a split is left out of that replicate, from
    the raw and the calibrated rankings alike, so the two are always compared on the same
    languages.
    """
    n_tasks = scores.shape[2]
    if n_tasks < 2:
        raise ValueError("a train / held-out split needs at least two tasks")
    n_train = n_tasks - n_tasks // 2
    rng = np.random.default_rng(seed)
    order = np.argsort(rng.random((replicates, n_tasks)), axis=1)
    train = np.zeros((replicates, n_tasks), dtype=bool)
    np.put_along_axis(train, order[:, :n_train], True, axis=1)
    fitted = interaction(_language_means(scores, train))
    heldout = _language_means(scores, ~train)
    heldout = np.where(np.isnan(fitted), np.nan, heldout)
    raw = rank_agreement(heldout)
    calibrated = rank_agreement(heldout - fitted)
    summary = Agreement(
        replicates=replicates, seed=seed, confidence=confidence, train_tasks=n_train,
        heldout_tasks=n_tasks - n_train, raw=_interval(raw, confidence),
        calibrated=_interval(calibrated, confidence),
        gain=_interval(calibrated - raw, confidence),
        valid_replicates=int(np.isfinite(raw).sum()),
    )
    return summary, raw, calibrated


def reversal_tests(scores: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One-sided paired t-tests of rank reversals, for every pair of judges i < k and language.

    Returns (overall[pair], in_lang[pair, lang], t[pair, lang], p[pair, lang]) where the
    differences are oriented as (overall better − overall worse): a negative ``in_lang`` is
    a reversal and p tests it (H0: mean per-task difference ≥ 0). p is NaN where no test can
    be made: the two judges tie overall, or the language has fewer than two tasks.
    """
    M = _nanmean(scores, axis=2)
    overall_mean = M.mean(axis=1)
    i, k = np.triu_indices(scores.shape[0], 1)
    sign = np.sign(overall_mean[i] - overall_mean[k])
    diff = (scores[i] - scores[k]) * (sign[:, None, None])  # (pairs, L, T), better − worse
    n = np.isfinite(diff).sum(axis=2)
    mean = _nanmean(diff, axis=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        sd = np.nanstd(diff, axis=2, ddof=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        # sd = 0: every task differs by the same amount; t is ±inf (or 0 when no difference).
        t = np.where(sd > 0, mean * np.sqrt(n) / sd, np.sign(mean) * np.inf)
        t = np.where((sd == 0) & (mean == 0), 0.0, t)
    p = t_sf(-t, np.maximum(n - 1, 1))  # P(T < t): small when better − worse is negative
    testable = (sign != 0)[:, None] & (n >= 2)
    p = np.where(testable, p, np.nan)
    return np.abs(overall_mean[i] - overall_mean[k]), mean, np.where(testable, t, np.nan), p


def _noise(scores: np.ndarray) -> tuple[float | None, float | None]:
    """Residual SD of a cell score and the standard error of one interaction entry.

    Under the model the estimated interaction is C_J Ē C_L (C: centring matrices, Ē the
    judge × language means of the noise, each of variance σ²/T), whose entries have variance
    σ²/T·(1 − 1/J)(1 − 1/L). σ² is estimated from the residuals of the fitted model,
    score − M[j, l] − task mean + grand mean, on (JL − 1)(T − 1) degrees of freedom. Judge ×
    task effects count as noise here (they inflate σ̂ but cancel from I): conservative.
    Complete grids only (None when any cell was dropped, or with one task).
    """
    J, L, T = scores.shape
    if T < 2 or not np.isfinite(scores).all():
        return None, None
    M = scores.mean(axis=2, keepdims=True)
    residual = scores - M - scores.mean(axis=(0, 1), keepdims=True) + scores.mean()
    sigma = math.sqrt(float((residual ** 2).sum()) / ((J * L - 1) * (T - 1)))
    return sigma, sigma * math.sqrt((1 - 1 / J) * (1 - 1 / L) / T)


# --- the calibration ----------------------------------------------------------------------



def _matrix(a: np.ndarray) -> Matrix:
    return [[rounded(v) for v in row] for row in a]


def calibrate(scores: np.ndarray, judges: Sequence[str], langs: Sequence[str],
              tasks: Sequence[str], *, dropped: Sequence[Dropped] = (),
              judge_ids: Sequence[str] | None = None, replicates: int = 200, seed: int = 0,
              confidence: float = 0.95, alpha: float = 0.05) -> Calibration:
    """CBC on cell means ``scores[judge, lang, task]``.

    A language × task cell with a NaN for any judge is left out for every judge (judges
    are compared on the same tasks). Needs two judges and two languages; the held-out
    agreement also needs two tasks (``agreement`` is None otherwise).
    """
    scores = np.array(scores, dtype=np.float64)
    J, L, T = scores.shape
    if (len(judges), len(langs), len(tasks)) != (J, L, T):
        raise ValueError(f"scores has shape {scores.shape}, labels give {(len(judges), len(langs), len(tasks))}")
    if J < 2 or L < 2:
        raise ValueError("CBC needs at least two judges and two languages")
    complete = np.isfinite(scores).all(axis=0)  # (L, T)
    scores[:, ~complete] = np.nan
    if not complete.any(axis=1).all():
        empty = [lang for lang, ok in zip(langs, complete.any(axis=1), strict=True) if not ok]
        raise ValueError(f"no task has every judge's data in: {', '.join(empty)}")

    M = _nanmean(scores, axis=2)
    inter = interaction(M)
    calibrated = M - inter
    noise_sd, se = _noise(scores)
    agreement = task_split_agreement(scores, replicates, seed, confidence)[0] if T >= 2 and replicates else None

    gap, in_lang, t, p = reversal_tests(scores)
    q = benjamini_hochberg(p)
    overall = M.mean(axis=1)
    i, k = np.triu_indices(J, 1)
    reversals = []
    for pair, lang in zip(*np.nonzero(q < alpha), strict=True):
        a, b = (i[pair], k[pair]) if overall[i[pair]] >= overall[k[pair]] else (k[pair], i[pair])
        reversals.append(Reversal(
            lang=langs[lang], better=judges[a], worse=judges[b], overall=rounded(gap[pair]),
            in_lang=rounded(in_lang[pair, lang]), tasks=int(np.isfinite(scores[0, lang]).sum()),
            t=rounded(t[pair, lang]), p=float(f"{p[pair, lang]:.3g}"), p_adjusted=float(f"{q[pair, lang]:.3g}")))
    reversals.sort(key=lambda r: (r.p_adjusted, r.lang, r.better, r.worse))

    return Calibration(
        judges=list(judges), judge_ids=list(judge_ids) if judge_ids is not None else list(judges),
        langs=list(langs), tasks=list(tasks), cells=int(complete.sum()), dropped=list(dropped),
        raw=_matrix(M), interaction=_matrix(inter), calibrated=_matrix(calibrated),
        overall=[rounded(v) for v in overall],
        ranks_raw=_ranks(M).tolist(), ranks_calibrated=_ranks(calibrated).tolist(),
        noise_sd=rounded(noise_sd), interaction_se=rounded(se),
        agreement_in_sample=rounded(rank_agreement(M)), agreement=agreement,
        alpha=alpha, reversal_tests=int(np.isfinite(p).sum()), reversals=reversals,
    )


# --- from run directories -----------------------------------------------------------------

def _plain(column: pa.ChunkedArray) -> pa.Array:
    """The column as one plain (not dictionary-encoded) array: run directories' Parquet files
    each bring their own dictionaries."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    return array.dictionary_decode() if pa.types.is_dictionary(array.type) else array


def _encode(column) -> tuple[np.ndarray, list[str]]:
    """Integer codes of a string column in sorted order of its values, and the values (the
    column decoded first: run directories' Parquet files each bring their own dictionaries)."""
    return codes(_plain(column))


def judge_labels(table: pa.Table) -> dict[str, str]:
    """judge_id → display label: the judge's name (from its first record), followed by its
    id's first 8 characters where two judge ids share a name."""
    codes, ids = _encode(table["judge_id"])
    _, first = np.unique(codes, return_index=True)
    names = _plain(table["judge"]).take(pa.array(first)).to_pylist()
    shared = {n for n in names if names.count(n) > 1}
    return {jid: f"{name} ({jid[:8]})" if name in shared else name
            for jid, name in zip(ids, names, strict=True)}


def cell_means(table: pa.Table) -> Cells:
    """Judge × language × task means of the record scores (1 if the verdict is the
    reference, else 0), keeping only the language × task cells where every judge has
    records; the others are listed in ``dropped``, and languages or tasks left without any
    kept cell disappear. Judges are sorted by label, languages and tasks by code."""
    labels = judge_labels(table)
    j_codes, ids = _encode(table["judge_id"])
    order = sorted(range(len(ids)), key=lambda x: (labels[ids[x]], ids[x]))
    position = np.empty(len(ids), dtype=np.int64)
    position[order] = np.arange(len(ids))
    judges = [labels[ids[x]] for x in order]
    lang, langs = _encode(table["lang"])
    task, tasks = _encode(table["perturbation"])
    correct = pc.fill_null(pc.equal(_plain(table["verdict"]), "reference"), False)
    correct = correct.to_numpy(zero_copy_only=False).astype(np.float64)

    J, L, T = len(judges), len(langs), len(tasks)
    cell = (position[j_codes] * L + lang) * T + task
    n = np.bincount(cell, minlength=J * L * T).reshape(J, L, T)
    hits = np.bincount(cell, weights=correct, minlength=J * L * T).reshape(J, L, T)
    has = n > 0
    kept = has.all(axis=0)
    dropped = [Dropped(langs[a], tasks[b], [judges[j] for j in np.flatnonzero(~has[:, a, b])])
               for a, b in np.argwhere(has.any(axis=0) & ~kept)]
    keep_l, keep_t = kept.any(axis=1), kept.any(axis=0)
    scores = np.where(kept, hits / np.maximum(n, 1), np.nan)[:, keep_l][:, :, keep_t]
    return Cells(judges, [x for x, ok in zip(langs, keep_l, strict=True) if ok],
                 [x for x, ok in zip(tasks, keep_t, strict=True) if ok], scores, dropped)


def _load(run_dir: Path) -> pa.Table:
    if not (run_dir / "run.yaml").exists():
        raise NotApplicable(f"{run_dir} is not a babelrun run directory (no run.yaml)")
    from ..store.rundir import read_run_info, without_escalation_judges

    data = pairwise_only(without_escalation_judges(compact.load(run_dir, COLUMNS), read_run_info(run_dir)))
    return pa.table({name: _plain(data[name]) for name in COLUMNS})


def merge(tables: Sequence[pa.Table]) -> pa.Table:
    """One table of the runs' counted records, one row per key (judge_id, item_id, order):
    a judge audited in two run directories counts each of its verdicts once (the first run
    given wins)."""
    data = pa.concat_tables(tables)
    data = data.append_column("_row", pa.array(np.arange(data.num_rows)))
    first = data.group_by(["judge_id", "item_id", "order"], use_threads=False).aggregate([("_row", "min")])
    rows = np.sort(first["_row_min"].to_numpy())
    return data.take(pa.array(rows)).drop_columns(["_row"])


def run(run_dirs: Sequence[Path], replicates: int = 200, seed: int = 0,
        confidence: float = 0.95, alpha: float = 0.05) -> Calibration:
    """CBC over the judges of one or more run directories (each may hold different judges)."""
    if not run_dirs:
        raise UserError("calibrate needs at least one run directory")
    data = merge([_load(Path(d)) for d in run_dirs])
    if data.num_rows == 0:
        raise NotApplicable("no counted records in " + ", ".join(str(d) for d in run_dirs))
    cells = cell_means(data)
    if len(cells.judges) < 2:
        raise NotApplicable(f"calibration compares judges: found only {', '.join(cells.judges)}")
    if len(cells.langs) < 2:
        raise NotApplicable(f"calibration needs two languages where every judge has records; found "
                        f"{', '.join(cells.langs) or 'none'} ({len(cells.dropped)} language × task "
                        "cells dropped)")
    ids = {label: jid for jid, label in judge_labels(data).items()}
    return calibrate(cells.scores, cells.judges, cells.langs, cells.tasks, dropped=cells.dropped,
                     judge_ids=[ids[j] for j in cells.judges], replicates=replicates, seed=seed,
                     confidence=confidence, alpha=alpha)


# --- the report ---------------------------------------------------------------------------

def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(row) + " |" for row in rows)]


def _score_table(c: Calibration, matrix: Matrix, signed: bool = False,
                 overall: bool = True) -> list[str]:
    header = ["judge", *c.langs] + (["mean"] if overall else [])
    rows = [[judge, *(fmt(v, signed) for v in matrix[j])] + ([fmt(c.overall[j])] if overall else [])
            for j, judge in enumerate(c.judges)]
    return _table(header, rows)


def _ranking(c: Calibration, ranks: list[list[int]], lang: int) -> str:
    """Judges best first; '>' between ranks, '=' within a tie."""
    by_rank = sorted(range(len(c.judges)), key=lambda j: (ranks[j][lang], c.judges[j]))
    out = c.judges[by_rank[0]]
    for prev, j in zip(by_rank, by_rank[1:], strict=False):
        out += (" = " if ranks[j][lang] == ranks[prev][lang] else " > ") + c.judges[j]
    return out


def _p(x: float) -> str:
    """A p-value to three digits; the t tail is exact only to about 1e-15."""
    return "< 1e-15" if x < 1e-15 else f"{x:.3g}"


def text(c: Calibration) -> str:
    """The calibration as a Markdown report: the score tables, the rankings, the held-out
    agreement and the significant reversals."""
    lines = ["# Cross-lingual bias calibration (CBC)", "",
             f"{len(c.judges)} judges × {len(c.langs)} languages × {len(c.tasks)} tasks "
             f"({', '.join(c.tasks)}); {c.cells} language × task cells where every judge has records.",
             "Score: the share of presentations whose verdict is the reference (ties and invalid "
             "replies count 0), averaged over a language's tasks."]
    if c.dropped:
        shown = [f"{d.lang}/{d.task} (no records from {', '.join(d.missing)})" for d in c.dropped[:12]]
        more = f", and {len(c.dropped) - 12} more" if len(c.dropped) > 12 else ""
        lines += ["", f"Dropped {len(c.dropped)} cells where not every judge has records: "
                  + "; ".join(shown) + more + "."]
    se = f"; standard error of an entry ≈ {fmt(c.interaction_se)}" if c.interaction_se is not None else ""
    lines += ["", "## Raw scores", "", *_score_table(c, c.raw),
              "", "## Interaction: each judge's language-specific bias", "",
              f"The raw scores double-centred: sums to zero over judges and over languages{se}.", "",
              *_score_table(c, c.interaction, signed=True, overall=False),
              "", "## Calibrated scores (raw − interaction)", "", *_score_table(c, c.calibrated),
              "", "## Rankings per language (best first)", "",
              *_table(["language", "raw", "calibrated"],
                      [[lang, _ranking(c, c.ranks_raw, li), _ranking(c, c.ranks_calibrated, li)]
                       for li, lang in enumerate(c.langs)]),
              "", "Within these data every calibrated ranking is the judges' overall ranking, by "
              "construction; the held-out agreement below tests whether that generalises."]
    lines += ["", "## Cross-language rank agreement", ""]
    a = c.agreement
    if a is None:
        lines += ["Not computed: a train / held-out split needs at least two tasks."]
    else:
        pct = f"{a.confidence:.0%}"
        lines += [f"Mean pairwise Kendall τ_b between the languages' judge rankings on held-out "
                  f"tasks: {a.replicates} random splits ({a.train_tasks} tasks to estimate the "
                  f"interaction, {a.heldout_tasks} held out; seed {a.seed}; {a.valid_replicates} "
                  f"splits where τ_b was defined). Mean [{pct} percentile interval]:", "",
                  *_table(["rankings", "agreement"],
                          [["raw", fmt_interval(a.raw)], ["calibrated", fmt_interval(a.calibrated)],
                           ["gain (calibrated − raw)", fmt_interval(a.gain, signed=True)]]),
                  "", f"Raw agreement on all tasks (in sample): {fmt(c.agreement_in_sample)}."]
    lines += ["", f"## Rank reversals (Benjamini–Hochberg adjusted p < {c.alpha:g})", "",
              f"{c.reversal_tests} one-sided paired t-tests over tasks: does a language reverse "
              "two judges' overall order?", ""]
    if c.reversals:
        lines += _table(["language", "better overall", "worse overall", "overall gap",
                         "gap in language", "tasks", "p", "adjusted p"],
                        [[r.lang, r.better, r.worse, fmt(r.overall), fmt(r.in_lang, signed=True),
                          str(r.tasks), _p(r.p), _p(r.p_adjusted)] for r in c.reversals])
    else:
        lines += ["None."]
    return "\n".join(lines) + "\n"
