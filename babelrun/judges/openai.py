"""OpenAI Chat Completions over aiohttp, for any OpenAI-compatible base URL (and the
presets in ``presets.py``: vLLM, llama.cpp server, Ollama, LM Studio, Groq, Together,
Mistral, DeepSeek, OpenRouter, Fireworks).

Temperature and ``max_tokens`` come from the judge spec (0 and 8 by default). With
``soft: true`` the request asks for one token with its top-20 log-probabilities, which give
the soft verdict P(A), P(B), P(tie). The key is read
from the environment variable the manifest names, sent only in the Authorization header, and
never logged or echoed: error messages carry the status and the provider's message, not the
request.
"""

from __future__ import annotations

import os
import re

import msgspec

from ..spec import JudgeSpec
from .base import FatalJudgeError, JudgeReply, JudgeRequest, RejectedError, RetryableError
from .http import HttpJudge
from .presets import PRESETS, key_env
from .prompt import slot_probabilities

_FATAL = {401: "unauthorized", 403: "forbidden", 404: "not_found"}
_RETRYABLE_4XX = {408: "timeout", 409: "conflict", 425: "too_early"}


class _Message(msgspec.Struct):
    content: str | None = None


class _Top(msgspec.Struct):
    token: str
    logprob: float


class _TokenLogprob(msgspec.Struct):
    token: str
    logprob: float
    top_logprobs: list[_Top] = []


class _Logprobs(msgspec.Struct):
    content: list[_TokenLogprob] | None = None


class _Choice(msgspec.Struct):
    message: _Message
    logprobs: _Logprobs | None = None


class _Usage(msgspec.Struct):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class _Completion(msgspec.Struct):
    choices: list[_Choice]
    model: str | None = None
    system_fingerprint: str | None = None
    usage: _Usage | None = None


_decode = msgspec.json.Decoder(_Completion).decode


class OpenAIJudge(HttpJudge):
    def __init__(self, spec: JudgeSpec, judge_id: str, seed: int = 0):
        preset = PRESETS[spec.backend]
        headers = {"Content-Type": "application/json"}
        variable = key_env(spec.backend, spec.api_key_env, spec.endpoint)
        if variable and variable in os.environ:  # local servers may run without a key
            headers["Authorization"] = f"Bearer {os.environ[variable]}"
        super().__init__(spec, judge_id, (spec.endpoint or preset.endpoint).rstrip("/") + "/chat/completions",
                         headers)

    def body(self, request: JudgeRequest) -> bytes:
        body = {
            "model": self.spec.model,
            "messages": request.messages,
            "temperature": self.spec.temperature,
            "max_tokens": self.spec.max_tokens,
        }
        if self.spec.soft:  # one token, and the probabilities of its likeliest values
            body.update(max_tokens=1, logprobs=True, top_logprobs=20)
        return msgspec.json.encode(body)

    def raise_for_status(self, status: int, payload: bytes, headers) -> None:
        retry_after = _retry_after(headers)
        if status == 429:
            raise RetryableError("rate_limited", "429 Too Many Requests", retry_after)
        if status >= 500 or status in _RETRYABLE_4XX:
            raise RetryableError("server_error" if status >= 500 else _RETRYABLE_4XX[status],
                                 f"HTTP {status}", retry_after)
        if status in _FATAL:
            raise FatalJudgeError(_FATAL[status], f"HTTP {status} from {self.url}: {_provider_message(payload)}")
        raise RejectedError("rejected", f"HTTP {status}: {_provider_message(payload)}")

    def reply(self, payload: bytes) -> JudgeReply:
        try:
            completion = _decode(payload)
            choice = completion.choices[0]
        except (msgspec.DecodeError, IndexError):
            raise RetryableError("bad_response", "malformed response body") from None
        usage = completion.usage or _Usage()
        return JudgeReply(
            raw=choice.message.content or "",
            served_model=completion.model,
            fingerprint=completion.system_fingerprint,
            tokens_in=usage.prompt_tokens,
            tokens_out=usage.completion_tokens,
            probs=_soft(choice) if self.spec.soft else None,
        )


def _soft(choice: _Choice) -> tuple[float, float, float] | None:
    content = choice.logprobs.content if choice.logprobs else None
    if not content:
        return None
    first = content[0]
    top = [(t.token, t.logprob) for t in first.top_logprobs] or [(first.token, first.logprob)]
    return slot_probabilities(top)


def _retry_after(headers) -> float | None:
    """Seconds the provider asks us to wait: ``Retry-After`` (seconds), else the larger of
    OpenAI-style ``x-ratelimit-reset-requests`` / ``-tokens`` durations (``1s``, ``6m0s``,
    ``20ms``). An HTTP-date Retry-After is rare from LLM providers: backoff applies instead."""
    value = headers.get("Retry-After")
    if value is not None:
        try:
            return max(0.0, float(value))
        except ValueError:
            pass
    resets = [_duration(headers.get(h)) for h in ("x-ratelimit-reset-requests", "x-ratelimit-reset-tokens")]
    resets = [r for r in resets if r is not None]
    return max(resets) if resets else None


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def _duration(text: str | None) -> float | None:
    if not text:
        return None
    parts = _DURATION.findall(text.strip())
    if not parts or "".join(n + u for n, u in parts) != text.strip().replace(" ", ""):
        try:
            return max(0.0, float(text))
        except ValueError:
            return None
    return sum(float(n) * _UNIT[u] for n, u in parts)


def _provider_message(payload: bytes) -> str:
    try:
        err = msgspec.json.decode(payload)
        if isinstance(err, dict) and isinstance(err.get("error"), dict):
            return str(err["error"].get("message", ""))[:200]
    except msgspec.DecodeError:
        pass
    return payload[:200].decode("utf-8", "replace")
