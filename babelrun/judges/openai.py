"""OpenAI Chat Completions over aiohttp, for any OpenAI-compatible base URL (and the
presets in ``presets.py``: vLLM, llama.cpp server, Ollama, LM Studio, Groq, Together,
Mistral, DeepSeek, OpenRouter, Fireworks).

Temperature and ``max_tokens`` come from the judge spec (0, and 8 for the built-in one-word
prompts, 1024 where the judge reasons first). Reasoning models (``reasoning: true`` or a
``reasoning_effort``) get ``max_completion_tokens`` instead of ``max_tokens``, no
``temperature``, and the effort as ``reasoning_effort``; their usage (which counts the
hidden reasoning tokens) settles the token budget. With ``soft: true`` the request asks for
one token with its top-20 log-probabilities, which give the soft verdict P(A), P(B), P(tie).

Client conventions: ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` (and ``OPENAI_ORG_ID`` /
``OPENAI_PROJECT_ID``) fill what the manifest leaves unset (``manifest._openai_defaults``);
``organization`` / ``project`` become the ``OpenAI-Organization`` / ``OpenAI-Project``
headers; ``headers`` are sent as given, ``headers_env`` from environment variables. Azure
OpenAI (backend ``azure``): ``{endpoint}/openai/deployments/{deployment}/chat/completions
?api-version=…`` with the key in the ``api-key`` header.

The key is read from the environment variable the manifest names, sent only in its header,
and never logged or echoed: error messages carry the status and the provider's message, not
the request.
"""

from __future__ import annotations

import os
import re
from urllib.parse import quote

import msgspec

from ..spec import JudgeSpec
from .base import FatalJudgeError, JudgeReply, JudgeRequest, RejectedError, RetryableError
from .http import HttpJudge
from .presets import PRESETS, key_env
from .prompt import slot_probabilities
from .protocol import max_tokens

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


def headers_of(spec: JudgeSpec, environ=os.environ) -> dict[str, str]:
    """The request headers: the key (``Authorization: Bearer``, Azure's ``api-key``), the
    organisation/project, the judge's extra headers and those from environment variables."""
    headers = {"Content-Type": "application/json"}
    headers.update(spec.headers)
    headers.update({name: environ[var] for name, var in spec.headers_env.items() if var in environ})
    if spec.organization:
        headers["OpenAI-Organization"] = spec.organization
    if spec.project:
        headers["OpenAI-Project"] = spec.project
    variable = key_env(spec.backend, spec.api_key_env, spec.endpoint)
    if variable and variable in environ:  # local servers may run without a key
        if spec.azure is not None:
            headers["api-key"] = environ[variable]
        else:
            headers["Authorization"] = f"Bearer {environ[variable]}"
    return headers


def url_of(spec: JudgeSpec) -> str:
    base = (spec.endpoint or PRESETS[spec.backend].endpoint).rstrip("/")
    if spec.azure is not None:
        return (f"{base}/openai/deployments/{quote(spec.azure.deployment, safe='')}/chat/completions"
                f"?api-version={quote(spec.azure.api_version, safe='')}")
    return base + "/chat/completions"


class OpenAIJudge(HttpJudge):
    def __init__(self, spec: JudgeSpec, judge_id: str, seed: int = 0):
        super().__init__(spec, judge_id, url_of(spec), headers_of(spec))

    def body(self, request: JudgeRequest) -> bytes:
        body = {"model": self.spec.model, "messages": request.messages}
        if self.spec.reasoning or self.spec.reasoning_effort:  # reasoning models take no temperature
            body["max_completion_tokens"] = max_tokens(self.spec)
            if self.spec.reasoning_effort:
                body["reasoning_effort"] = self.spec.reasoning_effort
        else:
            body.update(temperature=self.spec.temperature, max_tokens=max_tokens(self.spec))
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
