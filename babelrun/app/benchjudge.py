"""``babelrun bench-judge``: how much concurrency a judge can use, and what limits it.

For each judge of a manifest, requests drawn from the plan's real ones (a sample of
``sample``, cycled) run at concurrency 1, 2, 4, … up to a cap through the same call pipeline
as an audit (the account's limits, retries with their backoff, the backend), each level for
at least ``seconds`` and at least ``min_calls`` calls, so that a level's throughput is a rate
and not the luck of a few calls. The backend's connection pool is sized for the largest
level, so the pool never caps a level (``concurrency`` in the manifest does not apply here:
finding it is the point). Per level: calls/s, tokens/s, latency percentiles, 429 replies,
retries and failed calls. What the levels say (the concurrency to use, what binds) is ``benchverdict``.

Nothing is written to any run directory: these calls are spent on measuring.
"""

from __future__ import annotations

import itertools
import time

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
from .benchverdict import JudgeBench, Level, levels, limited, verdict


def sample_requests(plan: Plan, spec: JudgeSpec, n: int) -> list[JudgeRequest]:
    protocol = Judging.of(spec)
    return [protocol.request(item, key, sample)
            for item, key, sample in itertools.islice(plan.pending(judge_id(spec), protocol.keys), n)]


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
            if limited(results[-1], account.rpm):
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
