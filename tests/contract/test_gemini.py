"""The gemini backend against a loopback server speaking the Gemini API's generateContent."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections import deque

import msgspec
import pytest
from aiohttp import web

import babelrun
import babelrun.engine.progress
from babelrun.app.cli import main
from babelrun.core.items import Item
from babelrun.judges import judge_spec
from babelrun.judges.base import (
    FatalJudgeError,
    JudgeRequest,
    RejectedError,
    RetryableError,
)
from babelrun.judges.gemini import GeminiJudge, _decode, _text
from babelrun.judges.identity import judge_id
from babelrun.judges.prompt import PAIRWISE
from babelrun.plan import Plan
from babelrun.store import log
from babelrun.testing import choose
from helpers import LoopbackServer, files_bytes, quiet_audit, request, write_manifest

SECRET = "AIza-test-gemini-key-never-log-me"
KEY_ENV = "BABELRUN_TEST_GEMINI_KEY"
MODEL = "gemini-x"
MODEL_VERSION = "gemini-x-001"
ONE_PERTURBATION = [{"name": "truncate", "severities": [0.5]}]


def _error(code: int, status: str, message: str, details: list | None = None) -> dict:
    err = {"code": code, "message": message, "status": status}
    if details is not None:
        err["details"] = details
    return {"error": err}


class GeminiServer(LoopbackServer):
    """``POST /v1beta/models/{model}:generateContent`` on 127.0.0.1, in a background thread.

    It checks every request field by field (what it finds wrong goes to ``problems`` and is
    answered 400), then answers with the next entry of ``script`` if any is left, else with a
    verdict chosen by ``babelrun.testing.choose``. A wrong key gets what Google sends for one:
    400 INVALID_ARGUMENT with the ErrorInfo reason API_KEY_INVALID (and a DebugInfo echoing the
    key, which the backend must not repeat)."""

    def __init__(self, *, key: str = SECRET, script: list[str] | None = None,
                 retry_delay: str = "0.2s", hang_s: float = 5.0):
        self.key = key
        self.script = deque(script or [])
        self.retry_delay = retry_delay
        self.hang_s = hang_s
        self.problems: list[str] = []
        self.requests = 0
        self.log: list[tuple[float, float, str]] = []  # (arrived, replied, what), monotonic
        self._lock = threading.Lock()

    # -- checking -------------------------------------------------------------------------

    def _check(self, request: web.Request, raw: bytes) -> list[str]:
        problems = []
        expected_path = f"/v1beta/models/{MODEL}:generateContent"
        if request.path != expected_path:
            problems.append(f"path {request.path!r} != {expected_path!r}")
        if request.query_string:
            problems.append(f"query string {request.query_string!r}")
        if "Authorization" in request.headers:
            problems.append("an Authorization header")
        if request.content_type != "application/json":
            problems.append(f"content type {request.content_type!r}")
        try:
            body = msgspec.json.decode(raw)
        except msgspec.DecodeError:
            return [*problems, "body is not JSON"]
        if set(body) != {"systemInstruction", "contents", "generationConfig"}:
            problems.append(f"top-level fields {sorted(body)}")
        if body.get("systemInstruction") != {"parts": [{"text": PAIRWISE.system}]}:
            problems.append(f"systemInstruction {body.get('systemInstruction')!r}")
        contents = body.get("contents")
        if not (isinstance(contents, list) and len(contents) == 1
                and set(contents[0]) == {"role", "parts"} and contents[0]["role"] == "user"
                and len(contents[0]["parts"]) == 1 and set(contents[0]["parts"][0]) == {"text"}):
            problems.append(f"contents {contents!r}")
        else:
            user = contents[0]["parts"][0]["text"]
            if "[Answer A]" not in user or "[Answer B]" not in user:
                problems.append("the user turn lacks the answers")
            if PAIRWISE.system in user:
                problems.append("the system prompt is inside contents")
        config = body.get("generationConfig")
        if config != {"temperature": 0.0, "maxOutputTokens": 8, "candidateCount": 1}:
            problems.append(f"generationConfig {config!r}")
        return problems

    # -- answering ------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        arrived = time.monotonic()
        raw = await request.read()
        with self._lock:
            self.requests += 1
            problems = self._check(request, raw)
            self.problems.extend(problems)
            fault = self.script.popleft() if self.script and not problems else None
        if problems:
            what, resp = "problem", self._json(400, _error(400, "INVALID_ARGUMENT", "; ".join(problems)))
        elif request.headers.get("x-goog-api-key") != self.key:
            what, resp = "bad_key", self._json(400, _error(
                400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.",
                [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
                  "domain": "googleapis.com",
                  "metadata": {"service": "generativelanguage.googleapis.com"}},
                 {"@type": "type.googleapis.com/google.rpc.DebugInfo",
                  "detail": f"Invalid API key: {request.headers.get('x-goog-api-key')}"}]))
        elif fault is not None:
            what, resp = fault, await self._fault(fault, raw)
        else:
            what, resp = "ok", self._json(200, self._reply(self._user(raw)))
        with self._lock:
            self.log.append((arrived, time.monotonic(), what))
        return resp

    @staticmethod
    def _user(raw: bytes) -> str:
        return msgspec.json.decode(raw)["contents"][0]["parts"][0]["text"]

    @staticmethod
    def _reply(user: str, candidate: dict | None = None, **extra) -> dict:
        if candidate is None:
            candidate = {"content": {"parts": [{"text": choose(user)}], "role": "model"},
                         "finishReason": "STOP", "index": 0}
        return {"candidates": [candidate],
                "usageMetadata": {"promptTokenCount": len(user) // 4, "candidatesTokenCount": 1,
                                  "totalTokenCount": len(user) // 4 + 1},
                "modelVersion": MODEL_VERSION, "responseId": "resp-1", **extra}

    async def _fault(self, fault: str, raw: bytes) -> web.StreamResponse:
        user = self._user(raw)
        if fault == "429":
            return self._json(429, _error(
                429, "RESOURCE_EXHAUSTED", "You exceeded your current quota.",
                [{"@type": "type.googleapis.com/google.rpc.QuotaFailure",
                  "violations": [{
                      "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                      "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]},
                 {"@type": "type.googleapis.com/google.rpc.Help", "links": [{"description": "quota",
                  "url": "https://ai.google.dev/gemini-api/docs/rate-limits"}]},
                 {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": self.retry_delay}]))
        if fault == "503":
            return self._json(503, _error(503, "UNAVAILABLE", "The model is overloaded. Please try again later."))
        if fault == "500":
            return self._json(500, _error(500, "INTERNAL", "An internal error has occurred."))
        if fault == "401":
            return self._json(401, _error(
                401, "UNAUTHENTICATED", "Request had invalid authentication credentials."))
        if fault == "403":
            return self._json(403, _error(
                403, "PERMISSION_DENIED", "Method doesn't allow unregistered callers."))
        if fault == "404":
            return self._json(404, _error(
                404, "NOT_FOUND", f"models/{MODEL} is not found for API version v1beta."))
        if fault == "400":
            return self._json(400, _error(400, "INVALID_ARGUMENT", "Request contains an invalid argument."))
        if fault == "safety":
            return self._json(200, self._reply(user, {
                "finishReason": "SAFETY", "index": 0,
                "safetyRatings": [{"category": "HARM_CATEGORY_HARASSMENT", "probability": "HIGH",
                                   "blocked": True}]}))
        if fault == "prompt_blocked":
            reply = self._reply(user, promptFeedback={"blockReason": "SAFETY", "safetyRatings": []})
            del reply["candidates"]
            return self._json(200, reply)
        if fault == "max_tokens":  # a thinking model spent the whole budget thinking
            return self._json(200, self._reply(user, {
                "content": {"role": "model"}, "finishReason": "MAX_TOKENS", "index": 0}))
        if fault == "malformed":
            body = msgspec.json.encode(self._reply(user))
            return web.Response(status=200, body=body[: len(body) // 2], content_type="application/json")
        if fault == "hang":
            try:
                await asyncio.wait_for(self._stop.wait(), self.hang_s)
            except TimeoutError:
                pass
            return self._json(200, self._reply(user))
        raise AssertionError(f"unknown fault {fault!r}")

    @staticmethod
    def _json(status: int, doc: dict) -> web.Response:
        return web.Response(status=status, body=msgspec.json.encode(doc), content_type="application/json")

    # -- running --------------------------------------------------------------------------

    def add_routes(self, app) -> None:
        app.router.add_route("POST", "/{tail:.*}", self._handle)


def _judge(server: GeminiServer, **extra) -> dict:
    spec = {"name": "gem", "backend": "gemini", "model": MODEL, "endpoint": server.url,
            "api_key_env": KEY_ENV, "timeout_s": 5, "retries": 4}
    spec.update(extra)
    return spec


def _expected_slots(path) -> dict:
    """(item_id, order) -> what the server's judge names, from the prompts the plan renders."""
    out = {}
    for item in Plan.from_manifest(babelrun.load_manifest(path)).items():
        for order in ("ref_first", "pert_first"):
            user = request(item, order).messages[1]["content"]
            out[item.item_id, order] = choose(user)
    return out


# ---- end to end through the engine --------------------------------------------------------


def test_429_and_503_are_retried_honouring_retry_info(tmp_path, monkeypatch, small_corpus):
    monkeypatch.setenv(KEY_ENV, SECRET)
    script = ["429", "503", "429", "500"]
    # 0.3 s: longer than the engine's own first backoff (at most 0.25 s), so only a backend
    # that read RetryInfo waits this long.
    with GeminiServer(script=script, retry_delay="0.3s") as server:
        path = write_manifest(tmp_path, [_judge(server, concurrency=1)], corpus=small_corpus,
                              perturbations=ONE_PERTURBATION)
        result = quiet_audit(path)
    assert server.problems == []
    assert result.exit_code == 0
    final = log.final_records(log.read(tmp_path / "run"))
    assert len(final) == result.planned_calls
    assert {r.status for r in final} == {"ok"}
    assert sum(r.attempts - 1 for r in final) == len(script)
    assert server.requests == result.planned_calls + len(script)
    assert result.stats.judges[0].rate_limited == 2
    # Calls run one at a time: the request after each 429 is its retry.
    for (_, replied, what), (arrived, _, _) in zip(server.log, server.log[1:], strict=False):
        if what == "429":
            assert arrived - replied >= 0.29


def test_wrong_key_stops_the_judge_without_echoing_it(tmp_path, monkeypatch, capsys, small_corpus):
    # Google answers a wrong key with 400 INVALID_ARGUMENT / API_KEY_INVALID, not 401.
    wrong = "AIza-wrong-key-xyz"
    monkeypatch.setenv(KEY_ENV, wrong)
    with GeminiServer() as server:
        path = write_manifest(tmp_path, [_judge(server, concurrency=1)], corpus=small_corpus,
                              perturbations=ONE_PERTURBATION)
        code = main(["audit", str(path)])
        requests = server.requests
    out, err = capsys.readouterr()
    assert code == 1 and requests == 1
    assert "judge 'gem' stopped: HTTP 400 INVALID_ARGUMENT" in err and "API key not valid" in err
    assert wrong not in err + out
    assert wrong.encode() not in files_bytes(tmp_path / "run")


def test_blocked_replies_are_invalid_verdicts_that_say_why(tmp_path, monkeypatch, small_corpus):
    monkeypatch.setenv(KEY_ENV, SECRET)
    with GeminiServer(script=["safety", "prompt_blocked", "max_tokens"]) as server:
        path = write_manifest(tmp_path, [_judge(server, concurrency=1)], corpus=small_corpus,
                              perturbations=ONE_PERTURBATION)
        result = quiet_audit(path)
    assert server.problems == []
    assert result.exit_code == 0  # an invalid verdict is a verdict, not a failed call
    records = list(log.read(tmp_path / "run"))
    assert len(records) == result.planned_calls == server.requests
    assert {r.status for r in records} == {"ok"}
    invalid = sorted(r.raw for r in records if r.slot == "invalid")
    assert invalid == ["[blocked: SAFETY]", "[blocked: prompt SAFETY]", "[no text: MAX_TOKENS]"]
    assert all(r.verdict == "invalid" for r in records if r.slot == "invalid")
    expected = _expected_slots(path)
    assert all(r.slot == expected[r.item_id, r.order] for r in records if r.slot != "invalid")


# ---- the backend alone --------------------------------------------------------------------


def _request() -> JudgeRequest:
    item = Item(item_id="i1", kind="perturbation", lang="en", ref_id="r1", prompt="What is 2+2?",
                reference="Four.", perturbed="Five.", perturbation="number_corrupt",
                severity=0.5, ref_len=5, pert_len=5)
    return request(item, "ref_first")


def _backend(url: str, **extra) -> GeminiJudge:
    spec = judge_spec(**{"name": "gem", "backend": "gemini", "model": MODEL, "endpoint": url,
                        "api_key_env": KEY_ENV, "timeout_s": 5, **extra})
    return GeminiJudge(spec, judge_id(spec), 0)


async def _call(server: GeminiServer, **extra):
    judge = _backend(server.url, **extra)
    try:
        return await judge.judge(_request())
    finally:
        await judge.aclose()


@pytest.mark.parametrize("fault, error, kind, retry_after", [
    ("429", RetryableError, "rate_limited", 0.2),
    ("503", RetryableError, "server_error", None),
    ("500", RetryableError, "server_error", None),
    ("malformed", RetryableError, "bad_response", None),
    ("400", RejectedError, "rejected", None),
    ("401", FatalJudgeError, "unauthorized", None),
    ("403", FatalJudgeError, "forbidden", None),
    ("404", FatalJudgeError, "not_found", None),
])
async def test_error_mapping(monkeypatch, fault, error, kind, retry_after):
    monkeypatch.setenv(KEY_ENV, SECRET)
    with GeminiServer(script=[fault]) as server:
        with pytest.raises(error) as caught:
            await _call(server)
    assert server.problems == []
    assert caught.value.kind == kind
    assert getattr(caught.value, "retry_after", None) == retry_after
    assert SECRET not in str(caught.value)


async def test_reply_fields(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    with GeminiServer() as server:
        reply = await _call(server)
    assert server.problems == []
    assert reply.raw == choose(_request().messages[1]["content"])
    assert reply.served_model == MODEL_VERSION and reply.fingerprint is None
    assert reply.tokens_in == len(_request().messages[1]["content"]) // 4 and reply.tokens_out == 1


async def test_timeout_and_refused_connection_are_retryable(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    with GeminiServer(script=["hang"], hang_s=3) as server:
        with pytest.raises(RetryableError) as caught:
            await _call(server, timeout_s=0.2)
    assert caught.value.kind == "timeout"
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    judge = _backend(f"http://127.0.0.1:{port}")
    try:
        with pytest.raises(RetryableError) as caught:
            await judge.judge(_request())
    finally:
        await judge.aclose()
    assert caught.value.kind == "connection"


def test_default_endpoint_and_header_only_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    judge = _backend(None)
    assert judge.url == f"https://generativelanguage.googleapis.com/v1beta/models/{MODEL}:generateContent"
    assert SECRET not in judge.url and judge._headers["x-goog-api-key"] == SECRET


def test_text_joins_parts_and_skips_thoughts():
    body = {"candidates": [{"content": {"role": "model", "parts": [
        {"text": "weighing A against B", "thought": True}, {"text": "Answer: "}, {"text": "B"}]},
        "finishReason": "STOP"}]}
    assert _text(_decode(msgspec.json.encode(body))) == "Answer: B"
    partial = {"candidates": [{"content": {"role": "model", "parts": [{"text": "A"}]},
                               "finishReason": "SAFETY"}]}
    assert _text(_decode(msgspec.json.encode(partial))) == "A"
