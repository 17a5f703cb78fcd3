"""Coverage under optional stopping: simulated judges of known R, many seeded runs.
The confidence sequence's stopped intervals hold the truth at least at the nominal rate; a
naive stop-when-the-bootstrap-interval-clears rule does not."""

from __future__ import annotations

import numpy as np
import pytest

from babelrun.engine.stopping import Sequence, item_stats, r_of
from babelrun.score import metrics

P = (0.2 + np.sqrt(0.04 + 0.8)) / 1.6  # accuracy whose R is exactly the threshold 0.65
TRUTH = r_of(P, P**2 + (1 - P) ** 2, 0.0, 0.5)
N, RUNS, MIN = 300, 200, 30
STRATA = {0: (100, 100), 1: (100, 200), 2: (200, 100)}


def _items(rng):
    for _ in range(N):
        ref, pert = STRATA[int(rng.integers(3))]
        yield [(o, "reference" if rng.random() < P else "perturbed", ref, pert) for o in ("ref_first", "pert_first")]


def test_the_truth_is_the_threshold():
    assert TRUTH == pytest.approx(0.65)


@pytest.mark.slow
def test_stopped_confidence_sequences_cover_at_the_nominal_rate():
    covered = 0
    for run in range(RUNS):
        rng = np.random.default_rng(run)
        seq = Sequence(0.95)
        for n, pres in enumerate(_items(rng), 1):
            seq.add(item_stats(*pres))
            if n >= MIN and (seq.lo >= 0.65 or seq.hi < 0.65):
                break
        covered += seq.lo <= TRUTH <= seq.hi
    print(f"confidence sequence: {covered}/{RUNS} stopped intervals hold R")
    assert covered / RUNS >= 0.95


def _naive_table(pres_list):
    codes, starts = [], []
    for pres in pres_list:
        starts.append(len(codes))
        for order, verdict, ref, pert in pres:
            codes.append(metrics.presentation_code(np.array([0 if order == "ref_first" else 1]),
                                                   np.array([0 if verdict == "reference" else 1]),
                                                   np.array([ref]), np.array([pert]))[0])
    return metrics.item_table(np.array(starts), np.array(codes, dtype=np.uint8))


@pytest.mark.slow
def test_a_naive_bootstrap_stopping_rule_undercovers():
    covered = 0
    for run in range(RUNS):
        rng = np.random.default_rng(run)
        items = list(_items(rng))
        table = _naive_table(items)
        lo = hi = None
        for n in range(MIN, N + 1, 10):  # look every 10 items, stop when the interval clears
            rows, counts = metrics.patterns(table[:n])
            counts = np.bincount(counts, minlength=len(rows))
            ci = metrics.bootstrap(counts, rows, 200, 0.95, np.random.default_rng(run))["reliability"]
            lo, hi = ci
            if lo >= 0.65 or hi < 0.65:
                break
        covered += lo <= TRUTH <= hi
    print(f"naive bootstrap: {covered}/{RUNS} stopped intervals hold R")
    assert covered / RUNS < 0.95
