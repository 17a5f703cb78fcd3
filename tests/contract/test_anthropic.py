"""The anthropic backend against a loopback Messages API server on 127.0.0.1."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

import anyio
import msgspec
import pytest
from aiohttp import web

from babelrun.core.items import Item
from babelrun.judges import judge_spec
from babelrun.judges.anthropic import AnthropicJudge, _reset
from babelrun.judges.base import FatalJudgeError, RejectedError, RetryableError
from babelrun.judges.http import bounded_wait, retry_after_header
from babelrun.judges.prompt import TEMPLATES
from babelrun.store import log
from babelrun.testing import choose
from helpers import LoopbackServer, quiet_audit, request, write_manifest

SECRET = "sk-ant-test-xyz789-never-log-me"
KEY_ENV = "BABELRUN_TEST_ANTHROPIC_KEY"
SYSTEM = TEMPLATES["pairwise"].system
BODY_FIELDS = {"model", "max_tokens", "temperature", "system", "messages"}

# status -> (error type, message) as the API documents them
ERRORS = {
    400: ("invalid_request_error", "max_tokens: field required"),
    401: ("authentication_error", "invalid x-api-key"),
    403: ("permission_error", "Your API key does not have permission to use this model"),
    404: ("not_found_error", "model: claude-nope"),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: ("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"),
    500: ("api_error", "Internal server error"),
    502: ("api_error", "Bad gateway"),
    503: ("api_error", "Service unavailable"),
    504: ("api_error", "Gateway timeout"),
    529: ("overloaded_error", "Overloaded"),
}


def _rfc3339(seconds_from_now: float) -> str:
    return datetime.fromtimestamp(time.time() + seconds_from_now, UTC).isoformat().replace("+00:00", "Z")


class FakeMessagesServer(LoopbackServer):
    """A deterministic judge behind ``POST /v1/messages`` on 127.0.0.1, in a background thread.

    It checks every request field by field (``problems`` lists what was wrong; such a request
    gets a 418), answers ``choose(user text)`` in the documented reply shape, and can be told
    to answer the first requests with scripted error statuses (``faults``, in order: 0 hangs
    until shutdown, 200 sends a garbled body) or every request with one (``always``).
    ``retry_after`` (None: no header) and ``reset_s`` (the ``anthropic-ratelimit-*-reset``
    timestamps, seconds ahead) go with 429s.
    """

    def __init__(self, *, key=SECRET, model="claude-x-20250101", expect_model="claude-x",
                 max_tokens=8, temperature=0.0, faults=(), always=None, retry_after=0.01,
                 reset_s=0.05, content=None):
        self.key, self.model, self.expect_model = key, model, expect_model
        self.max_tokens, self.temperature = max_tokens, temperature
        self.faults, self.always = list(faults), always
        self.retry_after, self.reset_s = retry_after, reset_s
        self.content = content  # verdict -> list of content blocks; one text block if None
        self.requests = 0
        self.statuses: list[int] = []
        self.problems: list[str] = []
        self.user_texts: list[str] = []
        self._lock = threading.Lock()

    def _check(self, request: web.Request, raw: bytes) -> list[str]:
        bad = []
        h = request.headers
        if h.get("anthropic-version") != "2023-06-01":
            bad.append(f"anthropic-version {h.get('anthropic-version')!r}")
        if h.get("content-type", "").split(";")[0] != "application/json":
            bad.append(f"content-type {h.get('content-type')!r}")
        if "Authorization" in h:
            bad.append("an Authorization header was sent")
        try:
            body = msgspec.json.decode(raw)
        except msgspec.DecodeError:
            return [*bad, "body is not JSON"]
        if set(body) != BODY_FIELDS:
            bad.append(f"body fields {sorted(body)}")
        if body.get("model") != self.expect_model:
            bad.append(f"model {body.get('model')!r}")
        if body.get("max_tokens") != self.max_tokens:
            bad.append(f"max_tokens {body.get('max_tokens')!r}")
        if body.get("temperature") != self.temperature:
            bad.append(f"temperature {body.get('temperature')!r}")
        if body.get("system") != SYSTEM:
            bad.append(f"system {body.get('system')!r}")
        messages = body.get("messages")
        if (not isinstance(messages, list) or len(messages) != 1 or set(messages[0]) != {"role", "content"}
                or messages[0]["role"] != "user" or not isinstance(messages[0]["content"], str)):
            bad.append(f"messages {messages!r}")
        elif SYSTEM in messages[0]["content"] or "[Answer A]" not in messages[0]["content"]:
            bad.append("the user message is not the user turn alone")
        return bad

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        with self._lock:
            self.requests += 1
            fault = self.faults.pop(0) if self.faults else self.always
        if request.headers.get("x-api-key") != self.key:
            return self._error(401)
        problems = self._check(request, raw)
        if problems:
            with self._lock:
                self.problems.extend(problems)
            return self._error(418, ("invalid_request_error", "; ".join(problems)))
        if fault == 0:
            await self._stop.wait()
            return web.Response(status=500)
        if fault == 200:
            return self._reply(200, b'{"id": "msg_x", "type": "message", "content": [{"ty')
        if fault is not None:
            return self._error(fault)
        user = msgspec.json.decode(raw)["messages"][0]["content"]
        with self._lock:
            self.user_texts.append(user)
        verdict = choose(user)
        content = self.content(verdict) if self.content else [{"type": "text", "text": verdict}]
        message = {
            "id": "msg_fake", "type": "message", "role": "assistant", "model": self.model,
            "content": content, "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": len(user) // 4, "output_tokens": 1},
        }
        return self._reply(200, msgspec.json.encode(message))

    def _error(self, status: int, error: tuple[str, str] | None = None) -> web.Response:
        kind, message = error or ERRORS[status]
        headers = {}
        if status == 429:
            if self.retry_after is not None:
                headers["retry-after"] = str(self.retry_after)
            headers.update({
                "anthropic-ratelimit-requests-limit": "50",
                "anthropic-ratelimit-requests-remaining": "0",
                "anthropic-ratelimit-requests-reset": _rfc3339(self.reset_s),
                "anthropic-ratelimit-tokens-limit": "40000",
                "anthropic-ratelimit-tokens-remaining": "12000",
                "anthropic-ratelimit-tokens-reset": _rfc3339(self.reset_s / 2),
            })
        body = {"type": "error", "error": {"type": kind, "message": message},
                "request_id": "req_fake"}
        return self._reply(status, msgspec.json.encode(body), headers)

    def _reply(self, status: int, body: bytes, headers: dict | None = None) -> web.Response:
        with self._lock:
            self.statuses.append(status)
        return web.Response(status=status, body=body, content_type="application/json",
                            headers={"request-id": "req_fake", **(headers or {})})

    def add_routes(self, app) -> None:
        app.router.add_post("/v1/messages", self._handle)


def _judge(server, **extra) -> dict:
    spec = {"name": "claude", "backend": "anthropic", "model": "claude-x", "endpoint": server.url,
            "api_key_env": KEY_ENV, "concurrency": 4, "retries": 4, "timeout_s": 5}
    spec.update(extra)
    return spec


# ---- end to end ---------------------------------------------------------------------------


def test_rate_limits_and_overload_are_retried_to_success(tmp_path, monkeypatch, small_corpus):
    monkeypatch.setenv(KEY_ENV, SECRET)
    faults = [429, 529, 429, 503, 529]
    with FakeMessagesServer(faults=faults) as server:
        path = write_manifest(tmp_path, [_judge(server)], corpus=small_corpus)
        result = quiet_audit(path)
    assert server.problems == []
    assert result.exit_code == 0
    final = log.final_records(log.read(tmp_path / "run"))
    assert len(final) == result.planned_calls and {r.status for r in final} == {"ok"}
    assert server.requests == result.planned_calls + len(faults)
    assert sum(r.attempts - 1 for r in final) == len(faults)
    assert sorted(s for s in server.statuses if s != 200) == sorted(faults)


# ---- one call at a time -------------------------------------------------------------------

ITEM = Item(item_id="i1", kind="text", lang="en", ref_id="r1", prompt="What is 2 + 2?",
            reference="Four.", perturbed="Five.", perturbation="negation", severity=0.3,
            ref_len=5, pert_len=5)
REQUEST = request(ITEM, "ref_first")


def _one(server_or_url, **spec_fields):
    url = server_or_url if isinstance(server_or_url, str) else server_or_url.url
    fields = {"name": "claude", "backend": "anthropic", "model": "claude-x", "endpoint": url,
              "api_key_env": KEY_ENV, "timeout_s": 5.0}
    fields.update(spec_fields)
    judge = AnthropicJudge(judge_spec(**fields), "jid", 0)

    async def go():
        try:
            return await judge.judge(REQUEST)
        finally:
            await judge.aclose()

    return anyio.run(go)


def test_reply_text_is_the_text_blocks_joined(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    blocks = lambda v: [{"type": "text", "text": "Answer: "},  # noqa: E731
                        {"type": "tool_use", "id": "t", "name": "x", "input": {}},
                        {"type": "text", "text": v}]
    with FakeMessagesServer(content=blocks) as server:
        reply = _one(server)
        empty = FakeMessagesServer(content=lambda v: [])
        with empty:
            nothing = _one(empty)
    assert server.problems == [] and empty.problems == []
    assert reply.raw == "Answer: " + choose(REQUEST.messages[1]["content"])
    assert reply.served_model == "claude-x-20250101" and reply.fingerprint is None
    assert reply.tokens_out == 1 and reply.tokens_in == len(REQUEST.messages[1]["content"]) // 4
    assert nothing.raw == ""


@pytest.mark.parametrize("status, error, kind", [
    (429, RetryableError, "rate_limited"), (529, RetryableError, "overloaded"),
    (500, RetryableError, "server_error"), (502, RetryableError, "server_error"),
    (503, RetryableError, "server_error"), (504, RetryableError, "server_error"),
    (401, FatalJudgeError, "unauthorized"), (403, FatalJudgeError, "forbidden"),
    (404, FatalJudgeError, "not_found"),
    (400, RejectedError, "rejected"), (413, RejectedError, "rejected"),
    (200, RetryableError, "bad_response"),
])
def test_errors_are_mapped_as_documented(monkeypatch, status, error, kind):
    monkeypatch.setenv(KEY_ENV, SECRET)
    with FakeMessagesServer(always=status, retry_after=2) as server:
        with pytest.raises(error) as info:
            _one(server)
    assert server.problems == []
    assert info.value.kind == kind
    assert SECRET not in str(info.value)
    if status != 200:
        assert ERRORS[status][1] in str(info.value)
    if status == 429:
        assert info.value.retry_after == 2.0


def test_a_429_without_retry_after_waits_for_the_exhausted_limits_reset(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    with FakeMessagesServer(always=429, retry_after=None, reset_s=2.0) as server:
        with pytest.raises(RetryableError) as info:
            _one(server)
    # requests are exhausted (reset in 2 s); tokens are not (their earlier reset is ignored)
    assert 1.5 < info.value.retry_after <= 2.0


def test_timeouts_and_refused_connections_are_retryable(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    with FakeMessagesServer(always=0) as server:
        with pytest.raises(RetryableError) as info:
            _one(server, timeout_s=0.2)
    assert info.value.kind == "timeout"
    with FakeMessagesServer() as closed:
        url = closed.url
    with pytest.raises(RetryableError) as info:
        _one(url)
    assert info.value.kind == "connection"


def test_a_spend_limit_429_stops_the_judge(monkeypatch):
    # Documented: a 429 whose error.details.error_code is enforced_spend_limit_reached does
    # not lift with waiting.
    monkeypatch.setenv(KEY_ENV, SECRET)

    class SpendLimited(FakeMessagesServer):
        def _error(self, status, error=None):
            body = {"type": "error", "error": {"type": "rate_limit_error", "message": "spend limit",
                                               "details": {"error_code": "enforced_spend_limit_reached"}}}
            return self._reply(429, msgspec.json.encode(body))

    with SpendLimited(always=429) as server:
        with pytest.raises(FatalJudgeError) as info:
            _one(server)
    assert info.value.kind == "spend_limit"


def test_retry_after_and_reset_headers():
    now = 1_700_000_000.0
    iso = lambda s: datetime.fromtimestamp(now + s, UTC).isoformat()  # noqa: E731
    assert retry_after_header("7") == 7.0
    assert bounded_wait(retry_after_header("-3")) == (0.0, False)
    assert retry_after_header("Tue, 14 Nov 2023 22:13:40 GMT", now=now) == 20.0
    assert retry_after_header("soon") is None
    assert retry_after_header(None) is None
    # The exhausted limit's reset; among all resets when none is reported exhausted.
    assert _reset({"anthropic-ratelimit-requests-reset": iso(5), "anthropic-ratelimit-requests-remaining": "3",
                   "anthropic-ratelimit-tokens-reset": iso(1), "anthropic-ratelimit-tokens-remaining": "0"},
                  now=now) == pytest.approx(1.0)
    assert _reset({"anthropic-ratelimit-requests-reset": iso(5),
                   "anthropic-ratelimit-tokens-reset": iso(30)}, now=now) == pytest.approx(30.0)
    assert _reset({"anthropic-ratelimit-tokens-reset": "2023-11-14T22:13:25Z"}, now=now) == pytest.approx(5.0)
    assert _reset({"anthropic-ratelimit-tokens-reset": iso(-10)}, now=now) == 0.0
    assert _reset({"anthropic-ratelimit-tokens-reset": "not a time"}, now=now) is None
    assert _reset({}, now=now) is None


def test_the_key_goes_only_in_x_api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    spec = judge_spec(name="c", backend="anthropic", model="m", api_key_env=KEY_ENV)
    judge = AnthropicJudge(spec, "jid", 0)
    assert judge.url == "https://api.anthropic.com/v1/messages"
    assert SECRET.encode() not in judge.body(REQUEST)
    body = msgspec.json.decode(judge.body(REQUEST))
    assert body["system"] == SYSTEM
    assert body["messages"] == [{"role": "user", "content": REQUEST.messages[1]["content"]}]
