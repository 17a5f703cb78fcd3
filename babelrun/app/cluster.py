"""The Ray executor (``executor: ray``): the plan's shards on Ray workers, one shared budget.

    driver ──┬─ budget actor per provider account  (holds a ``limits.Account``)
             └─ shard task × workers ── judging.run_shard(plan.sharded(i/N))
                                        (the same async engine; its own log segments)

Cascades' escalation-only strong judges (``calls: escalations``) are a second round of shard
tasks, started when every shard of the first has ended, over the keys the driver computes
from the cheap judges' records.

The driver builds the plan once and hands it to every task (``ray.put``); it holds the run
directory's lock shared, and each task locks its shard (``RunDir.lock``). Records go
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

Replicas: an in-process judge (llama.cpp, MLX, simulated) with ``replicas: N`` is N actors
that every worker's engine shares (replicas.py).
"""

from __future__ import annotations

import math
import sys
import time

import anyio

from .. import judges, report
from ..engine import EngineResult, limits
from ..engine.progress import Progress
from ..errors import UserError
from ..plan import Plan
from ..spec import JudgeSpec, Manifest
from ..store import log
from ..store.done import DoneSet
from ..store.rundir import RunDir
from . import judging, runfiles
from .outcome import AuditResult, combine_shards, result_of
from .replicas import ReplicaPool, require_ray, start_replicas
from .scoring import score_run


class Interrupted(UserError):
    """Ctrl-C at the driver: the shards are cancelled, and the run resumes like any other."""

    exit_code = 130


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

    def open_now(self, estimated_tokens: int = 0) -> bool:
        return False  # admit may ask the actor: always a wait a drain can end

    def pause(self, seconds: float) -> None:
        self._paused_until = max(self._paused_until, time.monotonic() + seconds)
        # A message, not a task: the actor applies it in order with the admissions after it.
        self._actor.pause.remote(seconds)


def _run_shard(manifest: Manifest, judge_ids: dict[str, str], plan: Plan, shard: log.Shard, budgets: dict,
               replicas: dict, interval: float, phases: tuple[str, ...], wanted: DoneSet | None,
               budget_usd: float | None = None):
    """A worker's task: one shard through the engine in the given phases (judging.PHASES),
    under the shard's lock."""

    def build(spec: JudgeSpec, seed: int):
        if spec.name in replicas:
            return ReplicaPool(spec, judge_ids[spec.name], replicas[spec.name])
        return judges.build(spec, seed)

    lims = limits.account_limits(manifest.judges)
    accounts = {spec.name: RemoteAccount(budgets[limits.account_key(spec)], *lims[limits.account_key(spec)])
                for spec in manifest.judges}
    progress = Progress(stream=sys.stderr, interval=interval, live=False)
    with RunDir(manifest.run_dir).lock(shard):
        outcome = judging.run_shard(manifest, plan.sharded(shard), judge_ids, accounts=accounts, progress=progress,
                                handle_signals=False, build=build, phases=phases, wanted=wanted,
                                budget_usd=budget_usd)
    return outcome.judges, outcome.written, outcome.interrupted


def _report_replicas(ray, replicas: dict[str, list], progress: Progress | None) -> None:
    for name, actors in replicas.items():
        served = ray.get([a.count.remote() for a in actors])
        (progress or Progress()).note(f"judge {name!r}: {len(actors)} replicas served "
                                      f"{', '.join(map(str, served))} calls")


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
            ray.cancel(ref)  # the workers stop; what they wrote stays in their segments
        raise Interrupted("interrupted: the log is intact; run the same command again to resume "
                          "(on Ray, or locally with --executor local)") from None


def _launch(ray, manifest: Manifest, judge_ids: dict[str, str], plan: Plan, progress: Progress | None,
            budget: float | None = None) -> list:
    """Start the budgets and replicas, run every shard as a task, and end them all."""
    spec = manifest.ray
    owned = _connect(ray, spec.address)
    budgets, replicas = {}, {}
    try:
        actor = ray.remote(BudgetActor).options(num_cpus=0, max_concurrency=10_000)
        budgets = {key: actor.remote(key, rpm, tpm)
                   for key, (rpm, tpm) in limits.account_limits(manifest.judges).items()}
        replicas = start_replicas(ray, manifest)
        task = ray.remote(_run_shard).options(num_cpus=spec.num_cpus, max_retries=spec.max_retries)
        plan_ref = ray.put(plan)
        # Workers print plain progress lines (Ray forwards them): never the live redraw's pace.
        interval = 10.0 if progress is None or progress.live else progress.interval

        def round_(phases: tuple[str, ...], wanted=None) -> list:
            return _gather(ray, [task.remote(manifest, judge_ids, plan_ref, log.Shard(i, spec.workers), budgets,
                                             replicas, interval, phases, wanted,
                                             judging.shard_budget(budget, log.Shard(i, spec.workers)))
                                 for i in range(spec.workers)])

        parts = round_(("all",))
        # Cascades' escalation-only strong judges: a second round, once every shard's cheap
        # judge has answered; the driver computes the escalated keys once for all shards.
        if any(j.calls == "escalations" for j in manifest.judges) and not any(p[2] for p in parts):
            parts += round_(("escalations",), ray.put(judging.escalations(manifest, judge_ids)))
        _report_replicas(ray, replicas, progress)
        return parts
    finally:
        for handle in [*budgets.values(), *(a for group in replicas.values() for a in group)]:
            ray.kill(handle)
        if owned:
            ray.shutdown()


def audit(manifest: Manifest, *, progress: Progress | None = None, budget: float | None = None) -> AuditResult:
    """The whole plan as ``ray.workers`` shards on Ray; cards when every shard is done.
    ``budget`` (``--budget``): each worker's shard gets its 1/N share (``shard_budget``)."""
    ray = require_ray()
    judging.check_shardable(manifest, escalation_round=True)
    folder, info = RunDir(manifest.run_dir), runfiles.run_info(manifest)
    plan = Plan.from_manifest(manifest)
    folder.create()
    started = time.monotonic()
    with folder.lock(shared=True):
        runfiles.write_run_files(folder, info, plan)
        if budget is not None:
            judging.engine_options(manifest, budget)  # no price: one clear line here, before any worker starts
        parts = _launch(ray, manifest, info.judge_ids, plan, progress, budget)
        states = combine_shards([states for states, _, _ in parts])
        elapsed = time.monotonic() - started
        for s in states:  # the run's clock is the driver's
            s.started, s.ended = started, started + elapsed
        interrupted = any(stopped for _, _, stopped in parts)
        result = result_of(folder.path, EngineResult(states, interrupted, sum(w for _, w, _ in parts), elapsed))
        folder.add_stats(result.stats, totals=lambda t: runfiles.spend_from_log(folder.path, t))
    if not interrupted:
        # Every shard has ended; scoring needs no lock (readers leave torn lines out).
        result.cards = score_run(folder.path, write_report=False)
        report.write([folder.path], folder.path, cards={folder.path: result.cards})
    return result
