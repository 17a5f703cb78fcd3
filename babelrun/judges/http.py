"""What every HTTP backend shares, so that a backend is only its wire format.

A subclass gives its URL, headers and secrets (to ``__init__``) and two methods:
``body(request) -> bytes`` and ``reply(payload) -> JudgeReply``; where its provider differs
from the common rules below it overrides ``provider_error`` (how to read an error body),
``retry_after`` (how the provider says when to come back) or the class tables ``fatal`` /
``retryable``. This class owns the aiohttp session (one per judge, created on first use
inside the running loop, its pool sized by ``size_pool`` to the calls the engine keeps in
flight — ``engine.limits.CallLimits`` — or else to ``concurrency``), the timeout, and ONE
mapping of HTTP statuses to ``RetryableError`` / ``RejectedError`` / ``FatalJudgeError`` for
every provider and for the batch APIs (``call``).

Hostile replies are bounded here, once for every backend:

- a reply body is read up to ``MAX_REPLY_BYTES`` (1 MiB); a 2xx past it is an error of kind
  ``oversize`` (rejected, not retried), an error body past it is cut;
- redirects are never followed: a 3xx is a fatal error of kind ``redirect`` (following one
  would send the key's header to whatever host the ``Location`` names);
- a provider's wait (``Retry-After``, reset headers) is capped at ``MAX_RETRY_AFTER_S``
  (300 s), and the error says it was;
- every piece of provider text that leaves the process (error messages, the ``Location``
  of a redirect, a connection error's text) goes through ``mask``: each secret replaced by
  ``***`` BEFORE the text is cut to ``MESSAGE_CHARS``, so a key crossing the cut cannot leak
  in part. A 200's reply text is the judge's answer and is kept verbatim.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable, Mapping
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlsplit

import msgspec

from ..errors import JudgeError
from ..spec import JudgeSpec
from .base import FatalJudgeError, JudgeReply, JudgeRequest, RejectedError, RetryableError

if TYPE_CHECKING:
    import aiohttp

    from .protocol import Judging

MAX_REPLY_BYTES = 1 << 20  # 1 MiB: a verdict is a few bytes; a batch result file is read apart
MAX_RETRY_AFTER_S = 300.0
MESSAGE_CHARS = 200
# Statuses with the same meaning at every provider; a backend adds its own (Anthropic: 402
# billing, 529 overloaded).
FATAL = {401: "unauthorized", 403: "forbidden", 404: "not_found"}
RETRYABLE = {408: "timeout", 409: "conflict", 425: "too_early"}


def mask(text: str, secrets: Iterable[str | None], limit: int | None = MESSAGE_CHARS) -> str:
    """``text`` with every secret replaced by ``***``, then cut to ``limit`` characters. The
    order matters: cutting first could leave the head of a key that crossed the cut."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text if limit is None or len(text) <= limit else text[:limit] + "…"


def bounded_wait(seconds: float | None) -> tuple[float | None, bool]:
    """A provider's wait made safe to honour: negative → 0, not finite or over the cap → the
    cap. Returns (seconds, whether it was capped)."""
    if seconds is None or math.isnan(seconds):
        return None, False
    if seconds > MAX_RETRY_AFTER_S:  # inf included
        return MAX_RETRY_AFTER_S, True
    return max(0.0, seconds), False


def retry_after_header(value: str | None, now: float | None = None) -> float | None:
    """``Retry-After`` in seconds, given as a number or as an HTTP date."""
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return when.timestamp() - (time.time() if now is None else now)


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def duration(text: str | None) -> float | None:
    """An OpenAI-style reset duration (``1s``, ``6m0s``, ``20ms``) or plain seconds."""
    if not text:
        return None
    text = text.strip()
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text.replace(" ", ""):
        try:
            return float(text)
        except ValueError:
            return None
    return sum(float(n) * _UNIT[u] for n, u in parts)


class ProviderError(msgspec.Struct, frozen=True):
    """What an error body says, read leniently: ``type`` (the provider's own word),
    ``message``, a wait it asks for, and ``fatal`` (a kind that stops the judge whatever the
    status: a wrong key Google answers with 400, a spend limit Anthropic answers with 429)."""

    type: str = ""
    message: str = ""
    wait: float | None = None
    fatal: str | None = None


def json_or_none(payload: bytes) -> Any:
    """The JSON document in ``payload``, or None where it is none."""
    try:
        return msgspec.json.decode(payload)
    except msgspec.DecodeError:
        return None


def error_message(doc: Any) -> str | None:
    """The innermost ``message`` of a (possibly nested, possibly listed) error object."""
    if isinstance(doc, list) and doc:
        doc = doc[0]
    found = None
    while isinstance(doc, dict):
        if isinstance(doc.get("message"), str):
            found = doc["message"]
        inner = doc.get("error")
        if not isinstance(inner, dict):
            break
        doc = inner
    return found


async def _read(resp: aiohttp.ClientResponse, cap: int) -> tuple[bytes, bool]:
    """At most ``cap`` bytes of the body, and whether there was more (never read)."""
    length = resp.content_length
    if length is not None:  # the usual reply: its size is declared, one read takes it all
        return (b"", True) if length > cap else (await resp.read(), False)
    chunks: list[bytes] = []
    size = 0
    while size <= cap:
        chunk = await resp.content.read(cap + 1 - size)
        if not chunk:
            return b"".join(chunks), False
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)[:cap], True


class HttpJudge:
    fatal: Mapping[int, str] = FATAL
    retryable: Mapping[int, str] = RETRYABLE
    # Declared, not set here: ``judges.build`` attaches the protocol to every judge it builds
    # (``protocol.Judge``), and the backends whose capabilities say ``batch_api`` (openai,
    # anthropic) set their adapter class; the engine asks for it only of those.
    protocol: Judging
    # a ``judges.batch_api.BatchApi`` subclass (not named here: that module builds on this one)
    batch_api: ClassVar[type[Any]]

    def __init__(self, spec: JudgeSpec, judge_id: str, url: str, headers: dict[str, str],
                 secrets: Iterable[str | None] = ()):
        self.spec = spec
        self.judge_id = judge_id
        self.url = url
        self._headers = headers
        self._secrets = tuple(s for s in secrets if s)
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
            import aiohttp  # here, not at the top: decoding a manifest imports this module's options


            connector = aiohttp.TCPConnector(limit=self._pool, ttl_dns_cache=300)
            timeout = aiohttp.ClientTimeout(total=self.spec.timeout_s)
            self._session = aiohttp.ClientSession(connector=connector, timeout=timeout, headers=self._headers)
        return self._session

    def mask(self, text: str, limit: int | None = MESSAGE_CHARS) -> str:
        """Provider text with this judge's secrets masked, then cut (see ``mask``)."""
        return mask(text, self._secrets, limit)

    async def request(self, method: str, url: str, *, cap: int = MAX_REPLY_BYTES,
                      **kwargs: Any) -> tuple[int, bytes, Mapping[str, str]]:
        """One HTTP exchange: (status, body, headers). Never follows a redirect; a 2xx body
        over ``cap`` raises ``oversize``; timeouts and dropped connections are retryable."""
        import aiohttp

        try:
            async with self._client().request(method, url, allow_redirects=False, **kwargs) as resp:
                payload, cut = await _read(resp, cap)
                status, headers = resp.status, resp.headers
        except TimeoutError:  # asyncio.TimeoutError is TimeoutError since 3.11
            raise RetryableError("timeout", f"no reply within {self.spec.timeout_s:g} s") from None
        except aiohttp.ClientError as e:
            raise RetryableError("connection", self.mask(f"{type(e).__name__}: {e}")) from None
        if cut and 200 <= status < 300:
            raise RejectedError("oversize", f"HTTP {status} from {method} {url}: reply larger than "
                                f"{cap} bytes, not read")
        return status, payload, headers

    async def call(self, method: str, url: str, **kwargs: Any) -> bytes:
        """``request``, with any status that is not a success raised as the judge error the
        status means (the one mapping, used by calls and by the batch APIs alike)."""
        status, payload, headers = await self.request(method, url, **kwargs)
        if status >= 300:
            raise self.error(status, payload, headers, f"{method} {url}")
        return payload

    async def judge(self, request: JudgeRequest) -> JudgeReply:
        return self.reply(await self.call("POST", self.url, data=self.body(request)))

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def error(self, status: int, payload: bytes, headers: Mapping[str, str], what: str | None = None) -> JudgeError:
        """The judge error an HTTP status (with its body and headers) means."""
        where = what or f"POST {self.url}"
        if 300 <= status < 400:
            target = urlsplit(headers.get("Location", "")).netloc or "elsewhere"
            return FatalJudgeError("redirect", f"HTTP {status} from {where}: redirect to {self.mask(target, 80)} "
                                   "not followed; set the judge's endpoint to the final URL")
        err = self.provider_error(payload)
        message = self.mask(err.message.strip())
        said = f"HTTP {status}" + (f" {self.mask(err.type, 60)}" if err.type else "")
        wait, capped = bounded_wait(self.retry_after(status, headers, err))
        note = f" (wait capped at {MAX_RETRY_AFTER_S:g} s)" if capped else ""
        text = f"{said}: {message}{note}" if message else said + note
        if err.fatal:
            return FatalJudgeError(err.fatal, f"{said} from {where}: {message}")
        if status == 429:
            return RetryableError("rate_limited", text, wait)
        if status >= 500 or status in self.retryable:
            return RetryableError(self.retryable.get(status, "server_error"), text, wait)
        if status in self.fatal:
            return FatalJudgeError(self.fatal[status], f"{said} from {where}: {message}" if message
                                   else f"{said} from {where}")
        return RejectedError("rejected", text)

    # ---- a backend's wire format ----------------------------------------------------------

    def body(self, request: JudgeRequest) -> bytes:
        raise NotImplementedError

    def reply(self, payload: bytes) -> JudgeReply:
        raise NotImplementedError

    def provider_error(self, payload: bytes) -> ProviderError:
        """An error body's message (OpenAI's ``{"error": {"message", "type"}}`` and most
        others); a body in no known shape (a proxy's HTML page) gives its head as the message."""
        message = error_message(json_or_none(payload))
        if message is None:
            message = payload.decode("utf-8", "replace")  # whole: masked before any cut
        return ProviderError(message=message)

    def retry_after(self, status: int, headers: Mapping[str, str], err: ProviderError) -> float | None:
        """Seconds the provider asks us to wait: ``Retry-After``, else the larger of
        OpenAI-style ``x-ratelimit-reset-requests`` / ``-tokens`` durations, else the body's."""
        after = retry_after_header(headers.get("Retry-After"))
        if after is not None:
            return after
        resets = [duration(headers.get(h)) for h in ("x-ratelimit-reset-requests", "x-ratelimit-reset-tokens")]
        known = [r for r in resets if r is not None]
        return max(known) if known else err.wait
