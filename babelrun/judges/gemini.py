"""Google Gemini API ``generateContent`` over aiohttp.

``POST {endpoint}/v1beta/models/{model}:generateContent`` with the key in the
``x-goog-api-key`` header, never in the URL, so it cannot land in a log line or an error
message that quotes the URL. The OpenAI-style ``[system, user]`` messages become a
``systemInstruction`` and ``contents``; temperature and ``maxOutputTokens`` come from the
judge spec, with one candidate.

The raw reply is the first candidate's text parts, concatenated (thought summaries left out).
A reply with no text, because the candidate was blocked (``finishReason: SAFETY``, …), the
prompt was (``promptFeedback.blockReason``), or the output budget ran out before any text
(``MAX_TOKENS``, as a thinking model can do with a small ``max_tokens``), comes back as a
bracketed note such as ``[blocked: SAFETY]``: the strict parser calls it invalid, and whoever
reads the log sees why.

Errors follow Google's ``{"error": {"code", "message", "status", "details"}}``: 429 and 5xx
are retried, waiting what ``Retry-After`` or a ``google.rpc.RetryInfo`` ``retryDelay`` asks;
401, 403, 404 and a 400 whose ``ErrorInfo`` reason is ``API_KEY_INVALID`` (how Google answers
a wrong key) stop the judge; other 4xx reject the one request. Only the provider's
``message`` is quoted, never ``details`` (a ``DebugInfo`` entry can echo the key), and the key
is masked should a message contain it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

import msgspec

from ..spec import JudgeSpec
from .base import JudgeReply, JudgeRequest, RetryableError
from .http import HttpJudge, ProviderError, json_or_none, retry_after_header
from .options import ReasoningOptions
from .protocol import THINKING_BUDGET, max_tokens
from .registry import options_of


class GeminiOptions(ReasoningOptions, frozen=True):
    """Gemini's options: thinking models (``reasoning``, ``reasoning_effort``: a thinking budget)."""

DEFAULT_ENDPOINT = "https://generativelanguage.googleapis.com"
# Finish reasons that mean a filter withheld the text (as opposed to STOP, MAX_TOKENS, …).
_BLOCKED = {"SAFETY", "RECITATION", "LANGUAGE", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII",
            "IMAGE_SAFETY", "OTHER"}


class _Part(msgspec.Struct):
    text: str | None = None
    thought: bool = False


class _Content(msgspec.Struct):
    parts: list[_Part] = []


class _Candidate(msgspec.Struct, rename="camel"):
    content: _Content | None = None
    finish_reason: str | None = None


class _PromptFeedback(msgspec.Struct, rename="camel"):
    block_reason: str | None = None


class _Usage(msgspec.Struct, rename="camel"):
    prompt_token_count: int | None = None
    candidates_token_count: int | None = None
    thoughts_token_count: int | None = None
    cached_content_token_count: int | None = None


class _Response(msgspec.Struct, rename="camel"):
    candidates: list[_Candidate] = []
    prompt_feedback: _PromptFeedback | None = None
    usage_metadata: _Usage | None = None
    model_version: str | None = None


_decode = msgspec.json.Decoder(_Response).decode


class GeminiJudge(HttpJudge):
    def __init__(self, spec: JudgeSpec, judge_id: str, seed: int = 0):
        self.options = options_of(spec, GeminiOptions)
        base = (spec.endpoint or DEFAULT_ENDPOINT).rstrip("/")
        model = spec.model.removeprefix("models/")  # the API's own resource name works too
        headers = {"Content-Type": "application/json"}
        self._key = os.environ[spec.api_key_env] if spec.api_key_env else None
        if self._key:
            headers["x-goog-api-key"] = self._key
        super().__init__(spec, judge_id, f"{base}/v1beta/models/{model}:generateContent", headers,
                         secrets=[self._key])

    def body(self, request: JudgeRequest) -> bytes:
        system = [m["content"] for m in request.messages if m["role"] == "system"]
        contents = [
            {"role": "model" if m["role"] == "assistant" else "user", "parts": [{"text": m["content"]}]}
            for m in request.messages if m["role"] != "system"
        ]
        body: dict[str, Any] = {}
        if system:
            body["systemInstruction"] = {"parts": [{"text": "\n\n".join(system)}]}
        body["contents"] = contents
        body["generationConfig"] = {
            "temperature": self.spec.temperature,
            "maxOutputTokens": max_tokens(self.spec),
            "candidateCount": 1,
        }
        if self.options.hidden_reasoning():
            # Thinking models: a budget by effort (protocol.THINKING_BUDGET), counted inside
            # maxOutputTokens; thought parts never enter the reply text (``_text``).
            budget = THINKING_BUDGET[self.options.reasoning_effort or "medium"]
            body["generationConfig"].update(maxOutputTokens=budget + max_tokens(self.spec),
                                            thinkingConfig={"thinkingBudget": budget})
        return msgspec.json.encode(body)

    def reply(self, payload: bytes) -> JudgeReply:
        try:
            response = _decode(payload)
        except msgspec.DecodeError:
            raise RetryableError("bad_response", "malformed response body") from None
        if not response.candidates and (response.prompt_feedback is None
                                        or not response.prompt_feedback.block_reason):
            # The API returns no candidates only for a blocked prompt, and says so.
            raise RetryableError("bad_response", "response without candidates or block reason")
        usage = response.usage_metadata or _Usage()
        tokens_out = usage.candidates_token_count
        if usage.thoughts_token_count:  # billed as output, and spent from the same budget
            tokens_out = (tokens_out or 0) + usage.thoughts_token_count
        return JudgeReply(
            raw=_text(response),
            served_model=response.model_version,
            fingerprint=None,
            tokens_in=usage.prompt_token_count,
            tokens_out=tokens_out,
            tokens_cached=usage.cached_content_token_count,
            truncated=any(c.finish_reason == "MAX_TOKENS" for c in response.candidates[:1]),
        )

    def provider_error(self, payload: bytes) -> ProviderError:
        """Google's ``{"error": {"code", "message", "status", "details"}}`` (also wrapped in a
        list): only ``message`` is quoted, never ``details`` (a ``DebugInfo`` entry can echo the
        key); an ``ErrorInfo`` reason ``API_KEY_INVALID`` (how Google answers a wrong key, with
        400) stops the judge; a ``RetryInfo`` ``retryDelay`` is a wait."""
        doc = json_or_none(payload)
        if isinstance(doc, list) and doc:  # some front ends wrap it in a list
            doc = doc[0]
        err = doc.get("error") if isinstance(doc, dict) else None
        if not isinstance(err, dict):
            return super().provider_error(payload)
        reasons: list[str] = []
        delay = None
        details = err.get("details")
        for d in details if isinstance(details, list) else ():
            if not isinstance(d, dict):
                continue
            kind = str(d.get("@type", ""))
            if kind.endswith("google.rpc.ErrorInfo") and isinstance(d.get("reason"), str):
                reasons.append(d["reason"])
            elif kind.endswith("google.rpc.RetryInfo"):
                delay = _duration(d.get("retryDelay"))
        return ProviderError(type=str(err.get("status", "")), message=str(err.get("message", "")), wait=delay,
                             fatal="unauthorized" if "API_KEY_INVALID" in reasons else None)

    def retry_after(self, status: int, headers: Mapping[str, str], err: ProviderError) -> float | None:
        """The larger of ``Retry-After`` and the body's ``retryDelay``."""
        present = [x for x in (retry_after_header(headers.get("Retry-After")), err.wait) if x is not None]
        return max(present) if present else None


def _text(response: _Response) -> str:
    """The first candidate's text, or a bracketed note saying why there is none."""
    if not response.candidates:  # judge() saw to it that the prompt was blocked
        assert response.prompt_feedback is not None  # (reply() raised where it was not)
        return f"[blocked: prompt {response.prompt_feedback.block_reason}]"
    candidate = response.candidates[0]
    parts = candidate.content.parts if candidate.content is not None else []
    text = "".join(p.text for p in parts if p.text and not p.thought)
    if text:
        return text
    reason = candidate.finish_reason or "unknown"
    return f"[blocked: {reason}]" if reason in _BLOCKED else f"[no text: {reason}]"


_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)s\s*$")


def _duration(value: object) -> float | None:
    """A protobuf JSON Duration (``"17s"``, ``"0.200s"``) in seconds; also accepts
    ``{"seconds": 17, "nanos": 0}``."""
    if isinstance(value, str):
        m = _DURATION.match(value)
        return float(m.group(1)) if m else None
    if isinstance(value, dict):
        try:
            return max(0.0, float(value.get("seconds", 0)) + float(value.get("nanos", 0)) / 1e9)
        except (TypeError, ValueError):
            return None
    return None
