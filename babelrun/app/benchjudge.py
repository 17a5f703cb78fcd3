"""``babelrun bench-judge``: how much concurrency a judge can use, and what limits it.

For each judge of a manifest, requests drawn from the plan's real ones (a sample of
``sample``, cycled) run at concurrency 1, 2, 4, … up to a cap through the same call pipeline
as an audit (the account's limits, retries with their backoff, the backend), each level for
at least ``seconds`` and at least ``min_calls`` calls, so that a level's throughput is a rate
and not the luck of a few calls. The backend's connection pool is sized for the largest
level, so the pool never caps a level (``concurrency`` in the manifest does not apply here:
finding it is the point). Per level: calls/s, tokens/s, latency percentiles, 429 replies,
retries and failed calls.

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

Nothing is written to any run directory: these calls are spent on measuring.
"""

from __future__ import annotations

import itertools
import time
from typing import Literal

import anyio
import msgspec
import numpy as np

from .. import judges
from ..engine import JudgeRunner, JudgeState, limits, runner
from ..engine.limits import CallLimits
from ..judges import JudgeRequest, judge_id
from ..judges.protocol import Judging
from ..plan import Plan
from ..spec import JudgeSpec, Manifest

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


def sample_requests(plan: Plan, spec: JudgeSpec, n: int) -> list[JudgeRequest]:
    protocol = Judging.of(spec)
    return [protocol.request(item, key)
            for item, key in itertools.islice(plan.pending(judge_id(spec), protocol.keys), n)]


class _Budget(msgspec.Struct):
    """When a level has measured enough: ``seconds`` and ``min_calls`` both reached, or
    ``max_calls`` taken."""

    seconds: float
    min_calls: int
    max_calls: int
    started: float = 0.0
    taken: int = 0
    finished: int = 0

    def take(self) -> bool:
        elapsed = time.perf_counter() - self.started
        if self.taken >= self.max_calls or (elapsed >= self.seconds and self.finished >= self.min_calls):
            return False
        self.taken += 1
        return True


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


def _percentile(latencies: list[float], q: float) -> float | None:
    return round(float(np.percentile(latencies, q)), 2) if latencies else None


async def _level(run: JudgeRunner, requests: list[JudgeRequest], concurrency: int, budget: _Budget,
                 stamps: list[float] | None = None) -> Level:
    state = run.state
    before = (state.rate_limited, state.retries)
    latencies: list[float] = []
    tokens = failed = 0
    cycle = itertools.cycle(requests)

    async def worker() -> None:
        nonlocal tokens, failed
        while budget.take():
            record = await run.call(next(cycle))
            budget.finished += 1
            if record.status == "ok":
                if stamps is not None:
                    stamps.append(time.perf_counter())
                latencies.append(record.latency_ms or 0.0)
                tokens += (record.tokens_in or 0) + (record.tokens_out or 0)
            else:
                failed += 1

    async def watch(scope: anyio.CancelScope) -> None:
        # Refused by the provider and past the level's time: the calls left are waiting out a
        # Retry-After (a minute, for a per-minute limit) and would measure nothing more.
        while True:
            await anyio.sleep(0.05)
            if state.rate_limited > before[0] and time.perf_counter() - budget.started >= budget.seconds:
                scope.cancel()
                return

    budget.started = time.perf_counter()
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch, scope)
            async with anyio.create_task_group() as workers:
                for _ in range(concurrency):
                    workers.start_soon(worker)
            tg.cancel_scope.cancel()  # every worker done: stop watching
    elapsed = time.perf_counter() - budget.started
    return Level(concurrency, budget.finished, failed, state.rate_limited - before[0], state.retries - before[1],
                 round(elapsed, 3), round(len(latencies) / elapsed, 2), round(tokens / elapsed, 1),
                 _percentile(latencies, 50), _percentile(latencies, 95), _percentile(latencies, 99))


def _limited(level: Level, rpm: float | None) -> bool:
    """The provider refused calls (429), or the manifest's own rpm pacing is reached."""
    return level.rate_limited > 0 or (rpm is not None and level.calls_per_s * 60 >= NEAR_BEST * rpm)


def verdict(name: str, results: list[Level], rpm: float | None,
            stamps: list[float] | None = None) -> tuple[int, Binding, float | None, str]:
    """(recommended concurrency, what binds, observed rpm, one line of advice). ``stamps``:
    when each successful call of the bench finished (seconds), for a provider's limit."""
    if _limited(results[-1], rpm):
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


async def bench_judge(spec: JudgeSpec, account: limits.Account, requests: list[JudgeRequest], cap: int,
                      seed: int, *, seconds: float = 5.0, min_calls: int = 32) -> JudgeBench:
    judge = judges.build(spec, seed)
    state = JudgeState(spec.name, judge.judge_id, 0, 0)
    tried = levels(cap)
    # One connection per call in flight at the largest level: the pool never caps a level.
    run = runner(judge, account, state, CallLimits(tried[-1], tried[-1], False))
    results: list[Level] = []
    stamps: list[float] = []
    try:
        for c in tried:
            budget = _Budget(seconds, max(min_calls, 2 * c), max(min_calls, 2 * c) * 1000)
            results.append(await _level(run, requests, c, budget, stamps))
            if _limited(results[-1], account.rpm):
                break  # past the rate limit, more concurrency only brings more refusals
    finally:
        await judge.aclose()
    recommended, binding, observed, advice = verdict(spec.name, results, account.rpm, stamps)
    measured = round(max(stamps) - min(stamps), 3) if stamps else None
    return JudgeBench(spec.name, judge.judge_id, results, recommended, binding, observed, advice, measured)


def run(manifest: Manifest, *, sample: int = 64, cap: int = 64, only: str | None = None,
        seconds: float = 5.0, min_calls: int = 32) -> list[JudgeBench]:
    plan = Plan.from_manifest(manifest)
    specs = [s for s in manifest.judges if only is None or s.name == only]
    accounts = limits.accounts(specs)

    async def go() -> list[JudgeBench]:
        out = []
        for spec in specs:
            requests = sample_requests(plan, spec, sample)
            out.append(await bench_judge(spec, accounts[spec.name], requests, cap, manifest.seed,
                                         seconds=seconds, min_calls=min_calls))
        return out

    return anyio.run(go)


def table(bench: JudgeBench) -> str:
    head = ("concurrency", "calls", "calls/s", "tokens/s", "p50 ms", "p95 ms", "p99 ms", "429s", "retries",
            "failed")
    rows = [head] + [
        tuple("-" if v is None else str(v) for v in
              (lv.concurrency, lv.calls, lv.calls_per_s, lv.tokens_per_s, lv.p50_ms, lv.p95_ms, lv.p99_ms,
               lv.rate_limited, lv.retries, lv.failed))
        for lv in bench.levels
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = [f"judge {bench.judge} ({bench.judge_id})"]
    lines += ["  " + "  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    lines.append(f"  {bench.advice}")
    return "\n".join(lines)
