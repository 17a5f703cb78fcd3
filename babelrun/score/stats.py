"""Small statistics for the cards, vectorised with NumPy and SciPy-free.

- ``wilson``: the Wilson score interval of a binomial rate (k successes in n), for the
  plain rates (tie rate, invalid rate, flip rates).
- ``mcnemar_exact``: the exact (binomial) two-sided McNemar p-value from the discordant
  counts b and c of a paired comparison.
- ``binomial_tail``: the exact one-sided binomial p-value P(X >= k).
- ``cohen_kappa`` and ``landis_koch``: chance-corrected agreement of two labelings, and the
  band Landis and Koch (1977) name for it.
- ``newcombe`` and ``fisher_exact``: a difference of two rates with its hybrid score interval,
  and the two-sided Fisher exact p-value of the 2×2 table (self-preference).
- ``kendall_tau_b`` (and ``pair_signs``), ``benjamini_hochberg``, ``t_sf``: rank agreement,
  false-discovery-rate adjustment and Student's t tail, SciPy-free (calibration).
- ``Interval``, the one value-with-interval type of cards and analyses, and ``fmt`` /
  ``fmt_interval``, the one way every text rendering (analyses' text, report.md, report.html)
  prints a number.

Each is checked against an independent implementation (statsmodels, scikit-learn) in the
tests.
"""

from __future__ import annotations

import math

import msgspec
import numpy as np
from numpy.typing import ArrayLike

ROUND = 4  # decimals of every number in cards and analyses


def rounded(x: float | None) -> float | None:
    """``x`` to ``ROUND`` decimals; None for a missing or non-finite value. Never -0.0 (a
    rounded tiny negative): ``+ 0.0`` turns it into 0.0, which readers compare and print as 0."""
    return None if x is None or not np.isfinite(x) else round(float(x), ROUND) + 0.0


class Interval(msgspec.Struct, frozen=True):
    """A number of a card or an analysis: its value, interval (None where undefined) and the
    count behind it (items, presentations, pairs; for a bootstrap over replicates, the
    replicates where the statistic was defined)."""

    value: float | None
    lo: float | None
    hi: float | None
    n: int


DIGITS = 2  # decimals of every number in a text rendering (cards.json keeps ROUND)


def fmt(x: float | None, signed: bool = False, *, digits: int = DIGITS) -> str:
    """The one number formatter of every text rendering (analyses' ``text``, report.md,
    report.html). The rule: ``DIGITS`` (2) decimals, the precision a card's interval supports
    (a 95 % interval over a few hundred items is some ±0.03 wide); ``signed`` puts a ``+`` on
    positive values (changes, biases, offsets); ``–`` for a missing or non-finite value; never
    ``-0.00`` (a value that rounds to zero prints as ``0.00`` / ``+0.00``); an ASCII minus.
    p-values are not formatted here: they are shown to three significant digits where used.
    ``digits`` exists for numbers on another scale; no rendering in babelrun passes it today.
    """
    if x is None or not math.isfinite(x):
        return "–"
    value = round(float(x), digits) + 0.0
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def fmt_interval(iv: Interval | None, signed: bool = False, *, n: bool = False,
                 digits: int = DIGITS) -> str:
    """``value [lo, hi]`` through ``fmt`` (the bounds only where both are defined), with
    `` (n=…)`` when ``n``; ``–`` where there is no value."""
    if iv is None or iv.value is None:
        return "–"
    text = fmt(iv.value, signed, digits=digits)
    if iv.lo is not None and iv.hi is not None:
        text += f" [{fmt(iv.lo, signed, digits=digits)}, {fmt(iv.hi, signed, digits=digits)}]"
    return text + (f" (n={iv.n})" if n else "")


_Z = {0.90: 1.6448536269514722, 0.95: 1.959963984540054, 0.99: 2.5758293035489004}


def _z(confidence: float) -> float:
    """The two-sided normal quantile, without SciPy (Newton on erf for unlisted levels)."""
    if confidence in _Z:
        return _Z[confidence]
    p = 1 - (1 - confidence) / 2
    # Newton on erf: a few steps from a good start are exact to double precision.
    x = math.sqrt(2) * 1.0
    for _ in range(60):
        f = 0.5 * (1 + math.erf(x / math.sqrt(2))) - p
        x -= f / (math.exp(-x * x / 2) / math.sqrt(2 * math.pi))
    return x


def percentile_intervals(samples: dict[str, np.ndarray], confidence: float) -> dict[str, tuple[float, float]]:
    """Each named bootstrap sample's two-sided percentile interval at ``confidence``, over
    its finite replicates (a replicate that drew no denominator is NaN); a name with none
    is left out."""
    return percentile_rows({name: np.asarray(values).reshape(1, -1) for name, values in samples.items()},
                           confidence)[0]


def percentile_rows(samples: dict[str, np.ndarray], confidence: float) -> list[dict[str, tuple[float, float]]]:
    """``percentile_intervals`` of many bootstraps at once: ``samples[name]`` holds one row of
    replicates per bootstrap, and row c's intervals are those of row c alone."""
    tail = (1.0 - confidence) / 2.0
    levels = [tail, 1.0 - tail]
    rows = len(next(iter(samples.values()))) if samples else 0
    out: list[dict[str, tuple[float, float]]] = [{} for _ in range(rows)]
    # The rows whose replicates are all finite, every name's, in one quantile call per number
    # of replicates (a call costs ~30 µs; a card has a dozen names): the same order statistics
    # and interpolation, element by element, as a call for each.
    whole: dict[int, list[tuple[str, np.ndarray, np.ndarray]]] = {}
    for name, values in samples.items():
        finite = np.isfinite(values)
        full = finite.all(axis=1) & (values.shape[1] > 0)
        if full.any():
            whole.setdefault(values.shape[1], []).append((name, np.flatnonzero(full), values[full]))
        for c in np.flatnonzero(~full & finite.any(axis=1)).tolist():
            lo_one, hi_one = np.quantile(values[c][finite[c]], levels)
            out[c][name] = (float(lo_one), float(hi_one))
    for group in whole.values():
        lo, hi = (bound.tolist() for bound in np.quantile(np.concatenate([v for _, _, v in group]), levels, axis=1))
        at = 0
        for name, cards, _ in group:
            for c in cards.tolist():
                out[c][name] = (lo[at], hi[at])
                at += 1
    return out


def wilson(k: ArrayLike, n: ArrayLike, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval for k successes out of n (arrays broadcast). n = 0 gives NaN."""
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    z = _z(confidence)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = k / n
        denom = 1 + z * z / n
        centre = (p + z * z / (2 * n)) / denom
        half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return centre - half, centre + half


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value: under no difference, the b of b + c discordant pairs
    is Binomial(b + c, 1/2); the p-value doubles the smaller tail (capped at 1)."""
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    # Exact integer arithmetic: a float sum drifts (25 vs 26 gave 0.99999999999997).
    tail = sum(math.comb(n, i) for i in range(k + 1))
    return min(1.0, float(2 * tail / 2**n))


def binomial_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p): the one-sided exact p-value of k or more events
    where a rate of p is tolerated (``babelrun check``: verdict flips beyond the noise)."""
    if k <= 0:
        return 1.0
    if p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    return min(1.0, float(sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1))))


def cohen_kappa(a: ArrayLike, b: ArrayLike) -> float:
    """Cohen's kappa of two labelings of the same items (any hashable labels)."""
    x, y = np.asarray(a), np.asarray(b)
    if x.shape != y.shape or x.size == 0:
        raise ValueError("two labelings of the same, non-empty set of items are needed")
    labels, codes = np.unique(np.concatenate([x, y]), return_inverse=True)
    ca, cb = codes[: x.size], codes[x.size:]
    k = len(labels)
    table = np.bincount(ca * k + cb, minlength=k * k).reshape(k, k) / x.size
    observed = float(np.trace(table))
    expected = float(table.sum(axis=1) @ table.sum(axis=0))
    if expected == 1.0:
        return 1.0 if observed == 1.0 else 0.0
    return float((observed - expected) / (1 - expected))


_BANDS = ((0.0, "poor"), (0.20, "slight"), (0.40, "fair"), (0.60, "moderate"), (0.80, "substantial"),
          (1.0, "almost perfect"))


def landis_koch(kappa: float) -> str:
    """Landis & Koch's name for a kappa: <0 poor, ≤.20 slight, ≤.40 fair, ≤.60 moderate,
    ≤.80 substantial, above almost perfect."""
    if kappa < 0:
        return "poor"
    for upper, name in _BANDS[1:]:
        if kappa <= upper:
            return name
    return "almost perfect"


# --- two rates (self-preference) -------------------------------------------------------------

def fisher_exact(k1: int, n1: int, k2: int, n2: int) -> float:
    """Two-sided Fisher exact p-value of k1/n1 against k2/n2 (the sum of the hypergeometric
    probabilities no larger than the observed one), in exact integer arithmetic."""
    total, k = n1 + n2, k1 + k2
    if n1 == 0 or n2 == 0:
        return 1.0
    lo, hi = max(0, k - n2), min(k, n1)
    weights = {x: math.comb(n1, x) * math.comb(n2, k - x) for x in range(lo, hi + 1)}
    observed = weights[k1]
    # a relative tolerance, as R's fisher.test uses, so ties in probability count as "as extreme"
    extreme = sum(w for w in weights.values() if w * 10**7 <= observed * (10**7 + 1))
    return min(1.0, extreme / math.comb(total, k))


def fisher_greater(k1: int, n1: int, k2: int, n2: int) -> float:
    """One-sided Fisher exact p-value that the rate k1/n1 exceeds k2/n2: P(X >= k1) for X
    hypergeometric (n1 drawn of n1 + n2, k1 + k2 of them events), in exact integer arithmetic.
    ``babelrun check``: a check's verdict flips against those of the re-asks ``pin`` made."""
    total, k = n1 + n2, k1 + k2
    if n1 == 0 or k1 <= 0:
        return 1.0
    hi = min(k, n1)
    tail = sum(math.comb(n1, x) * math.comb(n2, k - x) for x in range(k1, hi + 1))
    return min(1.0, tail / math.comb(total, k))


def newcombe(k1: int, n1: int, k2: int, n2: int, confidence: float) -> Interval:
    """p1 − p2 with Newcombe's hybrid score interval (method 10) from Wilson intervals."""
    if n1 == 0 or n2 == 0:
        return Interval(None, None, None, min(n1, n2))
    p1, p2 = k1 / n1, k2 / n2
    (l1, u1), (l2, u2) = (tuple(map(float, wilson(k, n, confidence))) for k, n in ((k1, n1), (k2, n2)))
    d = p1 - p2
    lo = d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    hi = d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return Interval(round(d, 4), round(lo, 4), round(hi, 4), n1 + n2)


# --- rankings, multiple tests, t tail (calibration) ------------------------------------------

def pair_signs(x: ArrayLike, axis: int) -> np.ndarray:
    """sign(x_i − x_k) for every pair i < k along ``axis``, which becomes the pair axis:
    Kendall's τ is a correlation of these signs."""
    x = np.moveaxis(np.asarray(x, dtype=np.float64), axis, 0)
    i, k = np.triu_indices(x.shape[0], 1)
    return np.moveaxis(np.sign(x[i] - x[k]), 0, axis)


def kendall_tau_b(x_: ArrayLike, y_: ArrayLike) -> float:
    """Kendall's τ_b = (concordant − discordant) / sqrt((n0 − ties_x)(n0 − ties_y)).

    With s = sign of each pairwise difference, the numerator is Σ s_x·s_y and each factor of
    the denominator is Σ s², the pairs not tied in that variable: τ_b is the cosine of the two
    sign vectors. O(n²) memory: meant for rankings of a few dozen judges. NaN where either
    variable is constant.
    """
    x, y = np.asarray(x_, dtype=np.float64), np.asarray(y_, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1 or x.size < 2:
        raise ValueError("two 1-D sequences of the same length ≥ 2 are needed")
    sx, sy = pair_signs(x, 0), pair_signs(y, 0)
    denom = math.sqrt(float(sx @ sx) * float(sy @ sy))
    return float(sx @ sy) / denom if denom else math.nan


def benjamini_hochberg(p_: ArrayLike) -> np.ndarray:
    """Benjamini–Hochberg adjusted p-values (false discovery rate), same shape as ``p``.

    adjusted p_(i) = min over k ≥ i of m·p_(k)/k, capped at 1, for the sorted p-values.
    NaN entries (tests that could not be made) stay NaN and are not counted in m.
    """
    p = np.asarray(p_, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    finite = np.isfinite(p)
    values = p[finite]
    m = values.size
    if m == 0:
        return out
    order = np.argsort(values, kind="stable")
    scaled = values[order] * m / np.arange(1, m + 1)
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(np.minimum.accumulate(scaled[::-1])[::-1], 1.0)
    out[finite] = adjusted
    return out


def t_sf(t_: ArrayLike, df_: ArrayLike) -> np.ndarray:
    """P(T > t) for Student's t with integer ``df`` ≥ 1 (arrays broadcast).

    Exact finite series (Abramowitz & Stegun 26.7.3–4) in θ = arctan(|t|/√df):
    A = P(|T| ≤ |t|) = sin θ·Σ_{k≤(df−2)/2} c_k cos^{2k} θ for even df, and
    (2/π)(θ + sin θ cos θ·Σ_{k≤(df−3)/2} d_k cos^{2k} θ) for odd df, with c_k, d_k products
    of (2k−1)/(2k) and 2k/(2k+1). The loop runs over series terms, not over tests.
    """
    t, df = np.broadcast_arrays(np.asarray(t_, dtype=np.float64), np.asarray(df_, dtype=np.int64))
    theta = np.arctan(np.abs(t) / np.sqrt(np.maximum(df, 1)))
    sin, cos2 = np.sin(theta), np.cos(theta) ** 2
    even_sum, odd_sum = np.zeros(t.shape), np.zeros(t.shape)
    even_term, odd_term = np.ones(t.shape), np.ones(t.shape)
    for k in range(int(df.max(initial=1)) // 2 + 1):
        if k:
            even_term = even_term * cos2 * (2 * k - 1) / (2 * k)
            odd_term = odd_term * cos2 * (2 * k) / (2 * k + 1)
        even_sum += np.where(2 * k <= df - 2, even_term, 0.0)
        odd_sum += np.where(2 * k <= df - 3, odd_term, 0.0)
    within = np.where(df % 2 == 1,
                      2 / np.pi * (theta + sin * np.sqrt(cos2) * odd_sum),
                      sin * even_sum)
    out: np.ndarray = np.where(t >= 0, (1 - within) / 2, (1 + within) / 2)
    return out


# --- class-conditional agreement (agree: ties, several annotators) ---------------------------

def confusion(truth: ArrayLike, predicted: ArrayLike, classes: int) -> np.ndarray:
    """The confusion matrix of two codings in ``0..classes-1`` (rows: the truth, columns: the
    prediction). A prediction code ``>= classes`` (an invalid reply, a split) is kept in one
    extra column, so every case is counted and none is silently dropped: shape
    ``(classes, classes + 1)``."""
    t, p = np.asarray(truth, dtype=np.int64), np.minimum(np.asarray(predicted, dtype=np.int64), classes)
    out: np.ndarray = np.bincount(t * (classes + 1) + p, minlength=classes * (classes + 1)).reshape(
        classes, classes + 1)
    return out


def precision_recall_f1(table: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per class precision, recall and F1 of a confusion matrix (``confusion``'s shape: the
    extra column counts against recall only). Undefined ratios (no case predicted, or none
    true) are 0, as scikit-learn's ``zero_division=0``; F1 is 0 where precision + recall is."""
    k = table.shape[0]
    tp = np.diag(table[:, :k]).astype(np.float64)
    predicted, true = table[:, :k].sum(axis=0), table.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.where(predicted > 0, tp / np.maximum(predicted, 1), 0.0)
        recall = np.where(true > 0, tp / np.maximum(true, 1), 0.0)
        f1 = np.where(precision + recall > 0, 2 * precision * recall / np.where(
            precision + recall > 0, precision + recall, 1), 0.0)
    return precision, recall, f1


def fleiss_kappa(counts: ArrayLike) -> float:
    """Fleiss' κ of a subjects × categories table of rating counts (every subject rated by
    the same number of raters, at least 2). NaN where the chance agreement is 1."""
    c = np.asarray(counts, dtype=np.float64)
    raters = c.sum(axis=1)
    if c.ndim != 2 or c.shape[0] == 0 or not np.all(raters == raters[0]) or raters[0] < 2:
        raise ValueError("a subjects × categories table with the same number (≥ 2) of raters per subject")
    m = raters[0]
    p_j = c.sum(axis=0) / c.sum()
    p_i = ((c * c).sum(axis=1) - m) / (m * (m - 1))
    p_bar, p_e = float(p_i.mean()), float((p_j * p_j).sum())
    return math.nan if p_e == 1.0 else (p_bar - p_e) / (1 - p_e)


def krippendorff_alpha_nominal(counts: ArrayLike) -> float:
    """Krippendorff's α for nominal data from a units × categories table of value counts
    (raters may differ per unit; a unit with fewer than two values is not pairable and is
    left out). α = 1 − D_o / D_e over the coincidence matrix. NaN where D_e is 0."""
    c = np.asarray(counts, dtype=np.float64)
    m_u = c.sum(axis=1)
    c = c[m_u >= 2]
    m_u = m_u[m_u >= 2]
    if c.shape[0] == 0:
        return math.nan
    # coincidences o_ck = Σ_u n_uc (n_uk − [c = k]) / (m_u − 1)
    o = (c[:, :, None] * c[:, None, :]) / (m_u - 1)[:, None, None]
    o = o.sum(axis=0) - np.diag((c / (m_u - 1)[:, None]).sum(axis=0))
    n_c = o.sum(axis=1)
    n = n_c.sum()
    d_o = (n - np.trace(o)) / n
    d_e = (n * n - (n_c * n_c).sum()) / (n * (n - 1))
    return math.nan if d_e == 0 else float(1 - d_o / d_e)
