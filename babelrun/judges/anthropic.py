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
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import msgspec

from ..spec import JudgeSpec
from .base import JudgeReply, JudgeRequest, RetryableError
from .batch_api import (
    MAX_RESULTS_BYTES,
    BatchApi,
    BatchResult,
    BatchStopped,
    Submission,
    batch_id,
    jsonl,
    message,
    timestamp,
)
from .http import FATAL, RETRYABLE, HttpJudge, ProviderError, retry_after_header
from .options import BatchApiOptions
from .protocol import THINKING_BUDGET, max_tokens
from .registry import options_of


class AnthropicOptions(BatchApiOptions, frozen=True):
    """Anthropic's options: extended thinking (``reasoning``, ``reasoning_effort``), the Message
    Batches API (``batch``, ``batch_poll_s``), and ``prompt_cache``: the static system prefix
    marked ``cache_control: ephemeral`` (the provider's prompt caching; not part of the
    judge_id: the same text is served)."""

    prompt_cache: bool = False

DEFAULT_ENDPOINT = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
# The rate limits Anthropic reports, each with -remaining and -reset (RFC 3339) headers.
_LIMITS = ("requests", "tokens", "input-tokens", "output-tokens")


class _Block(msgspec.Struct):
    type: str
    text: str | None = None


class _Usage(msgspec.Struct):
    input_tokens: int | None = None  # the uncached input only
    output_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None


class _Message(msgspec.Struct):
    content: list[_Block]
    model: str | None = None
    usage: _Usage | None = None
    stop_reason: str | None = None  # "max_tokens": cut at the budget


class _ErrorDetail(msgspec.Struct):
    type: str = ""
    message: str = ""
    details: dict[str, Any] | None = None


class _ErrorBody(msgspec.Struct):
    error: _ErrorDetail


_decode = msgspec.json.Decoder(_Message).decode
_decode_error = msgspec.json.Decoder(_ErrorBody).decode


class AnthropicJudge(HttpJudge):
    batch_api: ClassVar[type[BatchApi]]  # AnthropicBatches (below): the batch API of this wire format

    fatal = {**FATAL, 402: "billing"}
    retryable = {**RETRYABLE, 529: "overloaded"}

    def __init__(self, spec: JudgeSpec, judge_id: str, seed: int = 0):
        self.options = options_of(spec, AnthropicOptions)
        headers = {"content-type": "application/json", "anthropic-version": API_VERSION}
        self._key = os.environ[spec.api_key_env] if spec.api_key_env else None
        if self._key:
            headers["x-api-key"] = self._key
        super().__init__(spec, judge_id, (spec.endpoint or DEFAULT_ENDPOINT).rstrip("/") + "/v1/messages", headers,
                         secrets=[self._key])

    def body(self, request: JudgeRequest) -> bytes:
        system = "\n\n".join(m["content"] for m in request.messages if m["role"] == "system")
        messages = [{"role": m["role"], "content": m["content"]}
                    for m in request.messages if m["role"] != "system"]
        body: dict[str, Any] = {
            "model": self.spec.model,
            "max_tokens": max_tokens(self.spec),
            "temperature": self.spec.temperature,
        }
        if self.options.hidden_reasoning():
            # Extended thinking: a budget by effort, inside max_tokens (which must exceed it);
            # no temperature (thinking takes none but 1). The thinking blocks never enter raw.
            budget = THINKING_BUDGET[self.options.reasoning_effort or "medium"]
            body.update(max_tokens=budget + max_tokens(self.spec),
                        thinking={"type": "enabled", "budget_tokens": budget})
            del body["temperature"]
        if system and self.options.prompt_cache:  # the static prefix, cached by the provider
            body["system"] = [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}]
        elif system:
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
            # every input token (as the other providers count them): uncached + read + written
            tokens_in=(None if usage.input_tokens is None else usage.input_tokens
                       + (usage.cache_read_input_tokens or 0) + (usage.cache_creation_input_tokens or 0)),
            tokens_out=usage.output_tokens,
            tokens_cached=usage.cache_read_input_tokens,
            tokens_cache_write=usage.cache_creation_input_tokens,
            truncated=message.stop_reason == "max_tokens",
        )

    def provider_error(self, payload: bytes) -> ProviderError:
        """The documented ``{"type": "error", "error": {"type", "message"}}``; a 429 for a
        reached spend limit stops the judge (no wait lifts it). Other bodies: the default."""
        try:
            err = _decode_error(payload).error
        except msgspec.DecodeError:
            return super().provider_error(payload)
        spent = (err.details or {}).get("error_code") == "enforced_spend_limit_reached"
        return ProviderError(type=err.type, message=err.message + (" (spend limit reached)" if spent else ""),
                             fatal="spend_limit" if spent else None)

    def retry_after(self, status: int, headers: Mapping[str, str], err: ProviderError) -> float | None:
        """``retry-after``; on a 429 without it, the ``anthropic-ratelimit-*-reset`` times."""
        wait = retry_after_header(headers.get("retry-after"))
        return _reset(headers) if wait is None and status == 429 else wait


def _reset(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds from now until the rate limit that was hit refills, from the
    ``anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-reset`` RFC 3339
    timestamps: the latest reset among the limits reported exhausted (``-remaining: 0``), or
    among all of them when none is."""
    now = time.time() if now is None else now
    resets: dict[str, float] = {}
    exhausted: set[str] = set()
    for limit in _LIMITS:
        when = timestamp(headers.get(f"anthropic-ratelimit-{limit}-reset"))
        if when is not None:
            resets[limit] = max(0.0, when - now)
        if headers.get(f"anthropic-ratelimit-{limit}-remaining", "").strip() == "0":
            exhausted.add(limit)
    chosen = [s for limit, s in resets.items() if limit in exhausted] or list(resets.values())
    return max(chosen) if chosen else None


class AnthropicBatches(BatchApi):
    provider = "anthropic"

    def __init__(self, judge: HttpJudge, on_request: Callable[[], None] = lambda: None) -> None:
        super().__init__(judge, on_request)
        self.base = judge.url.removesuffix("/v1/messages")

    async def find(self, pending: Submission) -> str | None:
        """Message Batches carry no metadata: the batch created within two minutes of the
        intent with as many requests. Several such batches: stop and say so (never guess)."""
        listing = await self.json("GET", f"{self.base}/v1/messages/batches?limit=100")
        found = []
        for batch in listing.get("data") or []:
            counts = batch.get("request_counts") if isinstance(batch, dict) else None
            when = timestamp(batch.get("created_at")) if isinstance(batch, dict) else None
            if (isinstance(counts, dict) and when is not None and abs(when - pending.created) <= 120
                    and sum(v for v in counts.values() if isinstance(v, int)) == len(pending.custom_ids)):
                found.append(batch_id(batch, "GET /v1/messages/batches"))
        if len(found) > 1:
            raise BatchStopped(f"a batch submission was interrupted, and {len(found)} batches ({', '.join(found)}) "
                           "may be it; cancel the extra ones in the console, then delete "
                           f"batches/<judge_id>.json to submit again")
        return found[0] if found else None

    async def submit(self, requests: list[tuple[str, JudgeRequest]], intent: str) -> str:
        body = {"requests": [{"custom_id": cid, "params": msgspec.Raw(self.judge.body(r))} for cid, r in requests]}
        return batch_id(await self.json("POST", f"{self.base}/v1/messages/batches", body), "POST /v1/messages/batches")

    async def poll(self, batch_id: str) -> tuple[bool, dict[str, Any]]:
        batch = await self.json("GET", f"{self.base}/v1/messages/batches/{batch_id}")
        return batch.get("processing_status") == "ended", batch

    async def results(self, batch: dict[str, Any]) -> list[BatchResult]:
        url = batch.get("results_url")
        if not url:
            return []
        out: list[BatchResult] = []
        for line in jsonl(await self.request("GET", url, cap=MAX_RESULTS_BYTES)):
            result = line.get("result") or {}
            if result.get("type") == "succeeded":
                out.append((line["custom_id"], msgspec.json.encode(result.get("message")), None))
            else:
                detail = f": {message(self.judge, result['error'])}" if result.get("error") else ""
                out.append((line["custom_id"], None, f"{result.get('type', 'no result')}{detail}"))
        return out


AnthropicJudge.batch_api = AnthropicBatches
