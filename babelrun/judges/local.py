"""What the in-process model backends (llamacpp, mlx) share: the completion-style prompt and
the micro-batcher.

Micro-batching: the first request to arrive leads. It waits up to ``max_wait_ms`` for
``batch_size`` requests in all, then hands the first ``batch_size`` of those waiting to the
model thread in one hop (one batch at a time: a ``CapacityLimiter`` of 1), and gives every
request its reply. Requests left over (more arrived than a batch holds) are not lost: the
first of them is woken to lead the next batch. There is no background task: a leader does the
work inside its own call, so every task still has an owner. A subclass gives
``_run_batch(requests) -> replies``, which runs in the model thread.

Warm-up: ``warm_up(judges)`` loads the models in a thread of its own while the audit plans, so
that neither the command nor the judge's timed window waits for a load the plan could hide
(a subclass gives ``_warm``). A first batch that arrives before the warm-up has finished
waits for it; one that runs first makes the warm-up a no-op.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
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
        self._ready = threading.Lock()  # held by the warm-up: a batch waits for the model it loads
        self.batches: list[int] = []  # the size of every batch run (for tests and benches)
        # Prompt tokens read by the model thread: evaluated, or taken from a prompt evaluated
        # before (a kept prefix), and the prompts that took one; a backend counts them.
        self.prompt_tokens = self.evaluated = self.reused = self.prefix_hits = 0

    def _run_batch(self, requests: list[JudgeRequest]) -> list[JudgeReply]:
        raise NotImplementedError

    def _warm(self) -> None:
        """Load the model ahead of the first batch, leaving no state a batch would read (a
        backend's own; none by default)."""

    def _warm_held(self) -> None:
        """The warm-up, ``_ready`` held by ``warm_up``; skipped once a batch has started (it
        must not change the state that batch reads). A failure is the first batch's to raise,
        where the run reports it: here it only means no warm-up."""
        if self.batches:
            return
        try:
            self._warm()
        except Exception:  # the first batch loads again and raises it (FatalJudgeError, …)
            pass

    def _run_ready(self, requests: list[JudgeRequest]) -> list[JudgeReply]:
        with self._ready:
            return self._run_batch(requests)

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
                replies = await anyio.to_thread.run_sync(self._run_ready, [p.request for p in batch],
                                                         limiter=self._thread)
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


def warm_up(backends: Iterable[object]) -> threading.Thread | None:
    """Start the in-process judges' warm-up (their backend's ``_warm``) in a daemon thread, one
    judge after the other (they may share a model); None when none has one. Nothing waits for
    the thread: a judge's first batch waits for its own warm-up, and a process that ends first
    (a bad plan, an interrupt) leaves it unfinished."""
    local = [b for b in backends if isinstance(b, LocalJudge) and type(b)._warm is not LocalJudge._warm]
    for b in local:  # taken here, before the engine can start a batch (``_warm_held``)
        b._ready.acquire()

    def work() -> None:
        for b in local:
            try:
                b._warm_held()
            finally:
                b._ready.release()

    if not local:
        return None
    thread = threading.Thread(target=work, name="babelrun-warm-up", daemon=True)
    thread.start()
    return thread
