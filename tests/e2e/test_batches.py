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
from babelrun.store.cache import entries as cache_entries
from babelrun.testing import choose
from helpers import ROOT, LoopbackServer, files_bytes, quiet_audit, write_manifest

SECRET = "sk-batch-test-never-log-me"
KEY_ENV = "BABELRUN_TEST_BATCH_KEY"


class FakeBatchServer(LoopbackServer):
    """OpenAI ``/v1/files`` + ``/v1/batches`` and Anthropic ``/v1/messages/batches``, in a
    background thread. A batch moves validating -> in_progress -> completed (OpenAI) or
    in_progress -> ended (Anthropic) on its ``polls_to_end``-th retrieve, unless ``hold`` is
    set; every request is answered with ``choose(user text)``."""

    def __init__(self, polls_to_end: int = 2, hold: bool = False, create_delay_s: float = 0.0, answer=choose):
        self.answer = answer  # the user text -> the reply's content
        self.lines: list[list[str]] = []  # the custom ids of each batch created, in order
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
            self.lines.append([line["custom_id"] for line in lines])
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
                                                   "content": self.answer(line["body"]["messages"][-1]["content"])},
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
            self.lines.append([r["custom_id"] for r in body["requests"]])
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
                       "content": [{"type": "text", "text": self.answer(r["params"]["messages"][-1]["content"])}],
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


# -- stopping between batches, the response cache, the batch discount ----------------

STOP_CORPUS = {"sources": [{"kind": "bundled"}], "languages": ["en", "hi"], "references_per_language": 6}
STOPPING = {"on": "verdict", "confidence": 0.95, "min_items": 10}


def _always_a_in_english(text: str) -> str:
    """A judge clearly below the deployment R in English (always slot A: |Δ| = 1) and the
    fake's order-free digest choice elsewhere (near chance: undecided for long)."""
    return "A" if not any("\u0900" <= ch <= "\u097f" for ch in text) else choose(text)


def _cells(path) -> dict[str, str]:
    """item id -> its stopping cell (its language), for the plan's plain degradation items."""
    plan = Plan.from_manifest(babelrun.load_manifest(path))
    return {item_id: cell for cell, ids in plan.stopping_cells(False).items() for item_id in ids}


@pytest.mark.parametrize("backend", ["openai", "anthropic"])
def test_stopping_applies_between_batches(tmp_path, monkeypatch, backend):
    from babelrun.engine import stopping

    monkeypatch.setenv(KEY_ENV, SECRET)
    with FakeBatchServer(answer=_always_a_in_english, polls_to_end=1) as server:
        path = write_manifest(tmp_path, [_judge(server, backend)], corpus=STOP_CORPUS, stopping=STOPPING)
        result = quiet_audit(path)
        assert result.exit_code == 0, (result.failed_calls, result.stats.judges[0].errors,
                                       [r.error for r in log.read(tmp_path / "run") if r.error][:3])
        rounds = [list(b) for b in server.lines]
        cells = _cells(path)
        report = stopping.read_report(tmp_path / "run")
        assert report is not None
        by_cell = {c.cell: c for c in report.judges[0].cells}
        print({c: (r.n, r.stopped_at, r.items, r.not_needed, r.lo, r.hi) for c, r in by_cell.items()},
              [len(b) for b in rounds])
        en, hi = by_cell["en"], by_cell["hi"]
        assert en.stopped_at == STOPPING["min_items"] and en.hi < 0.65  # decided after the first batch
        assert hi.stopped_at is None or hi.stopped_at > STOPPING["min_items"]
        assert len(rounds) >= 2

        def langs(batch: list[str]) -> Counter:
            return Counter(cells.get(cid.rsplit("-", 1)[0], "none") for cid in batch)

        first = langs(rounds[0])
        assert first["en"] == first["hi"] == 2 * STOPPING["min_items"]  # min_items items per cell, both orders
        assert all(langs(b)["en"] == 0 for b in rounds[1:])  # the decided cell: no lines after its batch
        assert all(langs(b)["none"] == 0 for b in rounds[1:])  # items in no cell go in the first batch
        assert langs(rounds[1])["hi"] == 2 * STOPPING["min_items"]  # the undecided cell: its next items
        # keys not needed: en's items past its stop, recorded, none of them sent
        submitted = {cid for b in rounds for cid in b}
        en_keys = 2 * en.items
        assert en.not_needed == en_keys - 2 * STOPPING["min_items"]
        records = list(log.read(tmp_path / "run"))
        assert len(records) == len(submitted) == result.planned_calls - en.not_needed - hi.not_needed
        # a later run without stopping judges them, and only them
        plain = write_manifest(tmp_path, [_judge(server, backend)], corpus=STOP_CORPUS)
        server.lines.clear()
        assert quiet_audit(plain).exit_code == 0
        assert sum(len(b) for b in server.lines) == en.not_needed + hi.not_needed
        assert len({r.key for r in log.read(tmp_path / "run")}) == result.planned_calls


def test_stopping_between_batches_resumes_to_the_same_decisions(tmp_path, monkeypatch):
    """The stop point depends on the log alone: a second run with the same stopping finds
    every cell where the first left it and submits nothing."""
    from babelrun.engine import stopping

    monkeypatch.setenv(KEY_ENV, SECRET)
    with FakeBatchServer(answer=_always_a_in_english, polls_to_end=1) as server:
        path = write_manifest(tmp_path, [_judge(server, "openai")], corpus=STOP_CORPUS, stopping=STOPPING)
        assert quiet_audit(path).exit_code == 0
        first = stopping.read_report(tmp_path / "run")
        created = len(server.lines)
        again = quiet_audit(path)
        assert again.exit_code == 0 and again.new_records == 0 and len(server.lines) == created
    second = stopping.read_report(tmp_path / "run")
    assert first is not None and second is not None
    key = [(c.cell, c.n, c.stopped_at, c.lo, c.hi) for c in first.judges[0].cells]
    assert key == [(c.cell, c.n, c.stopped_at, c.lo, c.hi) for c in second.judges[0].cells]


def _log_write_fails(monkeypatch) -> None:
    """Every log write raises, as a disk that fills (or a process killed) between a batch's
    results and their records would leave it."""

    def full(self, records):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(log.LogWriter, "write_batch", full)


@pytest.mark.parametrize("backend", ["openai", "anthropic"])
def test_the_cache_serves_batch_judges(tmp_path, monkeypatch, small_corpus, backend):
    monkeypatch.setenv(KEY_ENV, SECRET)
    cache = {"dir": str(tmp_path / "cache")}
    with FakeBatchServer() as server:
        # a batch whose records never reach the log caches nothing: a reply enters the cache
        # only after its record is written, never a cached reply for a key the log lacks
        (tmp_path / "lost").mkdir()
        with monkeypatch.context() as failing:
            _log_write_fails(failing)
            with pytest.raises(BaseExceptionGroup) as failed:
                quiet_audit(write_manifest(tmp_path / "lost", [_judge(server, backend)], corpus=small_corpus,
                                           cache=cache))
            assert failed.group_contains(OSError, match="No space left", depth=None)
        assert server.created == {backend: 1}  # the batch was made and its results read
        assert not list(log.read(tmp_path / "lost" / "run")) and cache_entries(cache["dir"]) == []
        first = write_manifest(tmp_path, [_judge(server, backend)], corpus=small_corpus, cache=cache)
        assert quiet_audit(first).exit_code == 0
        first_keys = {r.key for r in log.read(tmp_path / "run")}
        (tmp_path / "b").mkdir()
        wider = {**small_corpus, "languages": [*small_corpus["languages"], "es"]}  # overlaps the first
        second = write_manifest(tmp_path / "b", [_judge(server, backend)], corpus=wider, cache=cache)
        server.lines.clear()
        result = quiet_audit(second)
        assert result.exit_code == 0
        records = list(log.read(tmp_path / "b" / "run"))
        hits = [r for r in records if r.cached]
        assert {r.key for r in hits} == first_keys  # every overlapping key from the cache
        assert len(server.lines) == 1 and len(server.lines[0]) == len(records) - len(hits) > 0  # no line for a hit
        assert {r.lang for r in records if not r.cached} == {"es"}
        assert result.stats.judges[0].cached == len(hits)
        # a changed model makes every line again
        server.lines.clear()
        (tmp_path / "c").mkdir()
        other = write_manifest(tmp_path / "c", [{**_judge(server, backend), "model": "m2"}], corpus=small_corpus,
                               cache=cache)
        assert quiet_audit(other).exit_code == 0
        assert sum(len(b) for b in server.lines) == len(first_keys)
    _check_verdicts(second, [r for r in records if r.status == "ok"])


@pytest.mark.parametrize("backend", ["openai", "anthropic"])
def test_a_batch_judge_spend_applies_the_batch_discount(tmp_path, monkeypatch, small_corpus, backend):
    monkeypatch.setenv(KEY_ENV, SECRET)
    price = {"input_per_mtok": 3.0, "output_per_mtok": 15.0, "batch_discount": 0.5}
    with FakeBatchServer() as server:
        path = write_manifest(tmp_path, [{**_judge(server, backend), "price": price}], corpus=small_corpus)
        assert quiet_audit(path).exit_code == 0
    records = list(log.read(tmp_path / "run"))
    full = sum((r.tokens_in * 3.0 + r.tokens_out * 15.0) / 1e6 for r in records)  # apart from engine/ledger.py
    spend = msgspec.json.decode((tmp_path / "run" / "stats.json").read_bytes())["judges"][0]["spend"]
    assert full > 0 and spend["total"] == pytest.approx(0.5 * full, abs=1e-9)
    assert spend["calls_by_kind"] == {"batch": len(records)}
    assert spend["by_kind"]["batch"] == pytest.approx(0.5 * full, abs=1e-9)


def test_budget_cuts_batches_within_one_call_and_a_rerun_continues(tmp_path, monkeypatch, small_corpus):
    monkeypatch.setenv(KEY_ENV, SECRET)
    price = {"input_per_mtok": 3.0, "output_per_mtok": 15.0, "batch_discount": 0.5}

    def usd(r) -> float:  # apart from engine/ledger.py
        return 0.5 * (r.tokens_in * 3.0 + r.tokens_out * 15.0) / 1e6

    with FakeBatchServer(polls_to_end=1) as server:
        path = write_manifest(tmp_path, [{**_judge(server, "openai"), "price": price}], corpus=small_corpus)
        planned = Plan.from_manifest(babelrun.load_manifest(path)).calls_per_judge
        one = 0.5 * (10 * 3.0 + 15.0) / 1e6  # every line of the fake: 10 tokens in, 1 out
        budget = planned * one / 3
        first = quiet_audit(path, budget=budget)
        records = list(log.read(tmp_path / "run"))
        spent = sum(usd(r) for r in records)
        print(f"batch budget {budget:.6f}: spent {spent:.6f} in {len(server.lines)} batches "
              f"{[len(b) for b in server.lines]}; one call {one:.6f}")
        assert first.exit_code == 1 and any("budget" in s for s in first.stop_reasons)
        assert abs(spent - budget) <= one and sum(len(b) for b in server.lines) == len(records)
        again = quiet_audit(path, budget=budget)  # continues
        both = list(log.read(tmp_path / "run"))
        assert again.exit_code == 1 and len(both) > len(records)
        assert abs(sum(usd(r) for r in both) - spent - budget) <= one
        assert quiet_audit(path).exit_code == 0  # without a budget: the rest
    ok = Counter(r.key for r in log.read(tmp_path / "run"))
    assert len(ok) == planned and max(ok.values()) == 1
