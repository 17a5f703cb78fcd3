"""The Ray executor (``executor: ray``): the plan's shards on Ray workers, one shared budget.

    driver ──┬─ budget actor per provider account  (holds a ``limits.Account``)
             └─ shard task × workers ── run.run_shard(plan.sharded(i/N))
                                        (the same async engine; its own log segments)

The driver builds the plan once and hands it to every task (``ray.put``); it holds the run
directory's lock shared, and each task locks its shard (``log.RunLock``). Records go
straight from each worker to its own segments (``s<i>of<N>-host-pid-…jsonl``) in the run
directory, which must therefore be on storage every worker can write: one machine, or a
shared file system with working ``flock``. Nothing crosses Ray but the plan, budget calls
and each shard's final counters, so the driver is no bottleneck and a dead driver loses no
verdict.

A worker that dies (killed, OOM, node lost) has its task rescheduled by Ray
(``ray.max_retries``); the new attempt takes the shard's lock, cuts its shard's torn lines
and judges only the keys without a verdict, as a resumed local audit does. The log is the
same either way, so a run started on Ray can be finished by a local ``babelrun audit`` and
vice versa. Counters of an attempt that died are lost with it (``stats.json`` covers the
attempts that finished).

Rate limits: every worker's engine asks one actor per provider account (``BudgetActor``)
for admission, so N workers together keep to the account's requests/min and tokens/min;
the actor runs the very ``limits.Account`` a local run uses. A Retry-After pause reaches
every worker through it.
"""

from __future__ import annotations

import math
import sys
import time

import anyio
import msgspec

from . import limits, log, run
from .errors import UserError
from .manifest import Manifest
from .plan import Plan
from .progress import Progress

INSTALL = "executor: ray needs Ray, which is not installed: pip install 'babelrun[ray]'"


def require_ray():
    try:
        import ray
    except ImportError:
        raise UserError(INSTALL) from None
    return ray


class BudgetActor:
    """One provider account's budget for every worker (a Ray async actor)."""

    def __init__(self, key: tuple[str, str], rpm: float | None, tpm: float | None):
        self.account = limits.Account(key, rpm, tpm)

    async def admit(self, estimated_tokens: int) -> int:
        return await self.account.admit(estimated_tokens)

    async def settle(self, reserved: int, used: int | None) -> None:
        await self.account.settle(reserved, used)

    async def pause(self, seconds: float) -> None:
        self.account.pause(seconds)

    async def paused_for(self) -> float:
        """Seconds the account stays paused (relative: the workers' clocks are not ours)."""
        return max(0.0, self.account.paused_until - time.monotonic())


class RemoteAccount:
    """``limits.Budget`` on a ``BudgetActor``. With a limit, one round trip per admission
    (two when tokens are limited): the actor paces every worker's calls. Without one, there
    is nothing to pace, only Retry-After pauses to share: admissions stay local and ask the
    actor at most every ``poll_s`` whether another worker has paused the account (a
    ~2 ms round trip per call would otherwise cost CPU for nothing)."""

    def __init__(self, actor, rpm: float | None, tpm: float | None, poll_s: float = 0.25):
        self._actor = actor
        self.rpm, self.tpm = rpm, tpm
        self._paced = rpm is not None or tpm is not None
        self._poll_s = poll_s
        self._polled = -math.inf
        self._paused_until = 0.0

    async def admit(self, estimated_tokens: int) -> int:
        if self._paced:
            return await self._actor.admit.remote(estimated_tokens)
        now = time.monotonic()
        if now - self._polled >= self._poll_s:
            self._polled = now
            self._paused_until = max(self._paused_until, now + await self._actor.paused_for.remote())
        while (wait := self._paused_until - time.monotonic()) > 0:
            await anyio.sleep(wait)
        return 0

    async def settle(self, reserved: int, used: int | None) -> None:
        if self.tpm is not None and used is not None:
            await self._actor.settle.remote(reserved, used)

    def pause(self, seconds: float) -> None:
        self._paused_until = max(self._paused_until, time.monotonic() + seconds)
        # A message, not a task: the actor applies it in order with the admissions after it.
        self._actor.pause.remote(seconds)


def _run_shard(manifest: Manifest, plan: Plan, shard: log.Shard, budgets: dict, interval: float):
    """A worker's task: one shard through the engine, under the shard's lock."""
    lims = limits.account_limits(manifest.judges)
    accounts = {spec.name: RemoteAccount(budgets[limits.account_key(spec)], *lims[limits.account_key(spec)])
                for spec in manifest.judges}
    progress = Progress(stream=sys.stderr, interval=interval, live=False)
    with log.RunLock(manifest.run_dir, shard):
        outcome = run.run_shard(manifest, plan.sharded(shard), accounts=accounts, progress=progress,
                                handle_signals=False)
    return outcome.judges, outcome.written, outcome.interrupted


def _combine(parts: list) -> list:
    """Each judge's counters summed over the shards (latencies pooled for the percentiles)."""
    merged = {}
    for states in parts:
        for s in states:
            m = merged.get(s.judge_id)
            if m is None:
                merged[s.judge_id] = s
                continue
            for name in ("planned", "done_before", "ok", "failed", "calls", "retries", "rate_limited",
                         "tokens_in", "tokens_out"):
                setattr(m, name, getattr(m, name) + getattr(s, name))
            m.errors.update(s.errors)
            m.latencies.extend(s.latencies)
            m.stopped = m.stopped or s.stopped
    return list(merged.values())


def _connect(ray, address: str | None) -> bool:
    """Join the cluster at ``address`` (or start one here); returns whether we started the
    connection (and so must end it). A caller that ran ``ray.init`` itself keeps its own."""
    if ray.is_initialized():
        return False
    ray.init(address=address, include_dashboard=False, log_to_driver=True)
    return True


def _gather(ray, refs: list) -> list:
    try:
        return ray.get(refs)
    except ray.exceptions.RayTaskError as e:
        cause = getattr(e, "cause", None)
        if isinstance(cause, UserError):  # e.g. a shard already running elsewhere
            raise cause from None
        raise
    except KeyboardInterrupt:
        for ref in refs:
            ray.cancel(ref)
        raise


def audit(manifest: Manifest, *, progress: Progress | None = None) -> run.AuditResult:
    """The whole plan as ``ray.workers`` shards on Ray; cards when every shard is done."""
    ray = require_ray()
    run.check_shardable(manifest)
    spec, run_dir = manifest.ray, manifest.run_dir
    plan = Plan.from_manifest(manifest)
    run._prepare(run_dir)
    started = time.monotonic()
    with log.RunLock(run_dir, shared=True):
        run.write_run_files(manifest, plan)
        owned = _connect(ray, spec.address)
        budgets = {}
        try:
            actor = ray.remote(BudgetActor).options(num_cpus=0, max_concurrency=10_000)
            budgets = {key: actor.remote(key, rpm, tpm)
                       for key, (rpm, tpm) in limits.account_limits(manifest.judges).items()}
            task = ray.remote(_run_shard).options(num_cpus=spec.num_cpus, max_retries=spec.max_retries)
            plan_ref = ray.put(plan)
            # Workers print plain progress lines (Ray forwards them): never the live redraw's pace.
            interval = 10.0 if progress is None or progress.live else progress.interval
            refs = [task.remote(manifest, plan_ref, log.Shard(i, spec.workers), budgets, interval)
                    for i in range(spec.workers)]
            parts = _gather(ray, refs)
        finally:
            for handle in budgets.values():
                ray.kill(handle)
            if owned:
                ray.shutdown()
        states = _combine([states for states, _, _ in parts])
        elapsed = time.monotonic() - started
        for s in states:  # the run's clock is the driver's
            s.started, s.ended = started, started + elapsed
        interrupted = any(stopped for _, _, stopped in parts)
        result = run.result_of(run_dir, states, written=sum(w for _, w, _ in parts),
                               interrupted=interrupted, elapsed_s=elapsed)
        run._write_atomic(run_dir / "stats.json", msgspec.json.format(msgspec.json.encode(result.stats), indent=2))
    if not interrupted:
        # The shards have all ended, but a whole-run lock is not needed to score: readers
        # leave torn lines out, and cards come from the log alone.
        result.cards = run.score_run(run_dir, manifest.scoring, manifest.seed)
    return result
