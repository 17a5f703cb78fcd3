"""Provider batch APIs (``batch: true``) against a loopback server emulating OpenAI's Batch API
and Anthropic's Message Batches on 127.0.0.1: submit once, poll, collect, resume after a kill."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime

import msgspec
import pytest
from aiohttp import web

import babelrun
from babelrun.engine import batches
from babelrun.errors import ManifestError
from babelrun.plan import Plan
from babelrun.store import log
from babelrun.testing import choose
from helpers import ROOT, LoopbackServer, files_bytes, quiet_audit, write_manifest

SECRET = "sk-batch-test-never-log-me"
KEY_ENV = "BABELRUN_TEST_BATCH_KEY"


class FakeBatchServer(LoopbackServer):
    """OpenAI ``/v1/files`` + ``/v1/batches`` and Anthropic ``/v1/messages/batches``, in a
    background thread. A batch moves validating -> in_progress -> completed (OpenAI) or
    in_progress -> ended (Anthropic) on its ``polls_to_end``-th retrieve, unless ``hold`` is
    set; every request is answered with ``choose(user text)``."""

    def __init__(self, polls_to_end: int = 2, hold: bool = False, create_delay_s: float = 0.0):
        self.polls_to_end = polls_to_end
        self.hold = hold
        self.create_delay_s = create_delay_s  # a slow create: the batch exists before the reply
        self.uploads = 0
        self.created: Counter = Counter()  # provider -> batches created
        self.polls = 0
        self.keys: set[str] = set()
        self.problems: list[str] = []
        self._files: dict[str, bytes] = {}
        self._batches: dict[str, dict] = {}
        self._lock = threading.Lock()

    # -- OpenAI ----------------------------------------------------------------------------

    async def upload(self, request: web.Request) -> web.Response:
        self.keys.add(request.headers.get("Authorization", ""))
        form = await request.post()
        if form.get("purpose") != "batch" or not hasattr(form.get("file"), "file"):
            self.problems.append(f"upload form: {dict(form)}")
            return web.json_response({"error": {"message": "bad upload"}}, status=400)
        content = form["file"].file.read()
        with self._lock:
            self.uploads += 1
            fid = f"file-{len(self._files)}"
            self._files[fid] = content
        return web.json_response({"id": fid, "object": "file", "bytes": len(content), "purpose": "batch",
                                  "filename": form["file"].filename, "created_at": int(time.time())})

    async def create(self, request: web.Request) -> web.Response:
        self.keys.add(request.headers.get("Authorization", ""))
        body = await request.json()
        if body.get("endpoint") != "/v1/chat/completions" or body.get("completion_window") != "24h":
            self.problems.append(f"create: {body}")
        lines = [msgspec.json.decode(x) for x in self._files[body["input_file_id"]].splitlines()]
        for line in lines:
            if line["method"] != "POST" or line["url"] != "/v1/chat/completions" or "model" not in line["body"]:
                self.problems.append(f"line: {line}")
        with self._lock:
            self.created["openai"] += 1
            bid = f"batch_{sum(self.created.values())}"
            self._batches[bid] = {"lines": lines, "polls": 0, "metadata": body.get("metadata"),
                                  "created": time.time()}
        await self._slow()
        return web.json_response(self._openai_batch(bid, "validating"))

    async def _slow(self) -> None:
        """The create's delay; ends when the server stops (no handler left pending)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), self.create_delay_s)

    async def list_batches(self, request: web.Request) -> web.Response:
        data = [self._openai_batch(bid, "in_progress") for bid, b in self._batches.items() if "lines" in b]
        return web.json_response({"object": "list", "data": data[::-1], "has_more": False})

    def _openai_batch(self, bid: str, status: str, output: str | None = None) -> dict:
        return {"id": bid, "object": "batch", "endpoint": "/v1/chat/completions", "errors": None,
                "input_file_id": "file-0", "completion_window": "24h", "status": status,
                "output_file_id": output, "error_file_id": None, "created_at": int(time.time()),
                "request_counts": {"total": len(self._batches[bid]["lines"]), "completed": 0, "failed": 0},
                "metadata": self._batches[bid].get("metadata")}

    async def retrieve(self, request: web.Request) -> web.Response:
        bid = request.match_info["id"]
        batch = self._batches[bid]
        with self._lock:
            self.polls += 1
            batch["polls"] += 1
        if self.hold or batch["polls"] < self.polls_to_end:
            return web.json_response(self._openai_batch(bid, "in_progress" if batch["polls"] > 1 else "validating"))
        fid = f"file-out-{bid}"
        out = bytearray()
        for line in batch["lines"]:
            completion = {"id": "chatcmpl-b", "object": "chat.completion", "model": "batch-model",
                          "system_fingerprint": "fp_batch",
                          "choices": [{"index": 0,
                                       "message": {"role": "assistant",
                                                   "content": choose(line["body"]["messages"][-1]["content"])},
                                       "finish_reason": "stop"}],
                          "usage": {"prompt_tokens": 10, "completion_tokens": 1}}
            out += msgspec.json.encode({"id": "batch_req_1", "custom_id": line["custom_id"],
                                        "response": {"status_code": 200, "request_id": "r", "body": completion},
                                        "error": None}) + b"\n"
        self._files[fid] = bytes(out)
        return web.json_response(self._openai_batch(bid, "completed", fid))

    async def content(self, request: web.Request) -> web.Response:
        return web.Response(body=self._files[request.match_info["id"]], content_type="application/octet-stream")

    # -- Anthropic -------------------------------------------------------------------------

    async def a_create(self, request: web.Request) -> web.Response:
        self.keys.add(request.headers.get("x-api-key", ""))
        if request.headers.get("anthropic-version") != "2023-06-01":
            self.problems.append("anthropic-version")
        body = await request.json()
        for r in body["requests"]:
            if not set(r["params"]) >= {"model", "max_tokens", "messages"}:
                self.problems.append(f"params: {r}")
        with self._lock:
            self.created["anthropic"] += 1
            bid = f"msgbatch_{sum(self.created.values())}"
            self._batches[bid] = {"requests": body["requests"], "polls": 0, "created": time.time()}
        await self._slow()
        return web.json_response(self._anthropic_batch(bid, "in_progress"))

    async def a_list(self, request: web.Request) -> web.Response:
        data = [self._anthropic_batch(bid, "in_progress") for bid, b in self._batches.items() if "requests" in b]
        return web.json_response({"data": data[::-1], "has_more": False})

    def _anthropic_batch(self, bid: str, status: str) -> dict:
        n = len(self._batches[bid]["requests"])
        ended = status == "ended"
        return {"id": bid, "type": "message_batch", "processing_status": status,
                "request_counts": {"processing": 0 if ended else n, "succeeded": n if ended else 0,
                                   "errored": 0, "canceled": 0, "expired": 0},
                "results_url": f"{self.url}/v1/messages/batches/{bid}/results" if ended else None,
                "created_at": datetime.fromtimestamp(self._batches[bid]["created"], UTC).isoformat(),
                "ended_at": None, "expires_at": None}

    async def a_retrieve(self, request: web.Request) -> web.Response:
        bid = request.match_info["id"]
        with self._lock:
            self.polls += 1
            self._batches[bid]["polls"] += 1
        ended = not self.hold and self._batches[bid]["polls"] >= self.polls_to_end
        return web.json_response(self._anthropic_batch(bid, "ended" if ended else "in_progress"))

    async def a_results(self, request: web.Request) -> web.Response:
        out = bytearray()
        for r in self._batches[request.match_info["id"]]["requests"]:
            message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "batch-claude",
                       "content": [{"type": "text", "text": choose(r["params"]["messages"][-1]["content"])}],
                       "stop_reason": "end_turn", "usage": {"input_tokens": 10, "output_tokens": 1}}
            out += msgspec.json.encode({"custom_id": r["custom_id"],
                                        "result": {"type": "succeeded", "message": message}}) + b"\n"
        return web.Response(body=bytes(out), content_type="application/binary")

    # -- running ---------------------------------------------------------------------------

    def add_routes(self, app) -> None:
        app.router.add_post("/v1/files", self.upload)
        app.router.add_get("/v1/files/{id}/content", self.content)
        app.router.add_post("/v1/batches", self.create)
        app.router.add_get("/v1/batches", self.list_batches)
        app.router.add_get("/v1/messages/batches", self.a_list)
        app.router.add_get("/v1/batches/{id}", self.retrieve)
        app.router.add_post("/v1/messages/batches", self.a_create)
        app.router.add_get("/v1/messages/batches/{id}", self.a_retrieve)
        app.router.add_get("/v1/messages/batches/{id}/results", self.a_results)


def _judge(server, backend: str) -> dict:
    endpoint = server.url + ("/v1" if backend == "openai" else "")
    return {"name": f"{backend}-batch", "backend": backend, "model": "m", "endpoint": endpoint,
            "api_key_env": KEY_ENV, "batch": True, "batch_poll_s": 0.05, "timeout_s": 5}


def _check_verdicts(path, records) -> None:
    items = {i.item_id: i for i in Plan.from_manifest(babelrun.load_manifest(path)).items()}
    for r in records:
        item = items[r.item_id]
        a, b = (item.reference, item.perturbed) if r.order == "ref_first" else (item.perturbed, item.reference)
        assert r.slot == choose(f"[Answer A]\n{a}\n[End of Answer A]\n\n[Answer B]\n{b}\n[End of Answer B]")


@pytest.mark.parametrize("backend", ["openai", "anthropic"])
def test_batch_audit_completes_with_one_record_per_key(tmp_path, monkeypatch, small_corpus, backend):
    monkeypatch.setenv(KEY_ENV, SECRET)
    with FakeBatchServer() as server:
        path = write_manifest(tmp_path, [_judge(server, backend)], corpus=small_corpus)
        result = quiet_audit(path)
        rerun = quiet_audit(path)  # everything is done: a rerun submits nothing
    assert result.exit_code == 0, result.stop_reasons
    assert rerun.exit_code == 0 and rerun.new_records == 0
    assert server.problems == []
    assert server.created == {backend: 1} and server.polls >= 2
    assert server.uploads == (1 if backend == "openai" else 0)
    assert server.keys == {f"Bearer {SECRET}" if backend == "openai" else SECRET}
    records = list(log.read(tmp_path / "run"))
    assert len(records) == result.planned_calls == len({r.key for r in records})
    assert {r.status for r in records} == {"ok"}
    assert all(r.tokens_in == 10 and r.tokens_out == 1 and r.served_model for r in records)
    _check_verdicts(path, records)
    assert result.stats.judges[0].ok == result.planned_calls
    assert not (tmp_path / "run" / "batches" / f"{records[0].judge_id}.json").exists()
    assert SECRET.encode() not in files_bytes(tmp_path / "run")


def test_sigkill_after_submission_resumes_the_same_batch(tmp_path, monkeypatch, small_corpus):
    monkeypatch.setenv(KEY_ENV, SECRET)
    env = dict(os.environ)
    with FakeBatchServer(hold=True) as server:
        judge = {**_judge(server, "openai"), "batch_poll_s": 0.1}
        path = write_manifest(tmp_path, [judge], corpus=small_corpus)
        jid = babelrun.judges.judge_id(babelrun.load_manifest(path).judges[0])
        state = tmp_path / "run" / "batches" / f"{jid}.json"
        cmd = [sys.executable, "-m", "babelrun", "audit", str(path)]
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30
        while not state.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert proc.poll() is None and state.exists(), proc.stderr.read().decode() if proc.poll() is not None else ""
        while server.polls < 2 and time.monotonic() < deadline:  # it is polling the batch
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        pending = msgspec.json.decode(state.read_bytes(), type=batches.Pending)
        assert pending.provider == "openai" and pending.batch_id == "batch_1"
        assert not list(log.read(tmp_path / "run"))

        server.hold = False  # the provider finishes the batch
        again = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        assert again.returncode == 0, again.stderr
    assert server.created == {"openai": 1} and server.uploads == 1
    assert not state.exists()
    records = list(log.read(tmp_path / "run"))
    ok = Counter(r.key for r in records if r.status == "ok")
    planned = {(jid, i, o) for i in Plan.from_manifest(babelrun.load_manifest(path)).item_ids
               for o in ("ref_first", "pert_first")}
    assert set(ok) == planned and max(ok.values()) == 1 and len(records) == len(planned)
    _check_verdicts(path, records)


@pytest.mark.parametrize(("extra", "message"), [
    ({"backend": "simulated"}, "batch: does not apply to the simulated backend"),
    ({"backend": "openai", "model": "m", "soft": True}, "batch and soft"),
])
def test_batch_manifest_checks(tmp_path, extra, message):
    path = write_manifest(tmp_path, [{"name": "j", "batch": True, **extra}])
    with pytest.raises(ManifestError, match=message):
        babelrun.load_manifest(path, environ={"OPENAI_API_KEY": "k"})


@pytest.mark.parametrize("backend", ["openai", "anthropic"])
def test_sigkill_during_a_slow_create_never_creates_a_second_batch(backend, tmp_path, monkeypatch, small_corpus):
    """S6: killed after the provider created the batch but before its id was written, the
    next audit finds that batch (OpenAI: by the intent in its metadata; Anthropic: by time and
    size) and collects it, instead of uploading and paying for a second one."""
    monkeypatch.setenv(KEY_ENV, SECRET)
    env = dict(os.environ)
    with FakeBatchServer(create_delay_s=30) as server:
        path = write_manifest(tmp_path, [{**_judge(server, backend), "batch_poll_s": 0.1}], corpus=small_corpus)
        jid = babelrun.judges.judge_id(babelrun.load_manifest(path).judges[0])
        state = tmp_path / "run" / "batches" / f"{jid}.json"
        cmd = [sys.executable, "-m", "babelrun", "audit", str(path)]
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30
        while sum(server.created.values()) < 1 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        intent = msgspec.json.decode(state.read_bytes(), type=batches.Pending)
        assert intent.batch_id == "" and intent.intent
        server.create_delay_s = 0
        again = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        assert again.returncode == 0, again.stderr
    assert server.created == {backend: 1}
    assert not state.exists()
    ok = Counter(r.key for r in log.read(tmp_path / "run") if r.status == "ok")
    assert len(ok) == len(Plan.from_manifest(babelrun.load_manifest(path)).item_ids) * 2 and max(ok.values()) == 1
