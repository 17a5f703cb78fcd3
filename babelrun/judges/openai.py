"""OpenAI Chat Completions over aiohttp, for any OpenAI-compatible base URL (and the
presets in ``presets.py``: vLLM, llama.cpp server, Ollama, LM Studio, Groq, Together,
Mistral, DeepSeek, OpenRouter, Fireworks).

Temperature and ``max_tokens`` come from the judge spec (0 and 8 by default). With
``soft: true`` the request asks for one token with its top-20 log-probabilities, which give
the soft verdict P(A), P(B), P(tie). The key is read
from the environment variable the manifest names, sent only in the Authorization header, and
never logged or echoed: error messages carry the status and the provider's message, not the
request. Status mapping, masking and the bounds on replies are ``http.HttpJudge``'s.
"""

from __future__ import annotations

import os

import msgspec

from ..spec import JudgeSpec
from .base import JudgeReply, JudgeRequest, RetryableError
from .http import HttpJudge
from .presets import PRESETS, key_env
from .prompt import slot_probabilities


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
        key = os.environ.get(variable) if variable else None  # local servers may run without one
        if key:
            headers["Authorization"] = f"Bearer {key}"
        super().__init__(spec, judge_id, (spec.endpoint or preset.endpoint).rstrip("/") + "/chat/completions",
                         headers, secrets=[key])

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
