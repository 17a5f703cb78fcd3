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

With ``stopping:`` (engine/stopping.py) the keys go in *rounds*, one batch after another:
each round takes every undecided cell's next ``min_items`` items in its seeded order (and,
in the first, every item in no cell); its records are fed to the judge's ``Stopper``, and a
cell decided after round k gets no lines in round k + 1. The keys of stopped cells are
counted as not needed, as on the call path. With the response cache (``cache:``) a key
whose request is cached makes no batch line: its record is the cached reply
(``cached: true``), and each batch result is cached as a call's is: only once its record is
in the log (``records.CacheAfterLog``), never before. With
``audit --budget`` a batch takes only the keys whose expected cost fits in what the judge's
budget has left (``_within_budget``); the rest wait for a later batch, priced on the
results of this one, and the judge stops when not one more fits.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import TypeVar

import anyio
import msgspec
from anyio.streams.memory import MemoryObjectSendStream as ObjectSendStream

from ..core.keys import order_bit
from ..core.records import Record
from ..judges import FatalJudgeError, JudgeReply, JudgeRequest, RejectedError, RetryableError
from ..judges.batch_api import BatchApi, BatchResult, BatchStopped
from ..judges.http import HttpJudge
from ..judges.options import BatchApiOptions
from ..judges.protocol import max_tokens
from ..judges.registry import options_of
from ..plan import Plan
from ..store.cache import ResponseCache
from ..store.done import DoneSet
from ..store.files import safe_dir, write_atomic
from . import limits
from . import records as build
from .state import Cancellable, JudgeState
from .stopping import Stopper

_T = TypeVar("_T")
# Holds a fresh reply for the cache until its record is written: ``CacheAfterLog.hold``.
_Keep = Callable[[JudgeRequest, JudgeReply, Record], Record]


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


def custom_id(item_id: str, order: str, sample: int = 0) -> str:
    """A key's id in a provider batch: the item and the order's letter, then ``-s<n>`` for a
    sample after the first (sample 0 keeps the id a judge asked once always had)."""
    base = f"{item_id}-{'p' if order_bit(order) else 'r'}"
    return base if sample == 0 else f"{base}-s{sample}"


def state_path(run_dir: Path, judge_id: str) -> Path:
    return run_dir / "batches" / f"{judge_id}.json"


def _load(path: Path) -> Pending | None:
    try:
        return msgspec.json.decode(path.read_bytes(), type=Pending)
    except FileNotFoundError:
        return None


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
    protocol = judge.protocol
    return {custom_id(item.item_id, key, sample): protocol.request(item, key, sample)
            for item, key, sample in plan.pending(judge.judge_id, protocol.keys, done, samples=judge.spec.samples)}


def _records(judge: HttpJudge, pending: Pending, results: list[BatchResult], requests: dict[str, JudgeRequest],
             outcome: str, keep: _Keep | None = None) -> list[Record]:
    """One record per submitted key still undone; a key without a result is a batch error.
    With ``keep`` (the cache on), each reply read waits there to be cached once its record is
    written: a process killed before that leaves no cached reply for a key the log lacks."""
    by_id = {cid: (payload, error) for cid, payload, error in results}
    out: list[Record] = []
    for cid in pending.custom_ids:
        request = requests.get(cid)
        if request is None:  # done meanwhile (its records were written before a crash)
            continue
        payload, error = by_id.get(cid, (None, f"no result (batch {outcome})"))
        if payload is not None:
            try:
                reply = judge.reply(payload)
                ok = msgspec.structs.replace(build.ok_record(judge, request, reply, 1, 0.0),
                                             latency_ms=None)  # no per-call latency
                out.append(ok if keep is None else keep(request, reply, ok))
                continue
            except (RetryableError, RejectedError) as e:
                error = str(e)
        out.append(build.error_record(judge, request,
                                  error_kind="batch_error", error=f"batch {pending.batch_id}: {error}"))
    return out


def _feed(stopper: Stopper | None, record: Record) -> None:
    if stopper is not None and record.sample == 0:  # stopping decides on first asks
        stopper.feed(record.item_id, record.order, record.status == "ok", record.verdict,
                     record.ref_len, record.pert_len)


async def _collect(api: BatchApi, judge: HttpJudge, state: JudgeState, pending: Pending,
                   requests: dict[str, JudgeRequest], records: ObjectSendStream[Record], path: Path,
                   stopper: Stopper | None = None, keep: _Keep | None = None) -> None:
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
        await anyio.sleep(options_of(judge.spec, BatchApiOptions).batch_poll_s)
    results = await _retrying(judge, state, lambda: api.results(batch))
    outcome = batch.get("status") or batch.get("processing_status") or "ended"
    with anyio.CancelScope(shield=True):  # all the records, then the state file goes
        for record in _records(judge, pending, results, requests, outcome, keep):
            await records.send(record)
            state.count(record)
            _feed(stopper, record)
        path.unlink(missing_ok=True)


async def _submit(api: BatchApi, judge: HttpJudge, state: JudgeState, path: Path,
                  todo: list[tuple[str, JudgeRequest]]) -> Pending:
    """Create one batch of ``todo``, written down first (see ``Pending``)."""
    with anyio.CancelScope(shield=True):  # a created batch is always written down
        intent = Pending(api.provider, "", [cid for cid, _ in todo], round(time.time(), 3), secrets.token_hex(8))
        safe_dir(path.parent.parent, path.parent.name)  # batches/: a link refused
        write_atomic(path, msgspec.json.encode(intent), fsync=True)  # before the create: see Pending
        tries = 0

        async def find_or_submit() -> str:
            nonlocal tries
            tries += 1  # a retried create may have succeeded unseen (a timeout): look first
            found = await api.find(intent) if tries > 1 else None
            return found or await api.submit(todo, intent.intent)

        created = msgspec.structs.replace(intent, batch_id=await _retrying(judge, state, find_or_submit))
        write_atomic(path, msgspec.json.encode(created), fsync=True)
    return created


def _within_budget(judge: HttpJudge, state: JudgeState, todo: list[tuple[str, JudgeRequest]],
                   budget_usd: float) -> tuple[list[tuple[str, JudgeRequest]], list[tuple[str, JudgeRequest]]]:
    """``--budget`` for a batch: the first keys of ``todo`` whose expected cost (``Ledger.expected``:
    the mean so far, or before any reply the request's size at the price with ``max_tokens``
    out) fits in what is left, and the rest. The keys left over go in a later batch, once the
    costs of this one are known; none fits: the judge stops (its first key always goes, as the
    first call does: what calls cost is learnt from it)."""
    ledger = state.ledger
    assert ledger is not None
    left = budget_usd - ledger.total
    out = max_tokens(judge.spec)
    n = 0
    for _, request in todo:
        expected = ledger.expected(request.messages, out)
        if expected > left and (n or ledger.priced):
            break
        left -= expected
        n += 1
    return todo[:n], todo[n:]


def _round(requests: dict[str, JudgeRequest], submitted: set[str], stopper: Stopper | None,
           size: int) -> list[tuple[str, JudgeRequest]]:
    """The keys of the next batch: every one left, or with stopping the round's (``batch_round``)."""
    left = [(cid, r) for cid, r in requests.items() if cid not in submitted]
    if stopper is None:
        return left
    chosen = stopper.batch_round((r.item.item_id for _, r in left), size)
    return [(cid, r) for cid, r in left if r.item.item_id in chosen]


async def _run(api: BatchApi, judge: HttpJudge, state: JudgeState, plan: Plan, done: DoneSet,
               records: ObjectSendStream[Record], run_dir: Path, stopper: Stopper | None = None,
               cache: ResponseCache | None = None, round_items: int = 0, budget_usd: float | None = None,
               cache_after: build.CacheAfterLog | None = None) -> None:
    path = state_path(run_dir, judge.judge_id)
    keep = None if cache is None or cache_after is None else partial(cache_after.hold, cache, judge)
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
            raise BatchStopped(f"{path} holds a {pending.provider} batch, but the judge is {api.provider}")
        submitted = set(pending.custom_ids)
        await _collect(api, judge, state, pending, requests, records, path, stopper, keep)
    while todo := _round(requests, submitted, stopper, round_items):
        submitted.update(cid for cid, _ in todo)
        if cache is not None:  # a cached request makes no line
            misses = []
            for cid, request in todo:
                hit = build.from_cache(cache, judge, request)
                if hit is None:
                    misses.append((cid, request))
                    continue
                state.cached += 1
                await records.send(hit)
                state.count(hit)
                _feed(stopper, hit)
            todo = misses
        if todo and budget_usd is not None:
            todo, over = _within_budget(judge, state, todo, budget_usd)
            submitted.difference_update(cid for cid, _ in over)  # for a later round, if the budget allows
            if not todo:
                ledger = state.ledger
                assert ledger is not None
                state.stopped = (f"judge {state.name!r} stopped at its budget: {ledger.total:.4f} "
                                 f"of {budget_usd:g} {ledger.price.currency} spent")
                break
        if todo:
            created = await _submit(api, judge, state, path, todo)
            await _collect(api, judge, state, created, requests, records, path, stopper, keep)
    if stopper is not None:  # the keys of stopped cells: not needed
        for cid, request in requests.items():
            if cid not in submitted and not stopper.needed(request.item.item_id):
                stopper.skip(request.item.item_id)


async def run_judge(judge: HttpJudge, state: JudgeState, plan: Plan, done: DoneSet, records: ObjectSendStream[Record],
                    run_dir: Path, feeds: list[Cancellable], stopper: Stopper | None = None,
                    cache: ResponseCache | None = None, round_items: int = 0,
                    budget_usd: float | None = None, cache_after: build.CacheAfterLog | None = None) -> None:
    """A ``batch: true`` judge's share of the run, in place of ``JudgeRunner.run``. The first
    Ctrl-C stops the polling (the batch stays pending; the next audit resumes it). With a
    ``stopper``, batches of ``round_items`` items per undecided cell, one after another;
    with ``budget_usd`` (and a price), batches cut to what the budget has left; with ``cache``,
    replies cached through ``cache_after`` (the log writer's), each once its record is written."""
    api = judge.batch_api(judge, on_request=state.add_call)  # the backend's declared adapter
    scope = anyio.CancelScope()
    feeds.append(scope)  # a drain cancels it (pipeline: every judge's feed of calls)
    try:
        async with records:
            with scope:
                await _run(api, judge, state, plan, done, records, run_dir, stopper, cache, round_items, budget_usd,
                           cache_after)
    except (FatalJudgeError, RejectedError, RetryableError, BatchStopped) as e:
        state.stopped = f"judge {state.name!r} stopped: {e}"
        state.errors[getattr(e, "kind", "batch")] += 1
    finally:
        state.ended = time.monotonic()
        with anyio.CancelScope(shield=True):
            await judge.aclose()
