"""The async engine: planned keys in, one log record per finished call out.

Structure (every task has an owner; nothing is fire-and-forget)::

    run ─┬─ writer            (the only task that touches the log)
         ├─ signals           (1st Ctrl-C/SIGTERM: drain; 2nd: cancel)
         ├─ progress
         └─ judges ─┬─ judge 1 ─┬─ producer  (streams undone keys into a bounded stream)
                    │           └─ workers × concurrency (limiter → retries → call → record)
                    └─ judge 2 …

Back pressure: the producer blocks when the judge's stream holds ``2 × concurrency`` calls,
so memory stays flat however large the plan. A fatal reply (400/401/403/404) stops that
judge's task group alone; the other judges go on.
"""

from __future__ import annotations

import math
import random
import signal
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import anyio
from aiolimiter import AsyncLimiter
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt

from .items import Item
from .judges import ORDERS, FatalJudgeError, Judge, JudgeReply, JudgeRequest, RetryableError
from .judges.prompt import TEMPLATES, parse, render
from .log import LogWriter, Record


@dataclass
class JudgeState:
    """Live counters of one judge, read by the progress display and the final summary."""

    name: str
    judge_id: str
    planned: int
    done_before: int
    ok: int = 0
    errors: int = 0
    retries: int = 0
    stopped: str | None = None  # why the judge was stopped, if it was

    @property
    def remaining(self) -> int:
        return self.planned - self.done_before - self.ok


@dataclass
class EngineResult:
    judges: list[JudgeState]
    interrupted: bool = False
    written: int = 0
    elapsed_s: float = 0.0
    stop_reasons: list[str] = field(default_factory=list)


def _limiter(rpm: float | None) -> AsyncLimiter | None:
    if rpm is None:
        return None
    # A bucket one second deep: steady pacing at the configured rate, no minute-sized burst
    # at start that a provider's sliding window would reject.
    burst = max(1.0, rpm / 60.0)
    return AsyncLimiter(burst, burst * 60.0 / rpm)


def _wait(retry_state: RetryCallState) -> float:
    """Jittered exponential backoff; a server's Retry-After wins when it names a time."""
    exc = retry_state.outcome.exception() if retry_state.outcome else None
    after = getattr(exc, "retry_after", None)
    if after is not None:
        return after + random.uniform(0, 0.1)
    return random.uniform(0, min(20.0, 0.25 * 2 ** (retry_state.attempt_number - 1)))


def _record(judge: Judge, item: Item, order: str, **fields) -> Record:
    return Record(
        judge_id=judge.judge_id, item_id=item.item_id, order=order, judge=judge.spec.name,
        kind=item.kind, lang=item.lang, perturbation=item.perturbation, severity=item.severity,
        ref_len=item.ref_len, pert_len=item.pert_len, ts=round(time.time(), 3), **fields,
    )


def _verdict(slot: str, order: str) -> str:
    if slot in ("tie", "invalid"):
        return slot
    ref_slot = "A" if order == "ref_first" else "B"
    return "reference" if slot == ref_slot else "perturbed"


def _ok_record(judge: Judge, request: JudgeRequest, reply: JudgeReply, attempts: int, latency: float) -> Record:
    slot = parse(reply.raw)
    return _record(
        judge, request.item, request.order, status="ok", verdict=_verdict(slot, request.order),
        slot=slot, raw=reply.raw, latency_ms=round(latency * 1000, 2), attempts=attempts,
        tokens_in=reply.tokens_in, tokens_out=reply.tokens_out,
        served_model=reply.served_model, fingerprint=reply.fingerprint,
    )


class _Stop(Exception):
    """Raised inside a judge's task group when the judge must stop (a fatal reply)."""


async def _call(judge: Judge, request: JudgeRequest, limiter, state: JudgeState) -> Record:
    attempts = 0
    retrying = AsyncRetrying(
        stop=stop_after_attempt(judge.spec.retries + 1),
        wait=_wait,
        retry=retry_if_exception_type(RetryableError),
        sleep=anyio.sleep,
        reraise=True,
    )
    try:
        async for attempt in retrying:
            with attempt:
                attempts += 1
                if attempts > 1:
                    state.retries += 1
                if limiter is not None:
                    await limiter.acquire()
                started = time.perf_counter()
                reply = await judge.judge(request)
                return _ok_record(judge, request, reply, attempts, time.perf_counter() - started)
    except RetryableError as e:
        return _record(judge, request.item, request.order, status="error", attempts=attempts,
                       error_kind=e.kind, error=str(e))
    raise AssertionError("unreachable")  # tenacity either returns or reraises


async def _produce(judge: Judge, items: list[Item], done: set, send: ObjectSendStream) -> None:
    template = TEMPLATES[judge.spec.prompt]
    async with send:
        for item in items:
            for order in ORDERS:
                if (judge.judge_id, item.item_id, order) in done:
                    continue
                a, b = (item.reference, item.perturbed) if order == "ref_first" else (item.perturbed, item.reference)
                await send.send(JudgeRequest(item, order, render(template, item.prompt, a, b)))


async def _work(judge: Judge, calls: ObjectReceiveStream, records: ObjectSendStream, limiter, state: JudgeState) -> None:
    async with calls, records:
        async for request in calls:
            try:
                record = await _call(judge, request, limiter, state)
            except FatalJudgeError as e:
                state.stopped = f"judge {judge.spec.name!r} stopped: {e}"
                state.errors += 1
                await records.send(_record(judge, request.item, request.order, status="error",
                                           error_kind=e.kind, error=str(e)))
                raise _Stop from None
            if record.status == "ok":
                state.ok += 1
            else:
                state.errors += 1
            await records.send(record)


async def _run_judge(judge: Judge, items: list[Item], done: set, records: ObjectSendStream,
                     state: JudgeState, producers: list[anyio.CancelScope]) -> None:
    concurrency = judge.spec.concurrency
    send, recv = anyio.create_memory_object_stream[JudgeRequest](max_buffer_size=2 * concurrency)
    limiter = _limiter(judge.spec.rate_limit.rpm)
    try:
        async with records, anyio.create_task_group() as tg:
            scope = anyio.CancelScope()
            producers.append(scope)

            async def produce() -> None:
                with scope:
                    await _produce(judge, items, done, send)
                await send.aclose()  # also when cancelled: lets the workers drain and end

            tg.start_soon(produce)
            async with recv:
                for _ in range(concurrency):
                    tg.start_soon(_work, judge, recv.clone(), records.clone(), limiter, state)
    except* _Stop:
        pass
    finally:
        with anyio.CancelScope(shield=True):
            await judge.aclose()


async def _write(records: ObjectReceiveStream, writer: LogWriter) -> None:
    async with records:
        async for record in records:
            batch = [record]
            while True:
                try:
                    batch.append(records.receive_nowait())
                except (anyio.WouldBlock, anyio.EndOfStream):
                    break
            writer.write_batch(batch)


async def _signals(on_first, on_second) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as received:
        count = 0
        async for _ in received:
            count += 1
            (on_first if count == 1 else on_second)()


async def _progress(states: list[JudgeState], started: float, interval: float, tty: bool) -> None:
    while True:
        await anyio.sleep(interval)
        line = progress_line(states, time.monotonic() - started)
        if tty:
            sys.stderr.write("\r\x1b[K" + line)
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()


def progress_line(states: list[JudgeState], elapsed: float) -> str:
    """``name done/total (pct) rate ETA retries errors`` per judge; rate is this session's."""
    parts = []
    for s in states:
        done = s.done_before + s.ok
        pct = 100.0 * done / s.planned if s.planned else 100.0
        rate = s.ok / elapsed if elapsed > 0 else 0.0
        eta = _clock(s.remaining / rate) if rate > 0 and s.remaining > 0 else "-"
        mark = " STOPPED" if s.stopped else ""
        parts.append(f"{s.name} {done}/{s.planned} ({pct:.0f}%) {rate:.1f}/s ETA {eta} "
                     f"retries {s.retries} errors {s.errors}{mark}")
    return " | ".join(parts)


def _clock(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "-"
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


async def run(judges: Iterable[Judge], items: list[Item], done: set, writer: LogWriter, *,
              progress_interval: float | None = None, handle_signals: bool = True) -> EngineResult:
    """Judge every (judge, item, order) not in ``done``; records go to ``writer``."""
    judges = list(judges)
    states = [
        JudgeState(j.spec.name, j.judge_id, 2 * len(items),
                   sum((j.judge_id, it.item_id, o) in done for it in items for o in ORDERS))
        for j in judges
    ]
    result = EngineResult(states)
    producers: list[anyio.CancelScope] = []
    started = time.monotonic()
    tty = sys.stderr.isatty()
    if progress_interval is None:
        progress_interval = 0.5 if tty else 10.0
    send, recv = anyio.create_memory_object_stream[Record](max_buffer_size=1024)

    judges_scope = anyio.CancelScope()

    async with anyio.create_task_group() as outer:

        def drain() -> None:
            result.interrupted = True
            sys.stderr.write("\ninterrupted: finishing the calls in flight (again to abort)\n")
            for scope in producers:
                scope.cancel()

        def abort() -> None:
            result.interrupted = True
            judges_scope.cancel()

        if handle_signals:
            outer.start_soon(_signals, drain, abort)
        outer.start_soon(_progress, states, started, progress_interval, tty)
        async with anyio.create_task_group() as pipeline:
            # The writer ends when the last record stream closes: after every judge has ended.
            pipeline.start_soon(_write, recv, writer)
            with judges_scope:
                async with send, anyio.create_task_group() as tg:
                    for judge, state in zip(judges, states, strict=True):
                        tg.start_soon(_run_judge, judge, items, done, send.clone(), state, producers)
        outer.cancel_scope.cancel()  # the signal and progress helpers

    if tty:
        sys.stderr.write("\r\x1b[K" + progress_line(states, time.monotonic() - started) + "\n")
    result.written = writer.written
    result.elapsed_s = time.monotonic() - started
    result.stop_reasons = [s.stopped for s in states if s.stopped]
    return result
