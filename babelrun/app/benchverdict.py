"""What a judge's bench levels say (``benchjudge``'s measurements): the concurrency to use
and what binds.

What binds, in the order it is checked:

- **the rate limit**: a level that drew 429s from the provider, or whose throughput reaches
  90 % of the manifest's ``rate_limit.rpm``: more concurrency only brings more refusals, so
  climbing stops there. A provider's limit is reported as what it let through: the most
  successful calls that finished inside any sliding ``WINDOW_S`` (60 s) of the bench — never a
  short burst scaled up to a minute. A bench shorter than the window says so: its count is
  what one window let through, a floor of the limit; ``--seconds 60`` measures a whole one.
  The manifest's own pacing is known: its rate is the one measured at the limiting level;
- **the top level**: the best throughput was at the highest level tried and the last
  doubling still gained ``gain`` (10 %) or more — throughput is still growing;
- **concurrency**: throughput levels off; the advice is the smallest level that reaches 90 %
  of the best throughput seen. Comparing with the best rather than with the next level
  makes the advice stable: two identical judges get the same.
"""

from __future__ import annotations

from typing import Literal

import msgspec

NEAR_BEST = 0.9  # a level within 10 % of the best throughput is as good as the best
WINDOW_S = 60.0  # a provider's requests-per-minute window
Binding = Literal["concurrency", "rate_limit", "top_level"]


class Level(msgspec.Struct, frozen=True):
    concurrency: int
    calls: int  # presentations finished at this level (ok or failed)
    failed: int
    rate_limited: int  # 429 replies (each was retried under the policy)
    retries: int
    seconds: float
    calls_per_s: float  # ok presentations per second
    tokens_per_s: float
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None


class JudgeBench(msgspec.Struct, frozen=True):
    judge: str
    judge_id: str
    levels: list[Level]
    recommended: int
    binding: Binding
    observed_rpm: float | None  # the calls/min at which the rate limit held, when it binds
    advice: str
    measured_s: float | None = None  # seconds from the first to the last successful call of the bench


def levels(cap: int) -> list[int]:
    out = [1]
    while out[-1] * 2 <= cap:
        out.append(out[-1] * 2)
    return out


def knee(results: list[Level], near: float = NEAR_BEST) -> int:
    """The smallest level whose throughput is within ``near`` of the best level's."""
    best = max(lv.calls_per_s for lv in results)
    return next(lv.concurrency for lv in results if lv.calls_per_s >= near * best)


def still_growing(results: list[Level], gain: float = 0.10) -> bool:
    """Whether the last doubling tried still gained ``gain`` or more throughput."""
    if len(results) < 2:
        return True
    before, last = results[-2], results[-1]
    return last.calls_per_s >= before.calls_per_s * (1 + gain)


def window_count(stamps: list[float], window: float = WINDOW_S) -> int:
    """The most of ``stamps`` (seconds, any order) inside any half-open span of ``window``
    seconds: the calls a sliding-window rate limit let through at its busiest."""
    times = sorted(stamps)
    best = start = 0
    for end, t in enumerate(times):
        while times[start] <= t - window:
            start += 1
        best = max(best, end - start + 1)
    return best


def limited(level: Level, rpm: float | None) -> bool:
    """The provider refused calls (429), or the manifest's own rpm pacing is reached."""
    return level.rate_limited > 0 or (rpm is not None and level.calls_per_s * 60 >= NEAR_BEST * rpm)


def verdict(name: str, results: list[Level], rpm: float | None,
            stamps: list[float] | None = None) -> tuple[int, Binding, float | None, str]:
    """(recommended concurrency, what binds, observed rpm, one line of advice). ``stamps``:
    when each successful call of the bench finished (seconds), for a provider's limit."""
    if limited(results[-1], rpm):
        top = results[-1]
        level = knee(results)
        if top.rate_limited:  # the provider's limit: count what its window let through
            times = stamps or []
            observed = float(window_count(times))
            span = max(times) - min(times) if times else 0.0
            how = (f"at most {observed:g} calls finished in any {WINDOW_S:g} s window of {span:.0f} s measured"
                   if span >= WINDOW_S else
                   f"{observed:g} calls got through in {span:.1f} s, shorter than a {WINDOW_S:g} s window: what one "
                   f"window let through, a floor of the limit (--seconds {WINDOW_S:g} measures a whole window)")
            return level, "rate_limit", observed, (
                f"the rate limit binds, not concurrency: {top.rate_limited} replies were 429 (rate limited) at "
                f"concurrency {top.concurrency}; {how}; set `concurrency: {level}` and "
                f"`rate_limit.rpm: {int(observed)}` for judge {name!r}")
        observed = round(max(lv.calls_per_s for lv in results) * 60, 1)
        return level, "rate_limit", observed, (
            f"the rate limit binds, not concurrency: the manifest's rate_limit.rpm ({rpm:g}) paces it at "
            f"concurrency {top.concurrency}, about {observed:g} calls/min get through; set `concurrency: {level}` "
            f"and `rate_limit.rpm: {int(observed)}` for judge {name!r}")
    level = knee(results)
    if level == results[-1].concurrency and still_growing(results):
        return level, "top_level", None, (
            f"throughput was still growing at the top level tried ({level}): try "
            f"--max-concurrency {2 * level}; at least `concurrency: {level}` for judge {name!r}")
    return level, "concurrency", None, (
        f"throughput stops growing at concurrency {level}: set `concurrency: {level}` for judge {name!r}")
