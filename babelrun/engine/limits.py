"""Provider limits, shared by every judge on one provider account.

An account is (base URL, key variable): two judges with different models on the same API
key draw on one requests/min and one tokens/min budget, as the provider counts them. Where
their manifests set different limits, the account takes the smaller.

- Requests/min is an aiolimiter leaky bucket. A bucket ``d`` deep draining at ``r`` admits at
  most ``d + 60·r`` calls in any minute, so with ``d = 2`` it drains at ``(rpm − 2)/60`` per
  second: a provider counting over any sliding minute never sees more than ``rpm``, and the
  second slot absorbs the event loop's timer lateness, which a one-deep bucket accumulates
  (measured: 96 % of the rate at 40 calls/s). Below 40 rpm the bucket is one deep
  and drains at ``(rpm − 1)/60``.
  Tokens/min is a bucket one second deep (a call's tokens must fit in it).
- Tokens are estimated before a call (UTF-8 bytes / 3 of the prompt — safe for CJK and Indic
  scripts, where a token is often one character — plus ``max_tokens``) and settled from the
  reply's usage: an overrun is taken from the bucket, an overestimate given back.
- A 429 with ``Retry-After`` or ``x-ratelimit-reset-*`` pauses the whole account until then,
  so no other worker spends its attempts against a limit the provider has announced.
- ``CallLimits`` settles, once per judge and process, how many calls are in flight: the
  worker tasks, the gate's range and the HTTP connection pool are all sized from it.
  ``concurrency`` in a manifest is the judge's calls in flight across the whole run; the N
  shards of a sharded run (``--shard``, Ray workers) split it.
- ``AdaptiveConcurrency`` (optional, per judge) grows the number of calls in flight by one per
  window of successes and halves it on a 429, at most once per second (AIMD, as TCP does).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar, overload

import anyio
import msgspec
from aiolimiter import AsyncLimiter
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt

from .. import judges
from ..core.keys import Shard
from ..errors import RetryableError
from ..judges.http import bounded_wait
from ..spec import JudgeSpec


class TokenLimiter(AsyncLimiter):
    """A leaky bucket whose acquisitions can be settled once the true amount is known."""

    def settle(self, estimated: float, actual: float) -> float:
        """Correct an acquisition of ``estimated`` to ``actual``; returns any amount still
        owed (an overrun larger than the bucket can take at once is acquired by the caller)."""
        self._leak()
        delta = actual - estimated
        if delta <= 0:
            self._level = max(0.0, self._level + delta)
            return 0.0
        room = max(0.0, self.max_rate - self._level)
        taken = min(room, delta)
        self._level += taken
        return delta - taken


_L = TypeVar("_L", bound=AsyncLimiter)
_T = TypeVar("_T")


@overload
def _bucket(per_minute: float | None, depth: float) -> AsyncLimiter | None: ...


@overload
def _bucket(per_minute: float | None, depth: float, cls: type[_L]) -> _L | None: ...


def _bucket(per_minute: float | None, depth: float, cls: type[AsyncLimiter] = AsyncLimiter) -> AsyncLimiter | None:
    """A bucket ``depth`` deep that drains at ``per_minute``."""
    if per_minute is None:
        return None
    return cls(depth, depth * 60.0 / per_minute)


def _request_bucket(rpm: float | None) -> AsyncLimiter | None:
    if rpm is None:
        return None
    depth = 2.0 if rpm >= 40 else 1.0
    per_minute = rpm - depth if rpm > 2 * depth else rpm
    return AsyncLimiter(depth, depth * 60.0 / per_minute)


class Budget(Protocol):
    """What the engine asks of an account's budget. ``Account`` holds it in this process; the
    Ray executor's ``cluster.RemoteAccount`` asks an actor holding an ``Account`` for all
    workers. ``tpm`` is None when tokens are not limited (no estimate is then made)."""

    tpm: float | None

    async def admit(self, estimated_tokens: int) -> int: ...

    async def settle(self, reserved: int, used: int | None) -> None: ...

    def pause(self, seconds: float) -> None: ...

    def open_now(self, estimated_tokens: int = 0) -> bool:
        """Whether ``admit(estimated_tokens)``, called next, would return without waiting
        (no pause, room in the buckets): the engine then skips the cancel scope a drain
        needs around a wait, ~10 µs a call."""
        ...


class Account:
    """The shared budget of one provider account."""

    def __init__(self, key: tuple[str, str], rpm: float | None, tpm: float | None):
        self.key = key
        self.rpm, self.tpm = rpm, tpm
        self.requests = _request_bucket(rpm)
        self.tokens: TokenLimiter | None = _bucket(tpm, max(1.0, (tpm or 0) / 60.0), TokenLimiter)
        self.paused_until = 0.0
        self.owed = 0.0  # tokens used past the reservations, paid by the next admit

    def open_now(self, estimated_tokens: int = 0) -> bool:
        # ``admit`` reads the same three conditions and awaits nothing when they hold
        # (aiolimiter's ``acquire`` returns at once when ``has_capacity``).
        if self.paused_until > time.monotonic():
            return False
        if self.requests is not None and not self.requests.has_capacity():
            return False
        return self.tokens is None or self.tokens.has_capacity(min(estimated_tokens, int(self.tokens.max_rate)))

    def pause(self, seconds: float) -> None:
        bounded, _ = bounded_wait(seconds)  # a Retry-After of inf must not pause forever
        if bounded is not None:
            self.paused_until = max(self.paused_until, time.monotonic() + bounded)

    async def admit(self, estimated_tokens: int) -> int:
        """Wait for the account's budget; returns the tokens actually reserved."""
        while (wait := self.paused_until - time.monotonic()) > 0:
            await anyio.sleep(wait)
        if self.requests is not None:
            await self.requests.acquire()
        reserved = 0
        if self.tokens is not None:
            while self.owed > 0:  # an earlier call's overrun (settle), paid a bucket at a time
                step = min(self.owed, self.tokens.max_rate)
                self.owed -= step
                await self.tokens.acquire(step)
            reserved = min(estimated_tokens, int(self.tokens.max_rate))
            await self.tokens.acquire(reserved)
        return reserved

    async def settle(self, reserved: int, used: int | None) -> None:
        """Correct a reservation to the tokens used. Never waits: an overrun the bucket cannot
        take now is owed, and the next ``admit`` pays it first (a wait a drain can end), so a
        call's record is never held by its own bill. The debt is capped at one minute's
        budget: a reply claiming 10^12 tokens slows the account by a minute, not for ever."""
        if self.tokens is None or used is None:
            return
        owed = self.tokens.settle(reserved, used)
        if owed > 0:
            self.owed = min(self.owed + owed, float(self.tpm or 0.0))


def estimate_tokens(messages: list[dict[str, str]], max_tokens: int) -> int:
    prompt_bytes = sum(len(m["content"].encode()) for m in messages)
    return math.ceil(prompt_bytes / 3) + max_tokens


def account_key(spec: JudgeSpec) -> tuple[str, str]:
    if judges.capabilities(spec.backend).in_process:
        return (spec.backend, spec.name)  # a model in this process: its own "provider", no account
    return ((spec.endpoint or "").rstrip("/"), spec.api_key_env or "")


def _smaller(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


def account_limits(specs: list[JudgeSpec]) -> dict[tuple[str, str], tuple[float | None, float | None]]:
    """Account key -> its (rpm, tpm): the smallest its judges state."""
    limits: dict[tuple[str, str], tuple[float | None, float | None]] = {}
    for spec in specs:
        rpm, tpm = limits.get(account_key(spec), (None, None))
        limits[account_key(spec)] = (_smaller(rpm, spec.rate_limit.rpm), _smaller(tpm, spec.rate_limit.tpm))
    return limits


def _share(limit: float | None, share: float) -> float | None:
    return None if limit is None else limit * share


def accounts(specs: list[JudgeSpec], share: float = 1.0) -> dict[str, Account]:
    """Judge name -> its account, one Account object per distinct account key. ``share``:
    the fraction of each account's limits this process may use (a shard of N run outside
    Ray takes 1/N, so that N shards side by side stay within the account)."""
    shared = {key: Account(key, _share(rpm, share), _share(tpm, share))
              for key, (rpm, tpm) in account_limits(specs).items()}
    return {spec.name: shared[account_key(spec)] for spec in specs}


class FixedConcurrency:
    """Fixed concurrency: the worker count is the limit; nothing to adapt."""

    async def __aenter__(self) -> None:
        pass

    async def __aexit__(self, *exc: object) -> None:
        pass

    def success(self) -> None:
        pass

    def pushback(self) -> None:
        pass


class CallLimits(msgspec.Struct, frozen=True):
    """How many calls of one judge this process keeps in flight, settled once and read by
    everything sized for it: the worker tasks (``workers``), the adaptive gate's range (from
    ``gate_start`` up to ``workers``) and the backend's connection pool (``pool``).

    ``concurrency`` is the judge's calls in flight across the whole run: shard i of N takes
    ``c // N``, plus one while i < ``c % N``, so the shards add up to ``c``; each takes at
    least one, so a run with more shards than ``c`` has one call per shard in flight."""

    workers: int
    gate_start: int
    adaptive: bool

    @classmethod
    def of(cls, spec: JudgeSpec, shard: Shard | None = None) -> CallLimits:
        c = spec.concurrency
        if shard is not None:
            c = c // shard.count + (1 if shard.index < c % shard.count else 0)
        c = max(1, c)
        return cls(c, min(4, c) if spec.adaptive_concurrency else c, spec.adaptive_concurrency)

    @property
    def pool(self) -> int:
        return self.workers

    def gate(self) -> AdaptiveConcurrency | FixedConcurrency:
        return AdaptiveConcurrency(self.gate_start, self.workers) if self.adaptive else FixedConcurrency()


class AdaptiveConcurrency:
    """A gate whose width moves: +1 per ``width`` successes, halved on pushback."""

    def __init__(self, start: int, maximum: int, cooldown_s: float = 1.0):
        self.width = float(max(1, min(start, maximum)))
        self.maximum = maximum
        self.in_flight = 0
        self.cooldown_s = cooldown_s
        self._last_cut = 0.0
        self._changed = anyio.Event()

    async def __aenter__(self) -> None:
        while self.in_flight >= int(self.width):
            await self._changed.wait()
        self.in_flight += 1

    async def __aexit__(self, *exc: object) -> None:
        self.in_flight -= 1
        self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    def success(self) -> None:
        before = int(self.width)
        self.width = min(float(self.maximum), self.width + 1.0 / self.width)
        if int(self.width) > before:
            self._notify()

    def pushback(self) -> None:
        now = time.monotonic()
        if now - self._last_cut >= self.cooldown_s:
            self.width = max(1.0, self.width / 2)
            self._last_cut = now


def backoff(failed_attempts: int, exc: BaseException | None) -> float:
    """Jittered exponential backoff; a server's Retry-After wins when it names a time (never
    more than ``MAX_RETRY_AFTER_S``, whatever a backend let through)."""
    after, _ = bounded_wait(getattr(exc, "retry_after", None))
    if after is not None:
        return after + random.uniform(0, 0.1)
    return random.uniform(0, min(20.0, 0.25 * 2 ** (failed_attempts - 1)))


def _wait(retry_state: RetryCallState) -> float:
    # tenacity counts from the first retry; the bare first attempt came before it.
    exc = retry_state.outcome.exception() if retry_state.outcome else None
    return backoff(retry_state.attempt_number + 1, exc)


def retry_policy(retries: int, sleep: Callable[[float], Awaitable[None]] = anyio.sleep) -> AsyncRetrying:
    """The retries after a first failed attempt: up to ``retries`` more on a
    ``RetryableError``, waiting ``backoff`` between them. The one policy for calls (pipeline)
    and provider batch requests (batches). ``sleep``: how to wait (the pipeline's ends early
    on a drain)."""
    return AsyncRetrying(stop=stop_after_attempt(retries), retry=retry_if_exception_type(RetryableError),
                         wait=_wait, sleep=sleep, reraise=True)


# ignore[return]: under reraise=True tenacity's loop ends in a return or a raise, never by
# running out, which its types cannot say.
async def retrying(op: Callable[[], Awaitable[_T]], retries: int,  # type: ignore[return]
                   on_retry: Callable[[RetryableError], object] | None = None,
                   sleep: Callable[[float], Awaitable[None]] = anyio.sleep) -> _T:
    """``await op()``, retried under ``retry_policy``; ``on_retry(error)`` before each retry."""
    try:
        return await op()
    except RetryableError as e:
        if retries <= 0:
            raise
        failure = e
    await sleep(backoff(1, failure))
    async for attempt in retry_policy(retries, sleep):
        with attempt:
            if on_retry is not None:
                on_retry(failure)
            try:
                return await op()
            except RetryableError as e:
                failure = e
                raise
