"""Anthropic Messages API (``POST /v1/messages``) over aiohttp.

The request's OpenAI-style messages are mapped to the Messages shape: the system message's
content goes in the top-level ``system`` field, the other messages (our user turn) in
``messages``. Temperature and ``max_tokens`` come from the judge spec. The key is read from the
environment variable the manifest names, sent only in the ``x-api-key`` header, and never
logged or echoed: error messages carry the status, the provider's error type and message (with
the key blanked out should a provider ever echo it), not the request.

The reply's verdict text is the concatenation of its ``text`` content blocks; ``model`` is
the served model and ``usage.input_tokens`` / ``output_tokens`` the tokens. Anthropic has no
system fingerprint, so ``fingerprint`` stays None.

Errors, as the API documents them (``{"type": "error", "error": {"type", "message"}}``):
429 ``rate_limit_error``, 529 ``overloaded_error`` and 5xx are retried, honouring
``retry-after`` (or, on a 429 without it, the ``anthropic-ratelimit-*-reset`` timestamps);
401, 402, 403 and 404 stop the judge, as does a 429 for a reached spend limit, which no wait
lifts; 400, 413 and other 4xx reject the one request.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import msgspec

from ..spec import JudgeSpec
from .base import FatalJudgeError, JudgeReply, JudgeRequest, RejectedError, RetryableError
from .http import HttpJudge
from .protocol import THINKING_BUDGET, max_tokens

DEFAULT_ENDPOINT = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
_FATAL = {401: "unauthorized", 402: "billing", 403: "forbidden", 404: "not_found"}
_RETRYABLE_4XX = {408: "timeout", 409: "conflict", 425: "too_early"}
# The rate limits Anthropic reports, each with -remaining and -reset (RFC 3339) headers.
_LIMITS = ("requests", "tokens", "input-tokens", "output-tokens")


class _Block(msgspec.Struct):
    type: str
    text: str | None = None


class _Usage(msgspec.Struct):
    input_tokens: int | None = None
    output_tokens: int | None = None


class _Message(msgspec.Struct):
    content: list[_Block]
    model: str | None = None
    usage: _Usage | None = None


class _ErrorDetail(msgspec.Struct):
    type: str = ""
    message: str = ""
    details: dict | None = None


class _ErrorBody(msgspec.Struct):
    error: _ErrorDetail


_decode = msgspec.json.Decoder(_Message).decode
_decode_error = msgspec.json.Decoder(_ErrorBody).decode


class AnthropicJudge(HttpJudge):
    def __init__(self, spec: JudgeSpec, judge_id: str, seed: int = 0):
        headers = {"content-type": "application/json", "anthropic-version": API_VERSION}
        self._key = os.environ[spec.api_key_env] if spec.api_key_env else None
        if self._key:
            headers["x-api-key"] = self._key
        super().__init__(spec, judge_id, (spec.endpoint or DEFAULT_ENDPOINT).rstrip("/") + "/v1/messages", headers)

    def body(self, request: JudgeRequest) -> bytes:
        system = "\n\n".join(m["content"] for m in request.messages if m["role"] == "system")
        messages = [{"role": m["role"], "content": m["content"]}
                    for m in request.messages if m["role"] != "system"]
        body: dict = {
            "model": self.spec.model,
            "max_tokens": max_tokens(self.spec),
            "temperature": self.spec.temperature,
        }
        if self.spec.reasoning or self.spec.reasoning_effort:
            # Extended thinking: a budget by effort, inside max_tokens (which must exceed it);
            # no temperature (thinking takes none but 1). The thinking blocks never enter raw.
            budget = THINKING_BUDGET[self.spec.reasoning_effort or "medium"]
            body.update(max_tokens=budget + max_tokens(self.spec), thinking={"type": "enabled", "budget_tokens": budget})
            del body["temperature"]
        if system:
            body["system"] = system
        body["messages"] = messages
        return msgspec.json.encode(body)

    def reply(self, payload: bytes) -> JudgeReply:
        try:
            message = _decode(payload)
        except msgspec.DecodeError:
            raise RetryableError("bad_response", "malformed response body") from None
        usage = message.usage or _Usage()
        return JudgeReply(
            raw="".join(b.text or "" for b in message.content if b.type == "text"),
            served_model=message.model,
            fingerprint=None,
            tokens_in=usage.input_tokens,
            tokens_out=usage.output_tokens,
        )

    def raise_for_status(self, status: int, payload: bytes, headers) -> None:
        kind, message, details = _provider_error(payload)
        if self._key:
            message = message.replace(self._key, "***")
        said = f"HTTP {status}" + (f" {kind}" if kind else "") + (f": {message}" if message else "")
        if status == 429:
            if (details or {}).get("error_code") == "enforced_spend_limit_reached":
                raise FatalJudgeError("spend_limit", f"{said} (spend limit reached)")
            wait = _retry_after(headers)
            raise RetryableError("rate_limited", said, wait if wait is not None else _reset(headers))
        if status == 529:
            raise RetryableError("overloaded", said, _retry_after(headers))
        if status >= 500 or status in _RETRYABLE_4XX:
            raise RetryableError("server_error" if status >= 500 else _RETRYABLE_4XX[status],
                                 said, _retry_after(headers))
        if status in _FATAL:
            where = f"HTTP {status}" + (f" {kind}" if kind else "") + f" from {self.url}"
            raise FatalJudgeError(_FATAL[status], f"{where}: {message}" if message else where)
        raise RejectedError("rejected", said)


def _provider_error(payload: bytes) -> tuple[str, str, dict | None]:
    """The error body's ``(type, message, details)``; a body not in the documented shape
    (a proxy's HTML page, say) gives its first 200 characters as the message."""
    try:
        err = _decode_error(payload).error
        return err.type[:60], err.message[:200], err.details
    except msgspec.DecodeError:
        return "", payload[:200].decode("utf-8", "replace").strip(), None


def _retry_after(headers, now: float | None = None) -> float | None:
    """``retry-after`` in seconds (or as an HTTP date), if given."""
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _reset(headers, now: float | None = None) -> float | None:
    """Seconds from now until the rate limit that was hit refills, from the
    ``anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-reset`` RFC 3339
    timestamps: the latest reset among the limits reported exhausted (``-remaining: 0``), or
    among all of them when none is."""
    now = time.time() if now is None else now
    resets: dict[str, float] = {}
    exhausted: set[str] = set()
    for limit in _LIMITS:
        when = _timestamp(headers.get(f"anthropic-ratelimit-{limit}-reset"))
        if when is not None:
            resets[limit] = max(0.0, when - now)
        if headers.get(f"anthropic-ratelimit-{limit}-remaining", "").strip() == "0":
            exhausted.add(limit)
    chosen = [s for limit, s in resets.items() if limit in exhausted] or list(resets.values())
    return max(chosen) if chosen else None


def _timestamp(text: str | None) -> float | None:
    """An RFC 3339 timestamp as POSIX seconds; None if absent or unreadable."""
    if not text:
        return None
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()
