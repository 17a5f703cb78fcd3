"""The providers' wire formats as the fake server speaks them (OpenAI, Anthropic, Gemini):
where the key travels, how the prompt is read, the shapes of a verdict and of an error; and
the paths the server answers, each with its format."""

from __future__ import annotations

import math

import msgspec
from aiohttp import web

from ._judge import SOFT, top_logprobs


class _Message(msgspec.Struct):
    content: str


class _ChatRequest(msgspec.Struct):
    messages: list[_Message]
    logprobs: bool = False


_decode_request = msgspec.json.Decoder(_ChatRequest).decode


class _Part(msgspec.Struct):
    text: str = ""


class _Content(msgspec.Struct):
    parts: list[_Part]


class _GeminiRequest(msgspec.Struct):
    contents: list[_Content]


_decode_gemini = msgspec.json.Decoder(_GeminiRequest).decode


class WireFormat:
    """One provider's wire format, as the fake server speaks it: where the key travels, how
    the prompt is read, and the shapes of a verdict and of an error. A subclass per provider
    (:class:`OpenAIWire`, :class:`AnthropicWire`, :class:`GeminiWire`); :data:`WIRE_FORMATS`
    maps each provider's name to its instance and :data:`ROUTES` each path to the format."""

    name = ""
    key_header = ""
    key_prefix = ""
    body_key = ""  # the reply's field a "malformed" fault deletes

    def key(self, request: web.Request) -> str:
        value = request.headers.get(self.key_header, "")
        return value.removeprefix(self.key_prefix) if value.startswith(self.key_prefix) else ""

    def prompt(self, body: bytes) -> tuple[str, bool]:
        """(the last user message, whether soft verdicts were asked); ValueError when the body
        is not a request of this wire format."""
        try:
            return self._prompt(body)
        except (msgspec.DecodeError, IndexError):
            raise ValueError(f"expected a {self.name} request") from None

    def _prompt(self, body: bytes) -> tuple[str, bool]:
        chat = _decode_request(body)
        return chat.messages[-1].content, chat.logprobs

    def completion(self, verdict: str, model: str, prompt: str, soft: bool, *, fingerprint: str = "fp_fake",
                   tokens_out: int = 1, cached: int = 0, written: int = 0) -> dict:
        """A verdict reply; ``cached``: how many of the prompt's tokens the usage reports as
        read from the provider's prompt cache (in this provider's field; none when 0);
        ``written``: how many it reports as written to that cache (Anthropic only)."""
        raise NotImplementedError

    def error(self, status: int, message: str) -> dict:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class OpenAIWire(WireFormat):
    """OpenAI chat completions (also Azure OpenAI and every OpenAI-compatible server)."""

    name, key_header, key_prefix, body_key = "openai", "Authorization", "Bearer ", "choices"

    def completion(self, verdict: str, model: str, prompt: str, soft: bool, *, fingerprint: str = "fp_fake",
                   tokens_out: int = 1, cached: int = 0, written: int = 0) -> dict:
        choice: dict = {"index": 0, "message": {"role": "assistant", "content": verdict}, "finish_reason": "stop"}
        if soft:  # OpenAI's logprobs shape: the chosen token, and its top alternatives
            choice["logprobs"] = {"content": [{"token": verdict, "logprob": math.log(SOFT[0]),
                                               "top_logprobs": top_logprobs(verdict)}]}
        usage: dict = {"prompt_tokens": len(prompt) // 4, "completion_tokens": tokens_out}
        if cached:  # OpenAI: part of prompt_tokens
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
        return {"id": "chatcmpl-fake", "object": "chat.completion", "model": model,
                "system_fingerprint": fingerprint, "choices": [choice], "usage": usage}

    def error(self, status: int, message: str) -> dict:
        return {"error": {"message": message, "type": "invalid_request_error"}}


class AnthropicWire(WireFormat):
    """Anthropic's Messages API."""

    name, key_header, key_prefix, body_key = "anthropic", "x-api-key", "", "content"

    def completion(self, verdict: str, model: str, prompt: str, soft: bool, *, fingerprint: str = "fp_fake",
                   tokens_out: int = 1, cached: int = 0, written: int = 0) -> dict:
        # Anthropic: input_tokens counts only the uncached input; the cache reads come apart.
        usage: dict = {"input_tokens": len(prompt) // 4 - cached - written, "output_tokens": tokens_out}
        if cached or written:
            usage.update(cache_read_input_tokens=cached, cache_creation_input_tokens=written)
        return {"id": "msg_fake", "type": "message", "role": "assistant", "model": model,
                "content": [{"type": "text", "text": verdict}], "stop_reason": "end_turn", "usage": usage}

    def error(self, status: int, message: str) -> dict:
        return {"type": "error", "error": {"type": "api_error", "message": message}}


class GeminiWire(WireFormat):
    """Google's Gemini ``generateContent``."""

    name, key_header, key_prefix, body_key = "gemini", "x-goog-api-key", "", "candidates"

    def _prompt(self, body: bytes) -> tuple[str, bool]:
        return _decode_gemini(body).contents[-1].parts[0].text, False

    def completion(self, verdict: str, model: str, prompt: str, soft: bool, *, fingerprint: str = "fp_fake",
                   tokens_out: int = 1, cached: int = 0, written: int = 0) -> dict:
        usage: dict = {"promptTokenCount": len(prompt) // 4, "candidatesTokenCount": tokens_out}
        if cached:  # Gemini: part of promptTokenCount
            usage["cachedContentTokenCount"] = cached
        return {"candidates": [{"content": {"role": "model", "parts": [{"text": verdict}]},
                                "finishReason": "STOP"}],
                "usageMetadata": usage, "modelVersion": model}

    def error(self, status: int, message: str) -> dict:
        return {"error": {"code": status, "message": message, "status": "INVALID_ARGUMENT"}}


WIRE_FORMATS: dict[str, WireFormat] = {w.name: w for w in (OpenAIWire(), AnthropicWire(), GeminiWire())}
# The paths the server answers, and the wire format each speaks.
ROUTES = {
    "/v1/chat/completions": "openai",
    "/v1/messages": "anthropic",
    "/v1beta/models/{model}": "gemini",
    "/openai/deployments/{deployment}/chat/completions": "openai",  # Azure OpenAI
}
