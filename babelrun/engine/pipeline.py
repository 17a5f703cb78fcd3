"""The async engine: planned keys in, one log record per finished call out.

Structure (every task has an owner; nothing is fire-and-forget)::

    run ─┬─ signals           (1st Ctrl-C/SIGTERM: drain; 2nd: cancel)
         ├─ progress
         └─ pipeline ─┬─ writer            (the only task that touches the log)
                      └─ judge 1 ── workers (limits.CallLimits), each taking the judge's
                        judge 2 …     next undone key from its feed as it comes free
                                     (account budget → retries → gate → call → record)

Nothing is queued ahead of the workers (a key becomes a request when a worker takes it),
so memory stays flat however large the plan. Rate limits and Retry-After pauses belong to the
provider *account* (``limits.Account``), shared by every judge on it. A judge stops on a
fatal reply (401/403/404) at once, or after ``max_consecutive_failures`` calls in a row
that ended in error (its breaker); the other judges go on.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar, cast

import anyio
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectReceiveStream as ObjectReceiveStream
from anyio.streams.memory import MemoryObjectSendStream as ObjectSendStream

from ..core import bounds
from ..core.items import Item
from ..core.keys import slot
from ..judges import (
    FatalJudgeError,
    Judge,
    JudgeReply,
    JudgeRequest,
    RejectedError,
    RetryableError,
)
from ..judges.options import batch_of
from ..judges.protocol import max_tokens
from ..judges.safe_regex import PatternTimeout
from ..plan import Plan
from ..spec import Price, StoppingSpec
from ..store.cache import ResponseCache
from ..store.done import DoneSet
from ..store.log import LogWriter, Record
from . import batches, limits, stopping
from . import records as build
from .ledger import Ledger
from .progress import Progress
from .state import Cancellable, EngineResult, JudgeState
from .stopping import Stopper

if TYPE_CHECKING:
    from ..judges.http import HttpJudge

_T = TypeVar("_T")


async def _put(stream: ObjectSendStream[_T], value: _T) -> None:
    """Send without a checkpoint when the buffer has room. anyio's ``send`` always yields to
    the event loop first; at thousands of calls a second those yields were most of the
    engine's own cost. Waits (back pressure) only when the buffer is full."""
    try:
        stream.send_nowait(value)
    except anyio.WouldBlock:
        await stream.send(value)


class _Stop(Exception):
    """Raised inside a judge's task group when the judge must stop."""


class _Drained(Exception):
    """A call given up because the run is draining: it had not been sent yet (waiting on the
    account's budget or a pause) or was between retries. It leaves no record: the key is
    simply not done, and the next audit judges it."""


@dataclass
class JudgeRunner:
    """One judge's share of the run: its backend, budget, gate and counters. Also used by
    ``bench-judge``, so that measuring goes through the same path as auditing."""

    judge: Judge
    account: limits.Budget
    gate: limits.AdaptiveConcurrency | limits.FixedConcurrency
    state: JudgeState
    workers: int = 1  # worker tasks in ``run`` (``limits.CallLimits.workers``)
    draining: bool = False
    _waits: set[anyio.CancelScope] | None = None  # cancel scopes of the waits a drain ends
    # The stopping, cache and spend options, off by default, each a None check on the call path:
    stopper: Stopper | None = None  # early stopping per cell (engine/stopping.py)
    cache: ResponseCache | None = None  # the response cache (store/cache.py)
    _cache_after: build.CacheAfterLog | None = None  # its replies, each cached once its record is written
    budget_usd: float | None = None  # ``audit --budget``: stop issuing calls at this spend
    _reserved: float = 0.0  # the expected cost of the calls in flight (``_reserve``), and how many
    _reserving: int = 0
    _released: anyio.Event | None = None  # set when one of them answers
    _feed: Cancellable | None = None
    # A backend whose calls a drain abandons (``abandon_on_drain``: a Python judge's call may
    # never return): its in-flight calls end without a record, like a wait.
    abandon: bool = False

    def drain(self) -> None:
        """Stop waiting: calls not yet sent and pending retries end without a record; calls
        in flight finish."""
        self.draining = True
        for scope in list(self._waits or ()):
            scope.cancel()

    async def _interruptible(self, wait: Callable[[], Awaitable[_T]]) -> _T:
        """``await wait()``, ended by a drain (``_Drained``)."""
        if self.draining:
            raise _Drained
        if self._waits is None:
            self._waits = set()
        with anyio.CancelScope() as scope:
            self._waits.add(scope)
            try:
                return await wait()
            finally:
                self._waits.discard(scope)
        raise _Drained  # reached only when the drain cancelled the wait

    async def _sleep(self, seconds: float) -> None:
        await self._interruptible(lambda: anyio.sleep(seconds))

    async def _attempt(self, request: JudgeRequest, estimate: int) -> tuple[JudgeReply, float]:
        if self.account.open_now(estimate) and not self.draining:  # nothing to wait for: no scope
            reserved = await self.account.admit(estimate)
        else:
            reserved = await self._interruptible(lambda: self.account.admit(estimate))
        self.state.calls += 1
        try:
            async with self.gate:
                started = time.perf_counter()  # the judge's latency, not our queueing
                if self.abandon:
                    reply = await self._interruptible(lambda: self.judge.judge(request))
                else:
                    reply = await self.judge.judge(request)
        except RetryableError as e:
            await self.account.settle(reserved, 0)  # a refused call used no tokens
            if e.kind == "rate_limited":
                self.state.rate_limited += 1
                self.gate.pushback()
                if e.retry_after:
                    self.account.pause(e.retry_after)
            raise
        tokens_in = bounds.count(reply.tokens_in)  # a provider's 1e30 is clamped, never awaited
        used = None if tokens_in is None else tokens_in + (bounds.count(reply.tokens_out) or 0)
        await self.account.settle(reserved, used)
        self.gate.success()
        return reply, time.perf_counter() - started

    def _from_cache(self, request: JudgeRequest) -> Record | None:
        assert self.cache is not None
        hit = build.from_cache(self.cache, self.judge, request)
        if hit is not None:
            self.state.cached += 1
        return hit

    def _to_cache(self, request: JudgeRequest, reply: JudgeReply, record: Record) -> Record:
        """Cache the reply once its record is in the log (``_write``; see ``CacheAfterLog``)."""
        if self._cache_after is not None and self.cache is not None:
            self._cache_after.hold(self.cache, self.judge, request, reply, record)
        return record

    def _expected(self, request: JudgeRequest) -> float:
        """What this call is expected to cost: the mean cost of this judge's calls so far;
        before the first has answered, the request's own size at the price (its bytes / 3 as
        input tokens, ``max_tokens`` as output: what the rate limiter reserves)."""
        ledger = self.state.ledger
        assert ledger is not None
        return ledger.expected(request.messages, max_tokens(self.judge.spec))

    async def _reserve(self, request: JudgeRequest) -> float | None:
        """Reserve this call's expected cost against ``budget_usd`` while it is in flight, and
        return it; None once the spend so far and this call would pass the budget with no
        call in flight (the judge then stops issuing calls: the key stays undone). While calls
        are in flight it waits for them to answer first, so the stop is decided on what was
        spent, not on guesses: a judge stops within about one call's cost of its budget."""
        ledger = self.state.ledger
        assert ledger is not None and self.budget_usd is not None
        while self.state.stopped is None:
            expected = self._expected(request)
            # the judge's first call is sent whatever its guessed cost (with none in flight):
            # what calls cost is learnt from it, and it passes the budget by one call at most
            first = not self._reserving and not any(k != "cached" for k in ledger.calls)
            if first or ledger.total + self._reserved + expected <= self.budget_usd:
                self._reserved += expected
                self._reserving += 1
                return expected
            if not self._reserving:
                self.state.stopped = (f"judge {self.state.name!r} stopped at its budget: {ledger.total:.4f} "
                                      f"of {self.budget_usd:g} {ledger.price.currency} spent")
                if self._feed is not None:
                    self._feed.cancel()
                break
            if self._released is None:
                self._released = anyio.Event()
            await self._interruptible(self._released.wait)
        return None

    def _release(self, reserved: float | None) -> None:
        """A reserved call answered (its cost is in the ledger now) or was never sent."""
        if reserved is None:
            return
        self._reserved -= reserved
        self._reserving -= 1
        if self._released is not None:
            self._released.set()
            self._released = None

    async def call(self, request: JudgeRequest) -> Record:
        """One key, retried under the policy; returns its ``ok`` or ``error`` record.

        The first attempt runs bare; only a retryable failure builds the tenacity controller
        that drives the rest. Building one per call costs ~30 µs, a sixth of the engine's
        budget per call at 5,000 calls/s, and most calls succeed first time.
        """
        if self.cache is not None:
            hit = self._from_cache(request)
            if hit is not None:
                return hit
        estimate = (limits.estimate_tokens(request.messages, max_tokens(self.judge.spec))
                    if self.account.tpm is not None else 0)
        try:
            reply, latency = await self._attempt(request, estimate)
            made = build.ok_record(self.judge, request, reply, 1, latency)
            return made if self.cache is None else self._to_cache(request, reply, made)
        except RetryableError as first:
            failure: RetryableError | RejectedError = first
        except RejectedError as e:
            failure = e
        except PatternTimeout as e:  # a rule's regex ran past its time: the pair reads invalid
            return build.timeout_record(self.judge, request, e, 1, 0.0)
        attempts = 1
        retries = self.judge.spec.retries
        if isinstance(failure, RetryableError) and retries > 0:
            try:
                await self._sleep(limits.backoff(1, failure))
                async for attempt in limits.retry_policy(retries, self._sleep):
                    with attempt:
                        attempts += 1
                        self.state.retries += 1
                        reply, latency = await self._attempt(request, estimate)
                        made = build.ok_record(self.judge, request, reply, attempts, latency)
                        return made if self.cache is None else self._to_cache(request, reply, made)
            except (RetryableError, RejectedError) as e:
                failure = e
            except PatternTimeout as e:
                return build.timeout_record(self.judge, request, e, attempts, 0.0)
        return build.error_record(self.judge, request, attempts=attempts,
                       error_kind=failure.kind, error=str(failure))

    def count(self, record: Record) -> None:
        """Count the record; stop the judge when its breaker trips."""
        s = self.state
        s.count(record)
        # a replay judge's file without a verdict for the key (judges/replay.py) is no broken judge
        if (record.status != "ok" and record.error_kind != "not_in_replay"
                and s.consecutive_failures >= self.judge.spec.max_consecutive_failures):
            s.stopped = (f"judge {s.name!r} stopped after {s.consecutive_failures} failed calls "
                         f"in a row (last: {record.error})")
            raise _Stop

    async def work(self, feed: _Feed, records: ObjectSendStream[Record]) -> None:
        async with records:
            while (request := feed.next()) is not None:  # (a stopped cell's keys: skipped there)
                reserved = None
                if self.budget_usd is not None:
                    try:
                        reserved = await self._reserve(request)
                    except _Drained:
                        continue
                    if reserved is None:
                        continue  # not sent: the key stays undone, for the next run
                try:
                    record = await self.call(request)
                except _Drained:
                    if reserved is not None:
                        self._release(reserved)
                    continue  # not sent, or between retries: no record, the key stays undone
                except FatalJudgeError as e:
                    if reserved is not None:
                        self._release(reserved)
                    self.state.stopped = f"judge {self.state.name!r} stopped: {e}"
                    self.state.failed += 1
                    self.state.errors[e.kind] += 1
                    await _put(records, build.error_record(self.judge, request, error_kind=e.kind, error=str(e)))
                    raise _Stop from None
                await _put(records, record)
                self.count(record)
                if reserved is not None:
                    self._release(reserved)  # after count: its cost is in the ledger
                if self.stopper is not None and record.sample == 0:  # stopping decides on first asks
                    self.stopper.feed(record.item_id, record.order, record.status == "ok", record.verdict,
                                      record.ref_len, record.pert_len)
                if record.cached:  # answered without a wait: let the writer and the others run
                    await anyio.lowlevel.checkpoint()

    async def run(self, plan: Plan, done: DoneSet, records: ObjectSendStream[Record],
                  feeds: list[Cancellable], wanted: DoneSet | None = None) -> None:
        feed = _Feed(self, plan.pending(self.judge.judge_id, self.judge.protocol.keys, done, wanted,
                                        self.judge.spec.samples))
        feeds.append(feed)
        self._feed = feed
        try:
            async with records, anyio.create_task_group() as tg:
                for _ in range(self.workers):
                    tg.start_soon(self.work, feed, records.clone())
        except* _Stop:
            pass
        finally:
            self.state.ended = time.monotonic()
            batching = getattr(self.judge, "batching", None)  # an in-process judge's counters
            if callable(batching):
                self.state.local = batching()
            with anyio.CancelScope(shield=True):
                await self.judge.aclose()


class _Feed:
    """A judge's undone keys as requests, taken by its workers as each comes free.

    No producer task and no stream between them: each hand-off through a memory stream
    cost the producer a checkpoint and a wake-up, ~2–3 % of the engine's time at 8,000
    calls/s (py-spy profile of bench/engine_overhead.py). ``next`` never awaits, so the workers, all on the event
    loop's thread, take turns on one iterator safely; memory stays flat (nothing is queued).
    ``cancel`` (a drain, the budget spent) ends it: every worker's next ``next`` is None.
    """

    def __init__(self, runner: JudgeRunner, pending: Iterator[tuple[Item, str, int]]):
        self._pending = pending
        self._request = runner.judge.protocol.request
        self._stopper = runner.stopper
        self._left = runner.state.limit  # None: no limit
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True

    def next(self) -> JudgeRequest | None:
        stopper = self._stopper
        while not self.cancelled:
            try:
                item, key, sample = next(self._pending)
            except StopIteration:
                self.cancelled = True
                break
            if stopper is not None and not stopper.needed(item.item_id):
                stopper.skip(item.item_id)  # its cell has stopped: not needed
                continue
            if self._left is not None:
                if self._left <= 0:
                    self.cancelled = True
                    break
                self._left -= 1
            return self._request(item, key, sample)
        return None


async def _write(records: ObjectReceiveStream[Record], writer: LogWriter,
                 cache_after: build.CacheAfterLog | None = None) -> None:
    pruning: set[int] = set()  # the caches a prune runs on now (one at a time each)

    async def prune(cache: ResponseCache) -> None:
        try:
            await anyio.to_thread.run_sync(cache.prune)
        finally:
            pruning.discard(id(cache))

    async with records, anyio.create_task_group() as prunes:
        async for record in records:
            batch = [record]
            while True:
                try:
                    batch.append(records.receive_nowait())
                except (anyio.WouldBlock, anyio.EndOfStream):
                    break
            synced = writer.write_batch(batch)
            # The replies of records now in the log: cached after, never before. A prune that
            # falls due walks the whole cache (seconds at 100,000 entries): in a thread, while
            # the judges and this writer go on (a removed entry is a miss, a new one the newest).
            for cache in cache_after.written(batch) if cache_after else ():
                if id(cache) not in pruning:
                    pruning.add(id(cache))
                    prunes.start_soon(prune, cache)
            if synced:
                await anyio.to_thread.run_sync(writer.sync)
            if writer.sealed:  # a segment was closed: its keys index, off the event loop
                await anyio.to_thread.run_sync(writer.index_sealed)


async def _signals(on_first: Callable[[], None], on_second: Callable[[], None]) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as received:
        count = 0
        async for _ in received:
            count += 1
            (on_first if count == 1 else on_second)()


def runner(judge: Judge, account: limits.Budget, state: JudgeState, calls: limits.CallLimits) -> JudgeRunner:
    """A judge's runner under its call limits; a backend with a connection pool
    (``size_pool``: the HTTP backends) gets one sized to the calls it will carry."""
    size_pool = getattr(judge, "size_pool", None)
    if size_pool is not None:
        size_pool(calls.pool)
    return JudgeRunner(judge, account, calls.gate(), state, calls.workers,
                       abandon=bool(getattr(judge, "abandon_on_drain", False)))


@dataclass(frozen=True)
class RunOptions:
    """How one engine run goes. ``wanted``: judge only the keys in it (a cascade's escalations
    to its strong judge). ``accounts``: each judge's budget by judge name, when it is held
    elsewhere (the Ray executor's shared budget); by default one ``limits.Account`` per
    provider account, in this process. ``limit``: at most this many new presentations per
    judge (a trial run); the rest stay planned for the next run."""

    progress: Progress | None = None
    handle_signals: bool = True
    wanted: DoneSet | None = None
    accounts: dict[str, limits.Budget] | None = None
    limit: int | None = None
    # Each off by default: early stopping, the response cache (with whether judges
    # with temperature > 0 use it), each judge's price by name (the ledger), --budget in USD.
    stopping: StoppingSpec | None = None
    cache: ResponseCache | None = None
    cache_sampled: bool = False
    prices: dict[str, Price] | None = None
    budget_usd: float | None = None
    # Set from another thread (``audit_async`` cancelled): drain as on a first Ctrl-C.
    stop: threading.Event | None = None


async def _stopped(stop: threading.Event, on_stop: Callable[[], None]) -> None:
    while not stop.is_set():
        await anyio.sleep(0.02)
    on_stop()


def _state(judge: Judge, plan: Plan, done: DoneSet, options: RunOptions) -> JudgeState:
    """A judge's counters at the start: its planned keys (the wanted ones, in the shard) and
    how many of them are done."""
    jid, wanted, samples = judge.judge_id, options.wanted, judge.spec.samples
    if wanted is None:
        return JudgeState(judge.spec.name, jid, plan.calls_for(jid, samples), plan.done_count(jid, done, samples),
                          limit=options.limit)
    planned = done_before = 0
    for name in (slot(jid, s) for s in range(samples)):  # a wanted key is wanted for every sample
        keys = wanted.keys(jid)
        if plan.shard is not None:
            keys = keys[plan.shard.mask(name, keys)]
        planned += len(keys)
        done_before += done.count_keys(name, keys)
    return JudgeState(judge.spec.name, jid, planned, done_before, limit=options.limit)


def _extras(runs: list[JudgeRunner], plan: Plan, writer: LogWriter, options: RunOptions) -> list[Stopper]:
    """Attach what ``options`` turn on (stopping, cache, ledger, budget) to the runners;
    returns the stoppers. Nothing is attached when they are off."""
    for r in runs:
        spec = r.judge.spec
        price = (options.prices or {}).get(spec.name)
        if price is not None:
            r.state.ledger = Ledger(price, batch=batch_of(spec))
        if options.cache is not None and (spec.temperature == 0 or options.cache_sampled):
            r.cache = options.cache
        if options.budget_usd is not None and price is not None:
            r.budget_usd = options.budget_usd
    if options.stopping is None:
        return []
    how = options.stopping
    cells = plan.stopping_cells(how.per_perturbation)
    eligible = [r for r in runs if r.judge.protocol.kind == "pairwise"]  # provider batches: between batches
    rows = stopping.log_rows(writer.run_dir, {r.judge.judge_id for r in eligible})
    for r in eligible:
        r.stopper = Stopper(how, cells, r.judge.spec.name, r.judge.judge_id)
        r.stopper.feed_rows(rows.get(r.judge.judge_id, []))
    return [r.stopper for r in eligible if r.stopper is not None]


def _key_order(plan: Plan, stopping: bool, options: RunOptions, judge: Judge) -> Plan:
    """Keys go round-robin over the languages and, within each, over its perturbations, each
    cell in its seeded order (``plan.order``), always: a budget, a ``--limit`` or stopping
    then leaves every cell equally sampled (in plan order, a budget spent itself on the first
    language). Stopping by language takes a language's items in its own seeded order. A judge
    that keeps the prompt prefix it evaluated last (``feeds_by_reference``: an in-process
    model's KV cache) is fed a reference's items together, the languages taking turns a
    reference at a time, so consecutive prompts share the template, the question and slot A."""
    by_language = options.stopping is not None and not options.stopping.per_perturbation
    return plan.ordered(stratified=not (stopping and by_language),
                        grouped=bool(getattr(judge, "feeds_by_reference", False)))


def _share_cache_after(runs: list[JudgeRunner]) -> build.CacheAfterLog:
    """One table of the replies waiting to enter the cache (each once its record is written),
    shared by every judge's runner that has a cache (calls and provider batches) and the log writer."""
    after = build.CacheAfterLog()
    for r in runs:
        if r.cache is not None:
            r._cache_after = after
    return after


async def run(judges: list[Judge], plan: Plan, done: DoneSet, writer: LogWriter,
              options: RunOptions = RunOptions()) -> EngineResult:
    """Judge every planned (judge, item, order) whose key is not in ``done`` (in the plan's
    shard, when it is one), as ``options`` say."""
    budgets: dict[str, limits.Budget] = dict(options.accounts or limits.accounts([j.spec for j in judges]))
    wanted, progress = options.wanted, options.progress or Progress()
    runs = [runner(j, budgets[j.spec.name], _state(j, plan, done, options), limits.CallLimits.of(j.spec, plan.shard))
            for j in judges]
    stoppers = _extras(runs, plan, writer, options)
    cache_after = _share_cache_after(runs)
    fed = {id(r): _key_order(plan, bool(stoppers), options, r.judge) for r in runs}
    result = EngineResult([r.state for r in runs])
    feeds: list[Cancellable] = []
    judges_scope = anyio.CancelScope()
    started = time.monotonic()
    send, recv = anyio.create_memory_object_stream[Record](max_buffer_size=1024)

    def drain() -> None:
        result.interrupted = True
        progress.note("interrupted: finishing the calls in flight (press again to abort them)")
        for feed in feeds:
            feed.cancel()
        for r in runs:
            r.drain()

    def abort() -> None:
        result.interrupted = True
        judges_scope.cancel()

    async with anyio.create_task_group() as helpers:
        if options.handle_signals:
            helpers.start_soon(_signals, drain, abort)
        if options.stop is not None:
            helpers.start_soon(_stopped, options.stop, drain)
        helpers.start_soon(progress.run, result.judges)
        async with anyio.create_task_group() as pipeline:
            # The writer ends when the last record stream closes: after every judge has ended.
            pipeline.start_soon(_write, recv, writer, cache_after)
            with judges_scope:
                async with send, anyio.create_task_group() as tg:
                    for r in runs:
                        if batch_of(r.judge.spec):  # one provider batch instead of calls (an HTTP backend's)
                            tg.start_soon(batches.run_judge, cast("HttpJudge", r.judge), r.state, fed[id(r)], done,
                                          send.clone(), writer.run_dir, feeds, r.stopper, r.cache,
                                          options.stopping.min_items if options.stopping else 0, r.budget_usd,
                                          cache_after)
                        else:
                            tg.start_soon(r.run, fed[id(r)], done, send.clone(), feeds, wanted)
        helpers.cancel_scope.cancel()

    for r in runs:
        if r.stopper is not None:
            r.state.not_needed = r.stopper.skipped
    progress.finish(result.judges)
    if stoppers and plan.shard is None and options.stopping is not None:
        stopping.write_report(writer.run_dir, options.stopping, [s.report() for s in stoppers])
    result.written = writer.written
    result.elapsed_s = time.monotonic() - started
    return result
