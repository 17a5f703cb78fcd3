"""How ``babelrun check``'s results read in a terminal: one row per judge, then one line per
judge saying what its flips were held to and by which test."""

from __future__ import annotations

from .lockfile import CheckResult


def _baseline(r: CheckResult) -> str:
    """What the judge's flips were held to, and by which test (one line)."""
    rate = r.expected_flip_rate
    if r.flip_test == "fisher":
        return (f"{r.judge}: {r.verdict_flips} of {r.answered} answers flipped, {rate:.3f} expected "
                "(the self-flip rate pin measured); one-sided Fisher exact test against pin's re-asks")
    return (f"{r.judge}: the lock records no self-flip rate (pinned by an earlier babelrun or without "
            f"--manifest): flips tested against the tolerance {rate if rate is not None else 0.05:g} "
            "(one-sided exact binomial)")


def summary(results: list[CheckResult], alpha: float) -> str:
    lines = [f"{'judge':<20} {'asked':>5} {'failed':>6} {'flips':>5} {'flip p':>8} "
             f"{'b/c':>7} {'McNemar p':>10}  verdict"]
    level = alpha / 2  # each of the two tests; the check's level is alpha
    for r in results:
        what = "ok"
        if r.drift:
            which = [f"{name} p={v:.3g}" for name, v in (("flips", r.flip_p), ("McNemar", r.mcnemar_p)) if v < level]
            what = f"DRIFT ({', '.join(which)} < {level:g})"
        if r.identity_changed:
            what = ("DRIFT; " if r.drift else "") + "IDENTITY CHANGED: " + "; ".join(r.identity_changed)
        if not r.asked and r.identity_changed:
            what += " (not asked: no call made)"
        if r.failed:
            what += f"; {r.failed} canary call(s) failed"
        if r.stopped:
            what += f"; stopped: {r.stopped}"
        lines.append(f"{r.judge[:20]:<20} {r.asked:>5} {r.failed:>6} {r.verdict_flips:>5} {r.flip_p:>8.3g} "
                     f"{f'{r.right_then_only}/{r.right_now_only}':>7} {r.mcnemar_p:>10.3g}  {what}")
    lines += [_baseline(r) for r in results if r.asked]
    return "\n".join(lines)
