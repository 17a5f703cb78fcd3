"""``stats.fisher_greater``, the one-sided test ``check`` holds a sampled judge's flips to (its
flips against those of pin's re-asks), against scipy's hypergeometric tail."""

from __future__ import annotations

import pytest

from babelrun.score.stats import fisher_greater

hypergeom = pytest.importorskip("scipy.stats").hypergeom


@pytest.mark.parametrize(("k1", "n1", "k2", "n2"), [
    (18, 48, 17, 96), (23, 128, 50, 256), (48, 128, 50, 256), (9, 48, 0, 96), (0, 48, 3, 96),
    (5, 10, 5, 10), (1, 1, 0, 0), (0, 0, 4, 10), (10, 10, 10, 10), (3, 500, 40, 1000)])
def test_it_is_the_upper_hypergeometric_tail(k1, n1, k2, n2):
    expected = 1.0 if n1 == 0 or k1 == 0 else hypergeom.sf(k1 - 1, n1 + n2, k1 + k2, n1)
    assert fisher_greater(k1, n1, k2, n2) == pytest.approx(expected, rel=1e-9, abs=1e-15)


def test_more_flips_than_the_baseline_is_smaller_p_and_equal_rates_are_not_significant():
    ps = [fisher_greater(k, 128, 50, 256) for k in range(0, 129, 8)]
    assert ps == sorted(ps, reverse=True) and ps[0] == 1.0
    assert fisher_greater(25, 128, 50, 256) > 0.4  # the same rate as pin's re-asks
