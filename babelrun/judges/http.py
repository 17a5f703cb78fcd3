"""What every HTTP backend shares, so that a backend is only its wire format.

A subclass gives its URL and headers (to ``__init__``), and three methods:
``body(request) -> bytes``, ``raise_for_status(status, payload, headers)`` (map an HTTP
error to ``RetryableError`` / ``RejectedError`` / ``FatalJudgeError``) and
``reply(payload) -> JudgeReply``. This class owns the aiohttp session (one per judge,
created on first use inside the running loop, its pool sized by ``size_pool`` to the calls
the engine keeps in flight — ``engine.limits.CallLimits`` — or else to ``concurrency``),
the timeout, and the mapping of timeouts and dropped connections to retryable errors.
"""

from __future__ import annotations

from collections.abc import Mapping

import aiohttp

from ..spec import JudgeSpec
from .base import JudgeReply, JudgeRequest, RetryableError


class HttpJudge:
    def __init__(self, spec: JudgeSpec, judge_id: str, url: str, headers: dict[str, str]):
        self.spec = spec
        self.judge_id = judge_id
        self.url = url
        self._headers = headers
        self._session: aiohttp.ClientSession | None = None
        self._pool = spec.concurrency

    def size_pool(self, connections: int) -> None:
        """The connection pool's size, set before the first call: one connection per call
        in flight, so the pool never caps what the engine (or ``bench-judge``) asks for."""
        if self._session is not None:
            raise RuntimeError("size_pool after the session was opened")
        self._pool = connections

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=self._pool, ttl_dns_cache=300)
            timeout = aiohttp.ClientTimeout(total=self.spec.timeout_s)
            self._session = aiohttp.ClientSession(connector=connector, timeout=timeout, headers=self._headers)
        return self._session

    async def post(self, body: bytes) -> tuple[int, bytes, Mapping[str, str]]:
        try:
            async with self._client().post(self.url, data=body) as resp:
                return resp.status, await resp.read(), resp.headers
        except TimeoutError:  # asyncio.TimeoutError is TimeoutError since 3.11
            raise RetryableError("timeout", f"no reply within {self.spec.timeout_s:g} s") from None
        except aiohttp.ClientError as e:
            raise RetryableError("connection", f"{type(e).__name__}: {e}") from None

    async def judge(self, request: JudgeRequest) -> JudgeReply:
        status, payload, headers = await self.post(self.body(request))
        if status >= 400:
            self.raise_for_status(status, payload, headers)
        return self.reply(payload)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    # ---- a backend's wire format ----------------------------------------------------------

    def body(self, request: JudgeRequest) -> bytes:
        raise NotImplementedError

    def raise_for_status(self, status: int, payload: bytes, headers: Mapping[str, str]) -> None:
        raise NotImplementedError

    def reply(self, payload: bytes) -> JudgeReply:
        raise NotImplementedError
