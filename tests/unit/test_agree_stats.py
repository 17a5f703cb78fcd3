"""The agreement statistics of ``babelrun agree`` and ``drift`` against independent
implementations: Cohen's kappa (scikit-learn), the Landis-Koch bands, Wilson intervals and the
exact McNemar test (statsmodels). (The commands on whole audits are e2e/test_agree_drift.py.)"""


import math

import numpy as np
import pytest

from babelrun.score.stats import cohen_kappa, landis_koch, mcnemar_exact, wilson


def test_cohen_kappa_matches_sklearn_on_random_labelings():
    from sklearn.metrics import cohen_kappa_score

    rng = np.random.default_rng(0)
    for _ in range(150):
        n, k = int(rng.integers(2, 60)), int(rng.integers(2, 6))
        a = rng.integers(0, k, n)
        b = np.where(rng.random(n) < rng.random(), a, rng.integers(0, k, n))  # some agreement
        if len(set(a)) == len(set(b)) == 1 and a[0] == b[0]:
            continue  # chance agreement 1: sklearn gives NaN (checked below)
        assert cohen_kappa(a, b) == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)
    # String labels with different sets on each side, as agree uses them.
    judge = ["1", "2", "tie", "invalid", "1", "2", "2", "1"]
    human = ["1", "2", "1", "2", "2", "2", "1", "1"]
    assert cohen_kappa(judge, human) == pytest.approx(cohen_kappa_score(judge, human), abs=1e-12)
    assert cohen_kappa(["x"] * 4, ["x"] * 4) == 1.0
    with pytest.raises(ValueError):
        cohen_kappa([], [])


def test_landis_koch_bands():
    assert [landis_koch(k) for k in (-0.1, 0.0, 0.2, 0.21, 0.4, 0.6, 0.61, 0.8, 0.81, 1.0)] == [
        "poor", "slight", "slight", "fair", "fair", "moderate", "substantial", "substantial",
        "almost perfect", "almost perfect"]


def test_wilson_matches_statsmodels():
    from statsmodels.stats.proportion import proportion_confint

    rng = np.random.default_rng(1)
    n = rng.integers(1, 500, 200)
    k = rng.integers(0, n + 1)
    k[:3], n[:3] = [0, 5, 7], [5, 5, 7]  # the edges: none and all
    for confidence in (0.90, 0.95, 0.99, 0.8):  # 0.8 takes the erf-Newton path
        lo, hi = wilson(k, n, confidence)
        ref_lo, ref_hi = proportion_confint(k, n, alpha=1 - confidence, method="wilson")
        np.testing.assert_allclose(lo, ref_lo, atol=1e-12)
        np.testing.assert_allclose(hi, ref_hi, atol=1e-12)
    lo, hi = wilson(0, 0)
    assert math.isnan(lo) and math.isnan(hi)


def test_mcnemar_exact_matches_statsmodels():
    from statsmodels.stats.contingency_tables import mcnemar

    rng = np.random.default_rng(2)
    for b, c in [*rng.integers(0, 80, (150, 2)).tolist(), (0, 7), (12, 0), (3, 3), (1, 0)]:
        ref = mcnemar([[10, b], [c, 10]], exact=True).pvalue
        assert mcnemar_exact(b, c) == pytest.approx(ref, rel=1e-9, abs=1e-300)
    assert mcnemar_exact(0, 0) == 1.0
