"""Provider batch APIs: a judge with ``batch: true`` sends its pending keys as one batch.

Instead of one call per key, the judge's undone keys go to the provider as ONE batch
(OpenAI Batch API: a JSONL file of chat-completion requests; Anthropic Message Batches), which
is polled every ``batch_poll_s`` seconds until it ends; its results become the same log
records normal calls give (one per key: ``ok`` through the backend's own ``reply``, or
``error`` with ``error_kind`` ``batch_error``).

Right after the batch is created, ``RUN_DIR/batches/<judge_id>.json`` records the provider,
the batch id and the custom ids submitted (written atomically). An audit that finds that file
resumes polling the batch instead of submitting again; the file is deleted once the batch's
records are handed to the log writer. Keys already done are never submitted, and the keys of
a pending batch are not submitted again. Requests go through the judge's own aiohttp session,
so the key travels in its headers only.

A custom id is ``<item_id>-r`` (reference first) or ``<item_id>-p`` (perturbed first):
Anthropic allows only ``[A-Za-z0-9_-]{1,64}``.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import anyio
import msgspec
from anyio.streams.memory import MemoryObjectSendStream as ObjectSendStream

from ..core.keys import order_bit
from ..core.records import Record
from ..judges import FatalJudgeError, JudgeRequest, RejectedError, RetryableError
from ..judges.http import MAX_REPLY_BYTES, HttpJudge, error_message, json_or_none
from ..judges.protocol import judging
from ..plan import Plan
from ..store.done import DoneSet
from ..store.files import write_atomic
from . import limits
from . import records as build
from .state import JudgeState

OPENAI_TERMINAL = ("completed", "failed", "expired", "cancelled")
INTENT_KEY = "babelrun_intent"  # OpenAI batch metadata naming the submission (Pending.intent)
MAX_RESULTS_BYTES = 1 << 30  # a results file: 1 GiB (50,000 results of ~20 KB)

_T = TypeVar("_T")


class Pending(msgspec.Struct):
    """A submitted batch not yet collected (``RUN_DIR/batches/<judge_id>.json``). Written
    first with an empty ``batch_id`` and a fresh ``intent`` BEFORE the create call, then with
    the id: a process killed while the create was in flight leaves the intent, and the next
    audit looks the batch up by it (``find``) instead of creating (and paying for) another."""

    provider: str
    batch_id: str
    custom_ids: list[str]
    created: float = 0.0
    intent: str = ""


def custom_id(item_id: str, order: str) -> str:
    return f"{item_id}-{'p' if order_bit(order) else 'r'}"


def state_path(run_dir: Path, judge_id: str) -> Path:
    return run_dir / "batches" / f"{judge_id}.json"


def _load(path: Path) -> Pending | None:
    try:
        return msgspec.json.decode(path.read_bytes(), type=Pending)
    except FileNotFoundError:
        return None


# One result of a batch: (custom_id, reply body as JSON bytes or None, error message or None).
Result = tuple[str, bytes | None, str | None]


def _jsonl(payload: bytes) -> list[dict[str, Any]]:
    """A results file's lines; a line that is not a JSON object is left out (its key then
    has no result, which is recorded as a batch error and retried on resume)."""
    docs = (json_or_none(line) for line in payload.splitlines() if line.strip())
    return [d for d in docs if isinstance(d, dict) and isinstance(d.get("custom_id"), str)]


def _message(judge: HttpJudge, error: object) -> str:
    """The innermost ``message`` of a provider's (possibly nested) error object, masked."""
    return judge.mask(error_message(error) or str(error))


def _timestamp(text: object) -> float | None:
    """An RFC 3339 timestamp as POSIX seconds; None if absent or unreadable."""
    try:
        when = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


def _id(doc: dict[str, Any], what: str) -> str:
    if not isinstance(doc.get("id"), str):
        raise RetryableError("bad_response", f"no id in the reply to {what}")
    found: str = doc["id"]
    return found


class _Api:
    """The HTTP side shared by both providers: the judge's own session and its one mapping
    of statuses to errors (``HttpJudge.call``), so the key travels in its headers only and
    provider text is masked the same way as in calls."""

    provider = ""

    def __init__(self, judge: HttpJudge, state: JudgeState) -> None:
        self.judge = judge
        self.state = state

    async def request(self, method: str, url: str, cap: int = MAX_REPLY_BYTES, **kwargs: Any) -> bytes:
        self.state.calls += 1
        return await self.judge.call(method, url, cap=cap, **kwargs)

    async def json(self, method: str, url: str, body: object = None) -> dict[str, Any]:
        data = None if body is None else msgspec.json.encode(body)
        doc = json_or_none(await self.request(method, url, data=data))
        if not isinstance(doc, dict):
            raise RetryableError("bad_response", f"malformed response body from {method} {url}")
        return doc

    # each provider: submit -> batch id; poll -> (ended, batch object); results -> list[Result];
    # find -> the id of a batch an interrupted create made, if any

    async def submit(self, todo: list[tuple[str, JudgeRequest]], intent: str) -> str:
        raise NotImplementedError

    async def poll(self, batch_id: str) -> tuple[bool, dict[str, Any]]:
        raise NotImplementedError

    async def results(self, batch: dict[str, Any]) -> list[Result]:
        raise NotImplementedError

    async def find(self, pending: Pending) -> str | None:
        raise NotImplementedError


class _OpenAI(_Api):
    provider = "openai"

    def __init__(self, judge: HttpJudge, state: JudgeState) -> None:
        super().__init__(judge, state)
        self.base = judge.url.removesuffix("/chat/completions")

    async def find(self, pending: Pending) -> str | None:
        """The batch created with ``pending.intent`` in its metadata, if the provider has it."""
        listing = await self.json("GET", f"{self.base}/batches?limit=100")
        for batch in listing.get("data") or []:
            if isinstance(batch, dict) and (batch.get("metadata") or {}).get(INTENT_KEY) == pending.intent:
                return _id(batch, "GET /batches")
        return None

    async def submit(self, requests: list[tuple[str, JudgeRequest]], intent: str) -> str:
        lines = bytearray()
        for cid, request in requests:
            lines += msgspec.json.encode({"custom_id": cid, "method": "POST", "url": "/v1/chat/completions",
                                          "body": msgspec.Raw(self.judge.body(request))})
            lines += b"\n"
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
        return _id(batch, f"POST {self.base}/batches")

    async def poll(self, batch_id: str) -> tuple[bool, dict[str, Any]]:
        batch = await self.json("GET", f"{self.base}/batches/{batch_id}")
        return batch.get("status") in OPENAI_TERMINAL, batch

    async def results(self, batch: dict[str, Any]) -> list[Result]:
        out: list[Result] = []
        for key in ("output_file_id", "error_file_id"):
            if not batch.get(key):
                continue
            content = await self.request("GET", f"{self.base}/files/{batch[key]}/content", cap=MAX_RESULTS_BYTES)
            for line in _jsonl(content):
                response = line.get("response") or {}
                if line.get("error") is None and response.get("status_code") == 200:
                    out.append((line["custom_id"], msgspec.json.encode(response.get("body")), None))
                else:
                    error = line.get("error") or response.get("body") or "no response"
                    said = f"HTTP {response['status_code']}: " if response.get("status_code") else ""
                    out.append((line["custom_id"], None, said + _message(self.judge, error)))
        return out


class _Anthropic(_Api):
    provider = "anthropic"

    def __init__(self, judge: HttpJudge, state: JudgeState) -> None:
        super().__init__(judge, state)
        self.base = judge.url.removesuffix("/v1/messages")

    async def find(self, pending: Pending) -> str | None:
        """Message Batches carry no metadata: the batch created within two minutes of the
        intent with as many requests. Several such batches: stop and say so (never guess)."""
        listing = await self.json("GET", f"{self.base}/v1/messages/batches?limit=100")
        found = []
        for batch in listing.get("data") or []:
            counts = batch.get("request_counts") if isinstance(batch, dict) else None
            when = _timestamp(batch.get("created_at")) if isinstance(batch, dict) else None
            if (isinstance(counts, dict) and when is not None and abs(when - pending.created) <= 120
                    and sum(v for v in counts.values() if isinstance(v, int)) == len(pending.custom_ids)):
                found.append(_id(batch, "GET /v1/messages/batches"))
        if len(found) > 1:
            raise _Stopped(f"a batch submission was interrupted, and {len(found)} batches ({', '.join(found)}) "
                           "may be it; cancel the extra ones in the console, then delete "
                           f"batches/<judge_id>.json to submit again")
        return found[0] if found else None

    async def submit(self, requests: list[tuple[str, JudgeRequest]], intent: str) -> str:
        body = {"requests": [{"custom_id": cid, "params": msgspec.Raw(self.judge.body(r))} for cid, r in requests]}
        return _id(await self.json("POST", f"{self.base}/v1/messages/batches", body), "POST /v1/messages/batches")

    async def poll(self, batch_id: str) -> tuple[bool, dict[str, Any]]:
        batch = await self.json("GET", f"{self.base}/v1/messages/batches/{batch_id}")
        return batch.get("processing_status") == "ended", batch

    async def results(self, batch: dict[str, Any]) -> list[Result]:
        url = batch.get("results_url")
        if not url:
            return []
        out: list[Result] = []
        for line in _jsonl(await self.request("GET", url, cap=MAX_RESULTS_BYTES)):
            result = line.get("result") or {}
            if result.get("type") == "succeeded":
                out.append((line["custom_id"], msgspec.json.encode(result.get("message")), None))
            else:
                detail = f": {_message(self.judge, result['error'])}" if result.get("error") else ""
                out.append((line["custom_id"], None, f"{result.get('type', 'no result')}{detail}"))
        return out


class _Stopped(Exception):
    pass


async def _retrying(judge: HttpJudge, state: JudgeState, op: Callable[[], Awaitable[_T]]) -> _T:
    """``op()`` under the engine's retry policy (``limits.retrying``): the judge's retries on
    retryable errors, the same backoff and Retry-After as calls."""

    def retried(e: RetryableError) -> None:
        state.retries += 1
        if e.kind == "rate_limited":
            state.rate_limited += 1

    return await limits.retrying(op, judge.spec.retries, retried)


def _requests(judge: HttpJudge, plan: Plan, done: DoneSet) -> dict[str, JudgeRequest]:
    """The judge's undone keys, by custom id, in plan order."""
    how = judging(judge.spec, judge.judge_id)
    out: dict[str, JudgeRequest] = {}
    for item in plan.items():
        for order in how.keys:
            if not done.contains(judge.judge_id, item.item_id, order):
                out[custom_id(item.item_id, order)] = how.request(item, order)
    return out


def _count(state: JudgeState, record: Record) -> None:
    if record.status == "ok":
        state.ok += 1
        state.tokens_in += record.tokens_in or 0
        state.tokens_out += record.tokens_out or 0
    else:
        state.failed += 1
        state.errors[record.error_kind or "error"] += 1


def _records(judge: HttpJudge, pending: Pending, results: list[Result], requests: dict[str, JudgeRequest],
             outcome: str) -> list[Record]:
    """One record per submitted key still undone; a key without a result is a batch error."""
    by_id = {cid: (payload, error) for cid, payload, error in results}
    out: list[Record] = []
    for cid in pending.custom_ids:
        request = requests.get(cid)
        if request is None:  # done meanwhile (its records were written before a crash)
            continue
        payload, error = by_id.get(cid, (None, f"no result (batch {outcome})"))
        if payload is not None:
            try:
                ok = build.ok_record(judge, request, judge.reply(payload), 1, 0.0)
                out.append(msgspec.structs.replace(ok, latency_ms=None))  # no per-call latency
                continue
            except (RetryableError, RejectedError) as e:
                error = str(e)
        out.append(build.record(judge, request.item, request.order, status="error",
                                  error_kind="batch_error", error=f"batch {pending.batch_id}: {error}"))
    return out


async def _collect(api: _Api, judge: HttpJudge, state: JudgeState, pending: Pending,
                   requests: dict[str, JudgeRequest], records: ObjectSendStream[Record], path: Path) -> None:
    """Poll ``pending`` until it ends, hand its records to the writer, forget the batch."""
    failures = 0
    while True:
        try:
            ended, batch = await api.poll(pending.batch_id)
            failures = 0
        except RetryableError as e:  # a poll is free to repeat: try again next time
            failures += 1
            state.errors[f"poll_{e.kind}"] += 1
            if failures >= judge.spec.max_consecutive_failures:
                raise
            ended, batch = False, {}
        if ended:
            break
        await anyio.sleep(judge.spec.batch_poll_s)
    results = await _retrying(judge, state, lambda: api.results(batch))
    outcome = batch.get("status") or batch.get("processing_status") or "ended"
    with anyio.CancelScope(shield=True):  # all the records, then the state file goes
        for record in _records(judge, pending, results, requests, outcome):
            await records.send(record)
            _count(state, record)
        path.unlink(missing_ok=True)


async def _run(api: _Api, judge: HttpJudge, state: JudgeState, plan: Plan, done: DoneSet,
               records: ObjectSendStream[Record], run_dir: Path) -> None:
    path = state_path(run_dir, judge.judge_id)
    requests = _requests(judge, plan, done)
    submitted: set[str] = set()
    pending = _load(path)
    if pending is not None and not pending.batch_id:  # killed while its create was in flight
        interrupted: Pending = pending  # the narrowed type, for the lambda (pending is reassigned below)
        found = await _retrying(judge, state, lambda: api.find(interrupted))
        if found is None:  # never created: submit afresh
            path.unlink()
            pending = None
        else:
            pending = msgspec.structs.replace(pending, batch_id=found)
            write_atomic(path, msgspec.json.encode(pending), fsync=True)
    if pending is not None:
        if pending.provider != api.provider:
            raise _Stopped(f"{path} holds a {pending.provider} batch, but the judge is {api.provider}")
        submitted = set(pending.custom_ids)
        await _collect(api, judge, state, pending, requests, records, path)
    todo = [(cid, r) for cid, r in requests.items() if cid not in submitted]
    if not todo:
        return
    with anyio.CancelScope(shield=True):  # a created batch is always written down
        intent = Pending(api.provider, "", [cid for cid, _ in todo], round(time.time(), 3), secrets.token_hex(8))
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, msgspec.json.encode(intent), fsync=True)  # before the create: see Pending
        tries = 0

        async def find_or_submit() -> str:
            nonlocal tries
            tries += 1  # a retried create may have succeeded unseen (a timeout): look first
            found = await api.find(intent) if tries > 1 else None
            return found or await api.submit(todo, intent.intent)

        created = msgspec.structs.replace(intent, batch_id=await _retrying(judge, state, find_or_submit))
        write_atomic(path, msgspec.json.encode(created), fsync=True)
    await _collect(api, judge, state, created, requests, records, path)


async def run_judge(judge: HttpJudge, state: JudgeState, plan: Plan, done: DoneSet, records: ObjectSendStream[Record],
                    run_dir: Path, producers: list[anyio.CancelScope]) -> None:
    """A ``batch: true`` judge's share of the run, in place of ``JudgeRunner.run``. The first
    Ctrl-C stops the polling (the batch stays pending; the next audit resumes it)."""
    api = (_OpenAI if judge.spec.backend == "openai" else _Anthropic)(judge, state)
    scope = anyio.CancelScope()
    producers.append(scope)
    try:
        async with records:
            with scope:
                await _run(api, judge, state, plan, done, records, run_dir)
    except (FatalJudgeError, RejectedError, RetryableError, _Stopped) as e:
        state.stopped = f"judge {state.name!r} stopped: {e}"
        state.errors[getattr(e, "kind", "batch")] += 1
    finally:
        state.ended = time.monotonic()
        with anyio.CancelScope(shield=True):
            await judge.aclose()
