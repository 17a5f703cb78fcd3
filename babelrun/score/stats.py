"""Small statistics for the cards, vectorised with NumPy and SciPy-free.

- ``wilson``: the Wilson score interval of a binomial rate (k successes in n), for the
  plain rates (tie rate, invalid rate, flip rates).
- ``mcnemar_exact``: the exact (binomial) two-sided McNemar p-value from the discordant
  counts b and c of a paired comparison.
- ``binomial_tail``: the exact one-sided binomial p-value P(X >= k).
- ``cohen_kappa`` and ``landis_koch``: chance-corrected agreement of two labelings, and the
  band Landis and Koch (1977) name for it.

Each is checked against an independent implementation (statsmodels, scikit-learn) in the
tests.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import msgspec
import numpy as np

ROUND = 4  # decimals of every number in cards and analyses


def rounded(x: float | None) -> float | None:
    """``x`` to ``ROUND`` decimals; None for a missing or non-finite value. Never -0.0 (a
    rounded tiny negative): ``+ 0.0`` turns it into 0.0, which readers compare and print as 0."""
    return None if x is None or not np.isfinite(x) else round(float(x), ROUND) + 0.0


class Interval(msgspec.Struct, frozen=True):
    """A card's number: its value, interval (None where undefined) and the count behind it."""

    value: float | None
    lo: float | None
    hi: float | None
    n: int

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


def wilson(k, n, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
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
    return min(1.0, 2 * tail / 2**n)


def binomial_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p): the one-sided exact p-value of k or more events
    where a rate of p is tolerated (``babelrun check``: verdict flips beyond the noise)."""
    if k <= 0:
        return 1.0
    if p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    return min(1.0, sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1)))


def cohen_kappa(a: Sequence, b: Sequence) -> float:
    """Cohen's kappa of two labelings of the same items (any hashable labels)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.size == 0:
        raise ValueError("two labelings of the same, non-empty set of items are needed")
    labels, codes = np.unique(np.concatenate([a, b]), return_inverse=True)
    ca, cb = codes[: a.size], codes[a.size:]
    k = len(labels)
    table = np.bincount(ca * k + cb, minlength=k * k).reshape(k, k) / a.size
    observed = np.trace(table)
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
