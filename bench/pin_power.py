"""How often ``babelrun check`` alarms on a sampled judge, by simulation of its tests: a judge
whose base verdict is right on 80 % of presentations and departs from it with probability
``--flip`` on each ask; pinned answers drawn once, ``pin`` re-asks each presentation
``--repeats`` times, then 10 checks of the unchanged judge and 10 after ``--changed`` of its
base verdicts turned. Per design: P(at most 1 of 10 unchanged checks alarms), P(at least 9 of
10 changed checks alarm), and the per-check alarm rates, with check's own tests (one-sided
Fisher exact of the flips against pin's re-asks, exact McNemar, each at alpha / 2) and, with
``--binomial``, an exact binomial test against pin's rate taken as known, for comparison.

    python bench/pin_power.py [--canaries 24,48,64] [--seeds 2000] [--binomial]

docs/analyses.md (*What check tests*) quotes its figures for 24, 48 and 64 canaries.
"""

from __future__ import annotations

import argparse

import numpy as np

from babelrun.score.stats import binomial_tail, fisher_greater, mcnemar_exact


def _alarms(rng: np.random.Generator, base: np.ndarray, pinned: np.ndarray, x0: int, n0: int, flip: float,
            alpha: float, binomial: bool) -> int:
    out = 0
    for _ in range(10):
        now = base ^ (rng.random(base.size) < flip)
        x1 = int((now != pinned).sum())
        p = binomial_tail(x1, base.size, x0 / n0) if binomial else fisher_greater(x1, base.size, x0, n0)
        b, c = int((pinned & ~now).sum()), int((~pinned & now).sum())
        out += p < alpha / 2 or mcnemar_exact(b, c) < alpha / 2
    return out


def design(canaries: int, seeds: int, repeats: int, flip: float, changed: float, alpha: float,
           binomial: bool) -> tuple[float, float, float, float]:
    rng = np.random.default_rng(canaries)
    unchanged, after = [], []
    for _ in range(seeds):
        base = rng.random(2 * canaries) < 0.8  # both orders of each canary: 2 presentations
        pinned = base ^ (rng.random(base.size) < flip)
        again = base[None, :] ^ (rng.random((repeats, base.size)) < flip)
        x0, n0 = int((again != pinned[None, :]).sum()), repeats * base.size
        unchanged.append(_alarms(rng, base, pinned, x0, n0, flip, alpha, binomial))
        turned = base ^ (rng.random(base.size) < changed)
        after.append(_alarms(rng, turned, pinned, x0, n0, flip, alpha, binomial))
    u, a = np.array(unchanged), np.array(after)
    return float((u <= 1).mean()), float((a >= 9).mean()), float(u.mean() / 10), float(a.mean() / 10)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--canaries", default="24,48,64")
    p.add_argument("--seeds", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--flip", type=float, default=0.1)
    p.add_argument("--changed", type=float, default=0.3)
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--binomial", action="store_true", help="the flips against pin's rate as if known")
    args = p.parse_args()
    print("canaries  P(<=1 of 10 unchanged alarm)  P(>=9 of 10 changed alarm)  per check: unchanged  changed")
    for n in (int(c) for c in args.canaries.split(",")):
        quiet, caught, u, a = design(n, args.seeds, args.repeats, args.flip, args.changed, args.alpha, args.binomial)
        print(f"{n:>8}  {quiet:>28.3f}  {caught:>26.3f}  {u:>19.3f}  {a:>7.3f}", flush=True)


if __name__ == "__main__":
    main()
