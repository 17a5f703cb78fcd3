"""The fake judge server itself: a background thread running an aiohttp app on 127.0.0.1
that decides each request's fate under one lock (a key check, the scripted faults, the rpm
window, the seeded random faults) and answers in the wire format of the path it came to."""

from __future__ import annotations

import asyncio
import functools
import math
import random
import threading
import time
from collections import Counter, deque

import msgspec
from aiohttp import web

from ._faults import ESCAPES, FAULT_KINDS, HOSTILE, LATENCY_DISTRIBUTIONS, STATUSES_5XX, Fate, sample_latency
from ._judge import choose, flipped
from ._wire import ROUTES, WIRE_FORMATS, WireFormat


def _seconds(value: float) -> str:
    """``1.5`` -> ``"1.5"``: seconds to the millisecond, rounded up so that waiting them is enough."""
    return f"{math.ceil(value * 1000) / 1000:.3f}".rstrip("0").rstrip(".")


class FakeJudgeServer:
    """An OpenAI-compatible fake judge on 127.0.0.1, run in a background thread.

    Every knob is a keyword argument:

    * ``latency_s`` (0): mean seconds before a 200 reply (a verdict or a malformed body).
      Error replies (401, 429, 5xx) and drops come at once, as from a front end.
    * ``latency`` ("fixed"): its distribution, "fixed", "uniform" (``latency_s ± jitter_s``)
      or "lognormal" (shape ``sigma``, mean ``latency_s``); see :func:`sample_latency`.
    * ``jitter_s`` (0): half-width of the uniform distribution, at most ``latency_s``.
    * ``sigma`` (0.5): shape of the lognormal distribution.
    * ``api_key`` (None): if set, requests without ``Authorization: Bearer <key>`` get 401.
    * ``faults`` (None): HTTP statuses to answer the first requests with, in order (e.g.
      ``[429, 500]``); ``0`` drops the connection instead. They come before everything below.
    * ``retry_after`` (0.05): the ``Retry-After`` seconds sent with scripted and random 429s.
    * ``model`` ("fake-judge-1"): the model name the replies carry.
    * ``rate_429``, ``rate_5xx``, ``rate_timeout``, ``rate_drop``, ``rate_malformed`` (0):
      the chance, per request, of each random fault: a 429 with ``Retry-After``; a 500, 502
      or 503 (equally likely); a hang of ``hang_s`` before the (normal) reply, so that a client
      with a shorter timeout gives up; a connection closed without a reply; a 200 whose body
      is cut-off JSON or JSON without ``choices`` (equally likely). The kinds exclude each
      other, so each happens at exactly its rate and the rates may sum to at most 1.
    * ``hang_s`` (30): how long a ``timeout`` fault hangs. Shutting the server down ends it.
    * ``rpm_limit`` (None): at most this many requests admitted per sliding ``rpm_window_s``
      window; the others get 429 with a ``Retry-After`` saying when a slot frees. Rejected
      requests take no slot. When set, every reply carries ``x-ratelimit-limit-requests``,
      ``x-ratelimit-remaining-requests`` and ``x-ratelimit-reset-requests`` (seconds until
      the next slot frees, OpenAI style: "1.5s").
    * ``rpm_window_s`` (60): the window of ``rpm_limit``; shorter only to test it quickly.
    * ``seed`` (0): seeds the one ``random.Random`` behind every random choice. The n-th
      request to arrive always draws the same fate, whatever the others got.
    * ``port`` (0): the port to listen on; 0 takes a free one.
    * ``flip_rate`` (0): the share of prompts (chosen by hash, so the same ones every time)
      answered with the other slot: a provider's silent model update, for ``babelrun check``.
    * ``sample_flip`` (0): the chance, per request, that the verdict is the other slot: a
      sampled judge's own noise. Drawn by hash of the prompt and the request's ``seed`` (the
      body's, sent by a judge that sets ``seed``) or, without one, the prompt's count so far: the
      k asks of one presentation flip independently, and with seeds the same ones in every run.
      ``prompts`` counts the requests of each prompt (the last user message).
    * ``fingerprint`` ("fp_fake"): the ``system_fingerprint`` the replies carry.
    * ``gather`` (0): hold the first verdicts until this many requests are in flight at once
      (then serve as usual): proof, by count and not by clock, that that many clients (say
      one per shard process) were calling together. ``gathered`` says whether it happened;
      after ``gather_timeout_s`` (30) the held requests go on without it.
    * ``reply`` (None): a function of the last message's text giving the reply's content
      (a judge that reasons first, a scripted rule); unset, the verdict of ``choose``.
      ``completion_tokens`` is then the reply's length / 4.
    * ``cached_share`` (0): the share of each prompt's input tokens (its length / 4) the
      usage reports as served from the provider's prompt cache, in each wire format's own
      field (OpenAI ``prompt_tokens_details.cached_tokens``, Anthropic
      ``cache_read_input_tokens``, Gemini ``cachedContentTokenCount``); 0 reports none.
    * ``cache_write_share`` (0): the share of each prompt's input tokens an Anthropic usage
      reports as written to the prompt cache (``cache_creation_input_tokens``); the other
      wire formats report no writes.

    The order of decisions for a request: 401 for a wrong key, 400 for a body that is not a
    chat request, the scripted ``faults``, the ``rpm_limit``, the random faults, the verdict.

    Attributes, updated under a lock; read them from another thread through :meth:`snapshot`,
    which copies the counters at one instant (plain numbers may also be read directly):
    ``url``, ``port``, ``requests`` (all received), ``statuses`` (a Counter of the statuses
    replied; drops have none), ``injected`` (a Counter of injected faults: the random kinds in
    ``FAULT_KINDS``, "rpm" for rate-limit rejections, "scripted" for the ``faults`` list),
    ``served_ok`` (verdicts replied with 200 to a client still connected) and
    ``authorizations`` (the Authorization headers seen).
    """

    def __init__(self, *, latency_s: float = 0.0, api_key: str | None = None,
                 faults: list[int] | None = None, retry_after: float = 0.05,
                 model: str = "fake-judge-1", latency: str = "fixed", jitter_s: float = 0.0,
                 sigma: float = 0.5, rate_429: float = 0.0, rate_5xx: float = 0.0,
                 rate_timeout: float = 0.0, rate_drop: float = 0.0, rate_malformed: float = 0.0,
                 hang_s: float = 30.0, rpm_limit: int | None = None, rpm_window_s: float = 60.0,
                 seed: int | None = 0, port: int = 0, flip_rate: float = 0.0,
                 fingerprint: str = "fp_fake", reply=None, hostile: str | None = None,
                 hostile_status: int | None = None, redirect_to: str | None = None, gather: int = 0,
                 gather_timeout_s: float = 30.0, cached_share: float = 0.0,
                 cache_write_share: float = 0.0, sample_flip: float = 0.0):
        self.reply = reply
        self.sample_flip = sample_flip
        self.cached_share = cached_share
        self.cache_write_share = cache_write_share
        self.gather = gather
        self.gather_timeout_s = gather_timeout_s
        self.latency_s = latency_s
        self.latency = latency
        self.jitter_s = jitter_s
        self.sigma = sigma
        self.api_key = api_key
        self.faults = list(faults or [])
        self.retry_after = retry_after
        self.model = model
        self.rates = dict(zip(FAULT_KINDS, (rate_429, rate_5xx, rate_timeout, rate_drop,
                                            rate_malformed), strict=True))
        self.hang_s = hang_s
        self.rpm_limit = rpm_limit
        self.rpm_window_s = rpm_window_s
        self.seed = seed
        self.port = port
        self.flip_rate = flip_rate
        self.fingerprint = fingerprint
        self.hostile = hostile
        self.hostile_status = hostile_status
        self.redirect_to = redirect_to
        self._check()
        self._reset_counters()
        # One lock guards the counters, the script, the random stream and the rpm window: the
        # handlers run on the server's thread while tests read from theirs.
        self._lock = threading.Lock()
        self._rng = random.Random(seed)
        self._admitted: deque[float] = deque()  # monotonic times of admissions in the window

        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._start_error: BaseException | None = None
        self._stop: asyncio.Event | None = None
        self._gathered: asyncio.Event | None = None

    def _reset_counters(self) -> None:
        """What the server has seen so far, for tests to read."""
        self.requests = 0
        self.statuses: Counter = Counter()
        self.injected: Counter = Counter()
        self.served_ok = 0
        self.in_flight = 0  # held by ``gather``, now; and the most at once
        self.most_in_flight = 0
        self.authorizations: set[str] = set()
        self.prompts: Counter = Counter()  # requests per prompt (the last user message)
        self.last_body: dict | None = None  # the last request's JSON body, and its headers
        self.last_headers: dict[str, str] = {}
        self.last_path = ""

    @property
    def gathered(self) -> bool:
        """Whether ``gather`` requests were in flight at once (see the class docstring)."""
        return self._gathered is not None and self._gathered.is_set()

    def _check(self) -> None:
        if self.hostile is not None and self.hostile not in HOSTILE:
            raise ValueError(f"hostile must be one of {', '.join(HOSTILE)}, not {self.hostile!r}")
        for kind, rate in self.rates.items():
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"rate_{kind} must be in [0, 1], not {rate}")
        if sum(self.rates.values()) > 1.0 + 1e-9:
            raise ValueError(f"the fault rates sum to {sum(self.rates.values()):g}; at most 1")
        if self.latency not in LATENCY_DISTRIBUTIONS:
            raise ValueError(f"latency must be one of {LATENCY_DISTRIBUTIONS}, not {self.latency!r}")
        if self.latency_s < 0 or self.jitter_s < 0 or self.sigma < 0 or self.hang_s < 0:
            raise ValueError("latency_s, jitter_s, sigma and hang_s must be >= 0")
        if self.latency == "uniform" and self.jitter_s > self.latency_s:
            raise ValueError("jitter_s must be at most latency_s: latencies cannot be negative")
        if self.rpm_limit is not None and self.rpm_limit < 1:
            raise ValueError(f"rpm_limit must be >= 1, not {self.rpm_limit}")
        if self.rpm_window_s <= 0:
            raise ValueError("rpm_window_s must be > 0")
        if self.gather < 0 or self.gather_timeout_s <= 0:
            raise ValueError("gather must be >= 0 and gather_timeout_s > 0")
        if not 0.0 <= self.sample_flip <= 1.0:
            raise ValueError(f"sample_flip must be in [0, 1], not {self.sample_flip}")
        if not 0.0 <= self.flip_rate <= 1.0:
            raise ValueError(f"flip_rate must be in [0, 1], not {self.flip_rate}")
        if not 0.0 <= self.cached_share <= 1.0:
            raise ValueError(f"cached_share must be in [0, 1], not {self.cached_share}")
        if not 0.0 <= self.cache_write_share <= 1.0 - self.cached_share:
            raise ValueError(f"cache_write_share must be in [0, 1 - cached_share], not {self.cache_write_share}")

    @property
    def url(self) -> str:
        """The OpenAI-compatible base URL."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def root(self) -> str:
        """The base URL of the Anthropic and Gemini APIs (``endpoint`` of those backends)."""
        return f"http://127.0.0.1:{self.port}"

    def endpoint(self, protocol: str) -> str:
        return self.url if protocol == "openai" else self.root

    def snapshot(self) -> dict:
        """A consistent copy of the counters, taken under the lock."""
        with self._lock:
            return {"requests": self.requests, "served_ok": self.served_ok,
                    "statuses": dict(self.statuses), "injected": dict(self.injected)}

    # -- deciding -------------------------------------------------------------------------

    def _draw(self) -> Fate:
        """The random fate of the next request. Call under the lock.

        It always makes the same draws, whatever they decide, so that the n-th request's fate
        depends only on the seed and n, not on what came before (scripted faults, rpm).
        """
        u = self._rng.random()
        status_5xx = self._rng.choice(STATUSES_5XX)
        truncate = self._rng.random() < 0.5
        latency_s = sample_latency(self._rng, self.latency, self.latency_s, self.jitter_s, self.sigma)
        fault = None
        for kind in FAULT_KINDS:  # each kind owns a slice of [0, 1) as wide as its rate
            if u < self.rates[kind]:
                fault = kind
                break
            u -= self.rates[kind]
        return Fate(fault, status_5xx, truncate, latency_s)

    def _admit(self) -> float | None:
        """Take an rpm slot: None if admitted, else seconds until one frees. Call under the lock."""
        now = self._prune()
        if len(self._admitted) < self.rpm_limit:
            self._admitted.append(now)
            return None
        return self._admitted[0] + self.rpm_window_s - now

    def _prune(self) -> float:
        """Forget admissions older than the window; returns now."""
        now = time.monotonic()
        while self._admitted and self._admitted[0] <= now - self.rpm_window_s:
            self._admitted.popleft()
        return now

    def _rate_headers(self) -> dict[str, str]:
        if self.rpm_limit is None:
            return {}
        with self._lock:
            now = self._prune()
            remaining = self.rpm_limit - len(self._admitted)
            reset = self._admitted[0] + self.rpm_window_s - now if self._admitted else 0.0
        return {"x-ratelimit-limit-requests": str(self.rpm_limit),
                "x-ratelimit-remaining-requests": str(remaining),
                "x-ratelimit-reset-requests": _seconds(reset) + "s"}

    # -- handling -------------------------------------------------------------------------

    async def _handle(self, request: web.Request, proto: WireFormat) -> web.StreamResponse:
        key = proto.key(request)
        with self._lock:
            self.requests += 1
            scripted = self.faults.pop(0) if self.faults else None
            plan = self._draw()
            self.authorizations.add(request.headers.get(proto.key_header, ""))
        if self.api_key is not None and key != self.api_key:
            return self._error(proto, 401, "Incorrect API key provided")
        try:
            payload = await request.read()
            prompt, soft = proto.prompt(payload)
            with self._lock:
                self.last_body, self.last_headers = msgspec.json.decode(payload), dict(request.headers)
                self.last_path = request.path_qs
                self.prompts[prompt] += 1
                seed = self.last_body.get("seed") if isinstance(self.last_body, dict) else None
                draw = f"seed:{seed}" if isinstance(seed, int) else f"nth:{self.prompts[prompt]}"
        except ValueError as e:
            return self._error(proto, 400, str(e))
        if self.hostile is not None:
            return await self._hostile(request, proto, key, prompt)
        if scripted is not None:
            return self._scripted(proto, request, scripted)
        if self.rpm_limit is not None:
            with self._lock:
                wait = self._admit()
            if wait is not None:
                self._count_fault("rpm")
                return self._error(proto, 429, "Rate limit reached for requests",
                                   {"Retry-After": _seconds(wait)})
        if plan.fault is not None:
            self._count_fault(plan.fault)
            return await self._inject(proto, request, plan, prompt)
        if self.gather:
            await self._gather()
        return await self._verdict(proto, request, prompt, plan.latency_s, soft, draw)

    async def _gather(self) -> None:
        """Wait until ``gather`` requests are here at once (or ``gather_timeout_s`` passed)."""
        assert self._gathered is not None
        with self._lock:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            if self.in_flight >= self.gather:
                self._gathered.set()
        try:
            await asyncio.wait_for(self._gathered.wait(), self.gather_timeout_s)
        except TimeoutError:
            pass
        finally:
            with self._lock:
                self.in_flight -= 1

    async def _hostile(self, request: web.Request, proto: WireFormat, key: str, prompt: str) -> web.StreamResponse:
        kind = self.hostile
        self._count_fault(kind)
        if kind in ("echo_key_4xx", "echo_key_5xx"):
            # The key whole near the start, and again across the 200th character: a cut
            # before masking would leave the second one's head.
            head = f"Incorrect API key provided: {key}. "
            status = 503 if kind == "echo_key_5xx" else self.hostile_status or 400
            return self._error(proto, status, head + "x" * max(0, 190 - len(head)) + key,
                               {"Retry-After": "0.01"} if status == 503 else None)
        if kind == "echo_headers":  # a proxy's debug page; the key's header first, across the cut
            first = f"{proto.key_header}: {request.headers.get(proto.key_header, '')}"
            pad = "x" * max(0, 190 - (len(first) - len(key)))
            dump = "".join(f"{name}: {value}\n" for name, value in request.headers.items())
            return self._reply(self.hostile_status or 400, f"{pad}{first}\n{dump}".encode(),
                               content_type="text/plain")
        if kind == "redirect":
            return self._reply(307, b"", {"Location": self.redirect_to or "http://127.0.0.1:9/"})
        if kind == "endless":
            return await self._endless(request)
        if kind == "huge":
            completion = proto.completion("A" * (10 << 20), self.model, prompt, False)
            return self._reply(200, msgspec.json.encode(completion))
        if kind == "retry_after_inf":
            return self._error(proto, 429, "slow down", {"Retry-After": "inf"})
        if kind == "retry_after_huge":
            return self._error(proto, 429, "slow down", {"Retry-After": "1e9",
                                                          "x-ratelimit-reset-requests": "99999h"})
        # escapes
        return self._error(proto, self.hostile_status or 401, f"bad key{ESCAPES}")

    async def _endless(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        await response.prepare(request)
        chunk = b'{"choices": [' + b" " * (1 << 16)
        try:
            while not self._stop.is_set():
                await response.write(chunk)
                chunk = b" " * (1 << 16)
        except (ConnectionError, RuntimeError):
            pass  # the client went away: what a capped reader does
        return response

    def _scripted(self, proto: WireFormat, request: web.Request, fault: int) -> web.StreamResponse:
        self._count_fault("scripted")
        if fault == 0:
            return self._drop(request)
        headers = {"Retry-After": str(self.retry_after)} if fault == 429 else None
        return self._error(proto, fault, f"injected {fault}", headers)

    async def _inject(self, proto: WireFormat, request: web.Request, plan: Fate, prompt: str) -> web.StreamResponse:
        if plan.fault == "429":
            return self._error(proto, 429, "injected 429", {"Retry-After": str(self.retry_after)})
        if plan.fault == "5xx":
            return self._error(proto, plan.status_5xx, f"injected {plan.status_5xx}")
        if plan.fault == "drop":
            return self._drop(request)
        if plan.fault == "timeout":
            # The hang stands in for the latency; a client still there after it gets its verdict.
            return await self._verdict(proto, request, prompt, self.hang_s)  # a timeout: never soft
        # malformed: the model "answered", so it takes the usual time.
        if not await self._pause(plan.latency_s):
            return self._drop(request)
        completion = proto.completion(choose(prompt), self.model, prompt, False)
        if plan.truncate:
            body = msgspec.json.encode(completion)
            body = body[: len(body) // 2]  # cut mid-object: not JSON at all
        else:
            del completion[proto.body_key]  # JSON, but no answer in it
            body = msgspec.json.encode(completion)
        return self._reply(200, body)

    async def _verdict(self, proto: WireFormat, request: web.Request, prompt: str, delay_s: float,
                       soft: bool = False, draw: str = "") -> web.StreamResponse:
        if not await self._pause(delay_s):
            return self._drop(request)  # shutting down: no reply, no waiting
        if request.transport is None:  # the client gave up during the delay
            return web.Response(status=499)  # aiohttp sends nothing to a closed connection
        with self._lock:
            self.served_ok += 1
        return self._reply(200, msgspec.json.encode(self._completion(proto, prompt, soft, draw)))

    def _completion(self, proto: WireFormat, prompt: str, soft: bool = False, draw: str = "") -> dict:
        verdict = choose(prompt) if self.reply is None else self.reply(prompt)
        if self.flip_rate and verdict in ("A", "B") and flipped(prompt, self.flip_rate):
            verdict = "B" if verdict == "A" else "A"
        if self.sample_flip and verdict in ("A", "B") and flipped(f"{draw}\x1f{prompt}", self.sample_flip):
            verdict = "B" if verdict == "A" else "A"
        tokens_out = 1 if self.reply is None else max(1, len(verdict) // 4)
        return proto.completion(verdict, self.model, prompt, soft, fingerprint=self.fingerprint,
                                tokens_out=tokens_out, cached=int(len(prompt) // 4 * self.cached_share),
                                written=int(len(prompt) // 4 * self.cache_write_share))

    async def _pause(self, seconds: float) -> bool:
        """Sleep ``seconds``, but wake at once if the server stops: True if it slept them all.

        Waiting on the stop event instead of ``asyncio.sleep`` keeps long hangs from holding
        up shutdown (aiohttp would wait up to its shutdown timeout for them).
        """
        if seconds <= 0:
            return not self._stop.is_set()
        try:
            await asyncio.wait_for(self._stop.wait(), seconds)
        except TimeoutError:
            return True
        return False

    def _drop(self, request: web.Request) -> web.StreamResponse:
        if request.transport is not None:
            request.transport.close()  # close the connection without a reply
        return web.Response(status=500)  # never sent: the transport is gone

    def _count_fault(self, kind: str) -> None:
        with self._lock:
            self.injected[kind] += 1

    def _error(self, proto: WireFormat, status: int, message: str, headers: dict | None = None) -> web.Response:
        return self._reply(status, msgspec.json.encode(proto.error(status, message)), headers)

    def _reply(self, status: int, body: bytes, headers: dict | None = None,
               content_type: str = "application/json") -> web.Response:
        with self._lock:
            self.statuses[status] += 1
        headers = {**self._rate_headers(), **(headers or {})}
        return web.Response(status=status, body=body, content_type=content_type, headers=headers)

    # -- running --------------------------------------------------------------------------

    async def _serve(self) -> None:
        app = web.Application()
        for path, wire in ROUTES.items():
            app.router.add_post(path, functools.partial(self._handle, proto=WIRE_FORMATS[wire]))
        # The short shutdown timeout is a backstop only: every wait in a handler ends on _stop.
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=2.0)
        await runner.setup()
        try:
            site = web.TCPSite(runner, "127.0.0.1", self.port)
            await site.start()
        except BaseException as e:  # e.g. the port is taken: tell __enter__ at once
            self._start_error = e
            self._ready.set()
            await runner.cleanup()
            return
        self.port = site._server.sockets[0].getsockname()[1]
        self._stop = asyncio.Event()
        self._gathered = asyncio.Event()
        self._ready.set()
        await self._stop.wait()
        await runner.cleanup()

    def __enter__(self) -> FakeJudgeServer:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_until_complete, args=(self._serve(),),
                                        daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("fake judge server did not start")
        if self._start_error is not None:
            self._thread.join(10)
            self._loop.close()
            raise self._start_error
        return self

    def __exit__(self, *exc) -> None:
        if self._loop is None or self._loop.is_closed():
            return  # never started, or already stopped
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)
        self._loop.close()
