"""``babelrun bench-judge``: how much concurrency a judge can use.

For each judge of a manifest, runs a small sample of the plan's real requests at
concurrency 1, 2, 4, … up to a cap, through the same path as an audit (the provider
account's limits, retries, the backend), and reports calls/s, tokens/s and latency
percentiles per level. The knee — the first level after which doubling the concurrency
gains less than ``gain`` (10 %) more throughput — is the setting to use for the audit.
Nothing is written to any run directory: these calls are spent on measuring.
"""

from __future__ import annotations

import itertools
import time

import anyio
import msgspec
import numpy as np

from .. import judges
from ..engine import FixedConcurrency, JudgeRunner, JudgeState, limits
from ..judges import JudgeRequest, judge_id
from ..judges.protocol import judging
from ..plan import Plan
from ..spec import JudgeSpec, Manifest


class Level(msgspec.Struct, frozen=True):
    concurrency: int
    calls: int
    failed: int
    calls_per_s: float
    tokens_per_s: float
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None


class JudgeBench(msgspec.Struct, frozen=True):
    judge: str
    judge_id: str
    levels: list[Level]
    recommended: int


def levels(cap: int) -> list[int]:
    out = [1]
    while out[-1] * 2 <= cap:
        out.append(out[-1] * 2)
    return out


def knee(results: list[Level], gain: float = 0.10) -> int:
    """The first level after which doubling gains less than ``gain`` more calls/s."""
    for here, nxt in itertools.pairwise(results):
        if nxt.calls_per_s < here.calls_per_s * (1 + gain):
            return here.concurrency
    return results[-1].concurrency


def sample_requests(plan: Plan, spec: JudgeSpec, n: int) -> list[JudgeRequest]:
    how = judging(spec, judge_id(spec))
    out: list[JudgeRequest] = []
    for item in plan.items():
        for order in how.keys:
            out.append(how.request(item, order))
            if len(out) == n:
                return out
    return out


async def _level(runner: JudgeRunner, requests: list[JudgeRequest], concurrency: int) -> Level:
    latencies: list[float] = []
    tokens = failed = 0
    queue = iter(requests)

    async def worker() -> None:
        nonlocal tokens, failed
        for request in queue:  # shared iterator: each request is taken once
            record = await runner.call(request)
            if record.status == "ok":
                latencies.append(record.latency_ms or 0.0)
                tokens += (record.tokens_in or 0) + (record.tokens_out or 0)
            else:
                failed += 1

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(concurrency):
            tg.start_soon(worker)
    elapsed = time.perf_counter() - started
    lat = np.asarray(latencies) if latencies else None

    def pct(q: float) -> float | None:
        return None if lat is None else round(float(np.percentile(lat, q)), 2)

    return Level(concurrency, len(requests), failed, round(len(latencies) / elapsed, 2),
                 round(tokens / elapsed, 1), pct(50), pct(95), pct(99))


async def bench_judge(spec: JudgeSpec, account: limits.Account, requests: list[JudgeRequest],
                      cap: int, seed: int) -> JudgeBench:
    judge = judges.build(spec, seed)
    state = JudgeState(spec.name, judge.judge_id, len(requests), 0)
    runner = JudgeRunner(judge, account, FixedConcurrency(), state)
    try:
        results = [await _level(runner, requests, c) for c in levels(cap)]
    finally:
        await judge.aclose()
    return JudgeBench(spec.name, judge.judge_id, results, knee(results))


def run(manifest: Manifest, *, sample: int = 64, cap: int = 64, only: str | None = None) -> list[JudgeBench]:
    plan = Plan.from_manifest(manifest)
    specs = [s for s in manifest.judges if only is None or s.name == only]
    accounts = limits.accounts(specs)

    async def go() -> list[JudgeBench]:
        out = []
        for spec in specs:
            requests = sample_requests(plan, spec, sample)
            out.append(await bench_judge(spec, accounts[spec.name], requests, cap, manifest.seed))
        return out

    return anyio.run(go)


def table(bench: JudgeBench) -> str:
    head = ("concurrency", "calls/s", "tokens/s", "p50 ms", "p95 ms", "p99 ms", "failed")
    rows = [head] + [
        tuple("-" if v is None else str(v) for v in
              (lv.concurrency, lv.calls_per_s, lv.tokens_per_s, lv.p50_ms, lv.p95_ms, lv.p99_ms, lv.failed))
        for lv in bench.levels
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = [f"judge {bench.judge} ({bench.judge_id})"]
    lines += ["  " + "  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    lines.append(f"  throughput stops growing at concurrency {bench.recommended}: "
                 f"set `concurrency: {bench.recommended}` for this judge")
    return "\n".join(lines)
