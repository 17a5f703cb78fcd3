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
the request. Status mapping, masking and the bounds on replies are ``http.HttpJudge``'s.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, ClassVar
from urllib.parse import quote

import msgspec

from ..spec import AzureSpec, JudgeSpec
from .base import JudgeReply, JudgeRequest, RetryableError
from .batch_api import MAX_RESULTS_BYTES, BatchApi, BatchResult, Submission, batch_id, jsonl, message
from .http import HttpJudge, json_or_none
from .options import BatchApiOptions, set_fields
from .presets import PRESETS, key_env
from .prompt import slot_probabilities
from .protocol import max_tokens, soft_labels
from .registry import options_of


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
    finish_reason: str | None = None  # "length": cut at max_tokens


class _PromptDetails(msgspec.Struct):
    cached_tokens: int | None = None


class _Usage(msgspec.Struct):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    prompt_tokens_details: _PromptDetails | None = None  # cached_tokens: the provider's prompt cache


class _Completion(msgspec.Struct):
    choices: list[_Choice]
    model: str | None = None
    system_fingerprint: str | None = None
    usage: _Usage | None = None


_decode = msgspec.json.Decoder(_Completion).decode


class OpenAIOptions(BatchApiOptions, frozen=True):
    """The OpenAI client's options (openai and every OpenAI-compatible preset): reasoning
    models and the batch API (``BatchApiOptions``; ``batch`` only where the preset has one),
    extra ``headers`` (plain values, written to run.yaml), ``headers_env`` (header name ->
    environment variable; the values are never written), the ``OpenAI-Organization`` /
    ``OpenAI-Project`` headers, and Azure OpenAI's deployment (the ``azure`` preset)."""

    headers: dict[str, str] = {}
    headers_env: dict[str, str] = {}
    organization: str | None = None
    project: str | None = None
    azure: AzureSpec | None = None

    def identity(self) -> dict[str, Any]:
        # headers and organisation/project may route a request to another model or deployment;
        # headers_env adds the variables' names, never their values
        return {**super().identity(), **set_fields(self, ("azure", "headers", "headers_env", "organization",
                                                          "project"))}


def headers_of(spec: JudgeSpec, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The request headers: the key (``Authorization: Bearer``, Azure's ``api-key``), the
    organisation/project, the judge's extra headers and those from environment variables."""
    options = options_of(spec, OpenAIOptions)
    headers = {"Content-Type": "application/json"}
    headers.update(options.headers)
    headers.update({name: environ[var] for name, var in options.headers_env.items() if var in environ})
    if options.organization:
        headers["OpenAI-Organization"] = options.organization
    if options.project:
        headers["OpenAI-Project"] = options.project
    variable = key_env(spec.backend, spec.api_key_env, spec.endpoint)
    if variable and variable in environ:  # local servers may run without a key
        if options.azure is not None:
            headers["api-key"] = environ[variable]
        else:
            headers["Authorization"] = f"Bearer {environ[variable]}"
    return headers


def url_of(spec: JudgeSpec) -> str:
    base = (spec.endpoint or PRESETS[spec.backend].endpoint).rstrip("/")
    azure = options_of(spec, OpenAIOptions).azure
    if azure is not None:
        return (f"{base}/openai/deployments/{quote(azure.deployment, safe='')}/chat/completions"
                f"?api-version={quote(azure.api_version, safe='')}")
    return base + "/chat/completions"


class OpenAIJudge(HttpJudge):
    batch_api: ClassVar[type[BatchApi]]  # OpenAIBatches (below): the batch API of this wire format

    def __init__(self, spec: JudgeSpec, judge_id: str, seed: int = 0):
        self.options = options_of(spec, OpenAIOptions)
        headers = headers_of(spec)
        # Masked out of every message that leaves the process: the key, and every value a
        # header took from the environment.
        secrets = [headers.get("Authorization", "").removeprefix("Bearer ") or None, headers.get("api-key"),
                   *(os.environ.get(var) for var in self.options.headers_env.values())]
        super().__init__(spec, judge_id, url_of(spec), headers, secrets=secrets)
        self._frame: tuple[bytes, bytes] | None = None

    def body(self, request: JudgeRequest) -> bytes:
        # Only the messages change from call to call: the rest is encoded once (``_frame``).
        if self._frame is None:
            self._frame = (b'{"model":' + msgspec.json.encode(self.spec.model) + b',"messages":',
                           b"," + msgspec.json.encode(self._settings())[1:])
        head, tail = self._frame
        if request.seed is not None:  # the one per-request setting: the sample's seed
            return head + msgspec.json.encode(request.messages) + b',"seed":' + str(request.seed).encode() + tail
        return head + msgspec.json.encode(request.messages) + tail

    def _settings(self) -> dict[str, Any]:
        """The body's fields after the messages, the same in every call."""
        body: dict[str, Any] = {}
        if self.options.hidden_reasoning():  # reasoning models take no temperature
            body["max_completion_tokens"] = max_tokens(self.spec)
            if self.options.reasoning_effort:
                body["reasoning_effort"] = self.options.reasoning_effort
        else:
            body.update(temperature=self.spec.temperature, max_tokens=max_tokens(self.spec))
        if self.spec.soft:  # one token, and the probabilities of its likeliest values
            body.update(max_tokens=1, logprobs=True, top_logprobs=20)
        return body

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
            tokens_cached=usage.prompt_tokens_details.cached_tokens if usage.prompt_tokens_details else None,
            probs=_soft(choice, soft_labels(self.spec)) if self.spec.soft else None,
            truncated=choice.finish_reason == "length" and not self.spec.soft,  # a soft judge asks one token
        )


def _soft(choice: _Choice, labels: dict[str, str] | None = None) -> tuple[float, float, float] | None:
    content = choice.logprobs.content if choice.logprobs else None
    if not content:
        return None
    first = content[0]
    top = [(t.token, t.logprob) for t in first.top_logprobs] or [(first.token, first.logprob)]
    return slot_probabilities(top, labels)


OPENAI_TERMINAL = ("completed", "failed", "expired", "cancelled")
INTENT_KEY = "babelrun_intent"  # OpenAI batch metadata naming the submission (Pending.intent)


class OpenAIBatches(BatchApi):
    provider = "openai"

    def __init__(self, judge: HttpJudge, on_request: Callable[[], None] = lambda: None) -> None:
        super().__init__(judge, on_request)
        self.base = judge.url.removesuffix("/chat/completions")

    async def find(self, pending: Submission) -> str | None:
        """The batch created with ``pending.intent`` in its metadata, if the provider has it."""
        listing = await self.json("GET", f"{self.base}/batches?limit=100")
        for batch in listing.get("data") or []:
            if isinstance(batch, dict) and (batch.get("metadata") or {}).get(INTENT_KEY) == pending.intent:
                return batch_id(batch, "GET /batches")
        return None

    async def submit(self, requests: list[tuple[str, JudgeRequest]], intent: str) -> str:
        lines = bytearray()
        for cid, request in requests:
            lines += msgspec.json.encode({"custom_id": cid, "method": "POST", "url": "/v1/chat/completions",
                                          "body": msgspec.Raw(self.judge.body(request))})
            lines += b"\n"
        import aiohttp

        form = aiohttp.FormData()
        form.add_field("purpose", "batch")
        form.add_field("file", bytes(lines), filename="babelrun-batch.jsonl", content_type="application/jsonl")
        body = form()  # the session's JSON content type must not win over the multipart one
        file = json_or_none(await self.request("POST", f"{self.base}/files", data=body,
                                               headers={"Content-Type": body.content_type}))
        if not isinstance(file, dict) or not isinstance(file.get("id"), str):
            raise RetryableError("bad_response", f"no file id from POST {self.base}/files")
        batch = await self.json("POST", f"{self.base}/batches", {
            "input_file_id": file["id"], "endpoint": "/v1/chat/completions", "completion_window": "24h",
            "metadata": {INTENT_KEY: intent}})
        return batch_id(batch, f"POST {self.base}/batches")

    async def poll(self, batch_id: str) -> tuple[bool, dict[str, Any]]:
        batch = await self.json("GET", f"{self.base}/batches/{batch_id}")
        return batch.get("status") in OPENAI_TERMINAL, batch

    async def results(self, batch: dict[str, Any]) -> list[BatchResult]:
        out: list[BatchResult] = []
        for key in ("output_file_id", "error_file_id"):
            if not batch.get(key):
                continue
            content = await self.request("GET", f"{self.base}/files/{batch[key]}/content", cap=MAX_RESULTS_BYTES)
            for line in jsonl(content):
                response = line.get("response") or {}
                if line.get("error") is None and response.get("status_code") == 200:
                    out.append((line["custom_id"], msgspec.json.encode(response.get("body")), None))
                else:
                    error = line.get("error") or response.get("body") or "no response"
                    said = f"HTTP {response['status_code']}: " if response.get("status_code") else ""
                    out.append((line["custom_id"], None, said + message(self.judge, error)))
        return out


OpenAIJudge.batch_api = OpenAIBatches


ONE_PRESET = frozenset().union(*(p.options for p in PRESETS.values()))  # fields of one preset alone


def check(spec: JudgeSpec, environ: Mapping[str, str]) -> tuple[str, str] | None:
    """A preset's own requirements (Azure: the deployment and the resource's URL), the options
    of one preset alone (``azure``) refused on the others, and the header variables set."""
    options = options_of(spec, OpenAIOptions)
    preset = PRESETS.get(spec.backend)
    for field, problem in (preset.requires if preset else {}).items():
        if getattr(options if field in options.__struct_fields__ else spec, field) is None:
            return field, problem
    for field in sorted(ONE_PRESET - (preset.options if preset else frozenset())):
        if getattr(options, field) is not None:
            takers = [name for name, p in PRESETS.items() if field in p.options]
            return field, f"does not apply to the {spec.backend} backend (it is an option of: {', '.join(takers)})"
    for name, var in options.headers_env.items():
        if var not in environ:
            return f"headers_env.{name}", f"environment variable {var} is not set"
    return None
