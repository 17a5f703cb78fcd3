"""``diff --fail-if-worse`` between two runs of a sampled judge: each run's verdict of a
presentation is one draw, so two runs of an unchanged judge disagree on about 2f(1 − f) of
them. The gate needs no self-flip baseline for that: its paired item bootstrap resamples
items with both runs' draws, so the interval of B − A carries the draws' own variance, and
McNemar's b and c are alike under no change. Two runs of a judge flipping 0.1 of its answers:
the gate alarms on few of 20 unchanged pairs; a judge that turned 30 % of its right answers
wrong is caught on each."""

from __future__ import annotations

import numpy as np

from babelrun.analyses import drift
from babelrun.core.records import Record
from babelrun.score.paired import Drift, compare, of_table
from babelrun.store import compact

ITEMS = 150
FLIP = 0.1
ORDERS = ("ref_first", "pert_first")


def _run(right: np.ndarray, rng: np.random.Generator):
    """One run: each presentation's verdict a fresh draw around its base (right or not)."""
    flips = rng.random(right.shape) < FLIP
    now = right ^ flips
    recs = [Record(judge_id="j", item_id=f"i{i}", order=o, status="ok", judge="J", kind="text",
                   lang="en" if i % 2 else "fr", ref_id=f"i{i}", perturbation="p", severity=0.3,
                   ref_len=100 + i % 7, pert_len=100 + i % 5,
                   verdict="reference" if now[i, k] else "perturbed")
            for i in range(ITEMS) for k, o in enumerate(ORDERS)]
    return of_table(compact.FirstOk()(compact.table(recs)))  # with item_key, as the Parquet file has it


def _alarms(seed: int, worse_share: float) -> bool:
    rng = np.random.default_rng(seed)
    base = rng.random((ITEMS, 2)) < 0.8
    changed = base & ~(rng.random(base.shape) < worse_share)  # right answers turned wrong
    a, b = _run(base, rng), _run(changed, rng)
    judged = compare(a, 0, b, 0, replicates=400, confidence=0.95, seed=seed)
    return bool(drift.worse(Drift("A", "B", [judged], [], 400, 0.95, seed)))


def test_two_runs_of_an_unchanged_sampled_judge_rarely_alarm_and_a_worse_one_is_caught():
    unchanged = [_alarms(seed, 0.0) for seed in range(20)]
    assert sum(unchanged) <= 2, unchanged  # the gate's two metrics, each at its own 95 %
    worse = [_alarms(100 + seed, 0.3) for seed in range(10)]
    assert all(worse), worse
