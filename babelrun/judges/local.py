"""What the in-process model backends (llamacpp, mlx) share: the completion-style prompt and
the micro-batcher.

Micro-batching: the first request to arrive leads. It waits up to ``max_wait_ms`` for
``batch_size`` requests in all, then hands the first ``batch_size`` of those waiting to the
model thread in one hop (one batch at a time: a ``CapacityLimiter`` of 1), and gives every
request its reply. Requests left over (more arrived than a batch holds) are not lost: the
first of them is woken to lead the next batch. There is no background task: a leader does the
work inside its own call, so every task still has an owner. A subclass gives
``_run_batch(requests) -> replies``, which runs in the model thread.

The model thread is one OS thread for the judge's whole life (``ModelThread``), not whichever
of anyio's worker threads is free: llama.cpp's CPU backend runs each decode as an OpenMP
parallel region, and OpenMP keeps a team of threads per calling thread, so batches handed to
alternating callers left each one waiting on the other's team (~3,000 voluntary context
switches a batch, 7–21 % of a batch-8 audit's decode time spent off the CPU; one thread: none).

Warm-up: ``warm_up(judges)`` loads the models while the audit plans, so that neither the
command nor the judge's timed window waits for a load the plan could hide (a subclass gives
``_warm``). It is the first job on each judge's model thread, so a first batch that arrives
before it has finished waits for it; a judge that has already cut a batch is not warmed.
"""

from __future__ import annotations

import queue
import threading
import weakref
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from typing import Any

import anyio
import msgspec

from ..spec import JudgeSpec
from ..store.stats import LocalBatching
from .base import JudgeReply, JudgeRequest
from .options import local_of


def completion_prompt(messages: list[dict[str, str]]) -> str:
    """Chat messages as one plain-text prompt for a model without a chat template."""
    return "\n\n".join(m["content"] for m in messages) + "\n\nAnswer:"


class _Pending(msgspec.Struct):
    request: JudgeRequest
    wake: anyio.Event  # set when the reply (or error) is in, or when this request is to lead
    reply: JudgeReply | None = None
    error: BaseException | None = None
    lead: bool = False


_Jobs = queue.SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]] | None]


class ModelThread:
    """One daemon thread that runs the jobs it is given, one at a time, in the order given
    (started on the first). It ends when ``close`` is called or the owner it was made for is
    garbage-collected; a daemon, so a process that exits mid-batch does not wait for it.
    Each thread has a queue of its own, so a job given after ``close`` never waits on a
    thread that is ending."""

    def __init__(self, owner: object, name: str):
        self._jobs: _Jobs = queue.SimpleQueue()
        self._name = name
        self._thread: threading.Thread | None = None
        self._start = threading.Lock()
        weakref.finalize(owner, self.close)  # holds this object, never the owner

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        with self._start:
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, args=(self._jobs,), name=self._name, daemon=True)
                self._thread.start()
            self._jobs.put((future, fn, args))
        return future

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` on this thread, waited for (from another thread)."""
        return self.submit(fn, *args).result()

    def close(self) -> None:
        """End the thread once its queued jobs are done; a later job starts a new one."""
        with self._start:
            if self._thread is not None:
                self._jobs.put(None)
                self._jobs, self._thread = queue.SimpleQueue(), None

    @staticmethod
    def _work(jobs: _Jobs) -> None:
        # Holds the queue only, never the owner: a judge dropped unclosed is still collected.
        while (job := jobs.get()) is not None:
            future, fn, args = job
            try:
                future.set_result(fn(*args))
            except BaseException as e:  # the caller's to raise
                future.set_exception(e)
            del job, future, fn, args  # nothing of the last job kept alive while idle


class LocalJudge:
    def __init__(self, spec: JudgeSpec, judge_id: str, seed: int = 0):
        self.spec = spec
        self.judge_id = judge_id
        self.seed = seed
        self.local = local_of(spec)  # batch_size, max_wait_ms, threads, context
        self._model: Any = None  # the backend's loaded model (llama_cpp.Llama; mlx_lm's pair): untyped
        self._pending: list[_Pending] = []
        self._full = anyio.Event()
        self._thread = anyio.CapacityLimiter(1)  # the model runs one batch at a time
        self._model_thread = ModelThread(self, f"babelrun-model {spec.name}")  # the warm-up's and every batch's
        self.batches: list[int] = []  # the size of every batch run (for tests and benches)
        # Prompt tokens read by the model thread: evaluated, or taken from a prompt evaluated
        # before (a kept prefix), and the prompts that took one; a backend counts them.
        self.prompt_tokens = self.evaluated = self.reused = self.prefix_hits = 0

    def _run_batch(self, requests: list[JudgeRequest]) -> list[JudgeReply]:
        raise NotImplementedError

    def _warm(self) -> None:
        """Load the model ahead of the first batch, leaving no state a batch would read (a
        backend's own; none by default)."""

    def _warm_first(self) -> None:
        """The warm-up, on the model thread ahead of any batch. A failure is the first batch's
        to raise, where the run reports it: here it only means no warm-up."""
        try:
            self._warm()
        except Exception:  # the first batch loads again and raises it (FatalJudgeError, …)
            pass

    def _count_prompt(self, tokens: int, reused: int) -> None:
        """One prompt read by the model: ``reused`` of its ``tokens`` from a kept prefix."""
        self.prompt_tokens += tokens
        self.evaluated += tokens - reused
        self.reused += reused
        self.prefix_hits += reused > 0

    def batching(self) -> LocalBatching:
        """This judge's micro-batching counters so far (the engine keeps them in stats.json)."""
        return LocalBatching(self.local.batch_size, len(self.batches), sum(self.batches), self.prompt_tokens,
                             self.evaluated, self.reused, self.prefix_hits)

    async def judge(self, request: JudgeRequest) -> JudgeReply:
        mine = _Pending(request, anyio.Event())
        self._pending.append(mine)
        if len(self._pending) == 1:
            mine.lead = True
        elif len(self._pending) >= self.local.batch_size:
            self._full.set()
        if not mine.lead:
            try:
                await mine.wake.wait()
            except anyio.get_cancelled_exc_class():
                if mine.lead:  # woken to lead as it was cancelled: the others wait on it
                    await self._lead()
                elif mine in self._pending:  # never cut into a batch: it will not run
                    self._pending.remove(mine)
                raise
        if mine.lead:
            await self._lead()
        if mine.error is not None:
            raise mine.error
        assert mine.reply is not None  # the batch that held it set its reply or its error
        return mine.reply

    async def _lead(self) -> None:
        """Collect a batch, run it on the model thread, hand every request its reply; wake the
        first request left over to lead the next. Shielded: the followers wait on this leader,
        so it must finish what it started."""
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(self.local.max_wait_ms / 1000):
                await self._full.wait()
            size = self.local.batch_size
            batch, self._pending, self._full = self._pending[:size], self._pending[size:], anyio.Event()
            if self._pending:
                if len(self._pending) >= size:
                    self._full.set()
                self._pending[0].lead = True
                self._pending[0].wake.set()
            self.batches.append(len(batch))
            try:
                # an anyio worker waits on the model thread, so the event loop never blocks
                replies = await anyio.to_thread.run_sync(self._model_thread.call, self._run_batch,
                                                         [p.request for p in batch], limiter=self._thread)
                for p, reply in zip(batch, replies, strict=True):
                    p.reply = reply
            except BaseException as e:  # the whole batch shares the failure (a fatal load error)
                for p in batch:
                    p.error = e
            for p in batch:
                p.lead = False
                p.wake.set()

    async def aclose(self) -> None:
        self._model = None  # cached weights stay loaded for the process's other judges
        self._model_thread.close()  # a judge used again gets a new one


def warm_up(backends: Iterable[object]) -> Future[None] | None:
    """Start the in-process judges' warm-up (their backend's ``_warm``): the first job on each
    judge's model thread, one judge after the other (they may share a model), for those that
    have not cut a batch yet; None when none is warmed, else the last one's future. Nothing
    waits for it: a judge's first batch waits for its own warm-up, and a process that ends
    first (a bad plan, an interrupt) leaves it unfinished."""
    # A judge that has cut a batch is not warmed: that batch may already have read the model's
    # state (a kept prefix), which the warm-up would change under the next.
    local = [b for b in backends if isinstance(b, LocalJudge) and type(b)._warm is not LocalJudge._warm
             and not b.batches]
    before: Future[None] | None = None
    for b in local:  # queued here, before the engine can cut a batch
        before = b._model_thread.submit(_after, before, b._warm_first)
    return before


def _after(before: Future[None] | None, warm: Callable[[], None]) -> None:
    if before is not None:
        before.exception()  # waits; a warm-up's failure is its judge's first batch's to raise
    warm()
