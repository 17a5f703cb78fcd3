"""Log records built from a judge's replies: the same for calls and for provider batches.

What a reply says about itself is bounded here, where it enters the log: token counts through
``core.bounds.count`` (whole, clamped to ``MAX_COUNT``, otherwise unknown), the served model
and fingerprint as text, probabilities as finite numbers. A verdict pattern that runs past its
time (``judges.safe_regex``) reads ``invalid`` with ``error_kind: pattern_timeout``: the reply
is kept, the key is done (judging it again would time out again)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any, cast

import msgspec

from ..core import bounds
from ..core.items import Item
from ..core.records import Record, Slot, Verdict, verdict_of
from ..judges import Judge, JudgeReply, JudgeRequest
from ..judges.protocol import max_tokens
from ..judges.safe_regex import PatternTimeout
from ..store.cache import CachedReply, ResponseCache, request_key


def record(judge: Judge, item: Item, order: str, sample: int = 0, seed: int | None = None, **fields: Any) -> Record:
    return Record(
        judge_id=judge.judge_id, item_id=item.item_id, order=order, judge=judge.spec.name,
        kind=item.kind, lang=item.lang, ref_id=item.ref_id, perturbation=item.perturbation,
        severity=item.severity,
        ref_len=item.ref_len, pert_len=item.pert_len, ts=round(time.time(), 3), cue=item.cue or None,
        sample=sample, seed=seed, temperature=judge.spec.temperature or None, **fields,
    )


def error_record(judge: Judge, request: JudgeRequest, **fields: Any) -> Record:
    """A request's ``error`` record (its key, sample included)."""
    return record(judge, request.item, request.order, request.sample, request.seed, status="error", **fields)


def ok_record(judge: Judge, request: JudgeRequest, reply: JudgeReply, attempts: int, latency: float) -> Record:
    try:
        slot, score = judge.protocol.read(reply)
    except PatternTimeout as e:
        return timeout_record(judge, request, e, attempts, latency, reply)
    if judge.protocol.kind == "pointwise":
        verdict = "invalid" if score is None else None
    else:
        assert slot is not None  # a pairwise reading always names a slot (Judging.read)
        verdict = verdict_of(slot, request.order)
    p_a = p_b = p_tie = None
    if judge.protocol.soft and reply.probs is not None:
        p_a, p_b, p_tie = (round(p, 6) for p in reply.probs)
    # Every field named here, not merged from ``record`` and ``_told``: built once per call,
    # the merged keyword dictionaries were half of this function's time. What it takes from
    # the item is what ``record`` takes (tests/unit/test_hot_path.py holds the two together).
    item, count = request.item, bounds.count
    return Record(
        judge_id=judge.judge_id, item_id=item.item_id, order=request.order, judge=judge.spec.name,
        kind=item.kind, lang=item.lang, ref_id=item.ref_id, perturbation=item.perturbation,
        severity=item.severity, ref_len=item.ref_len, pert_len=item.pert_len, ts=round(time.time(), 3),
        cue=item.cue or None, status="ok", verdict=cast("Verdict | None", verdict), slot=cast("Slot | None", slot),
        score=score, p_a=p_a, p_b=p_b, p_tie=p_tie, raw=reply.raw,
        latency_ms=round(latency * 1000, 2), attempts=attempts, tokens_in=count(reply.tokens_in),
        tokens_out=count(reply.tokens_out), served_model=_text(reply.served_model),
        fingerprint=_text(reply.fingerprint), tokens_cached=count(reply.tokens_cached),
        truncated=reply.truncated is True, tokens_cache_write=count(reply.tokens_cache_write),
        sample=request.sample, seed=request.seed, temperature=judge.spec.temperature or None,
    )


def timeout_record(judge: Judge, request: JudgeRequest, error: PatternTimeout, attempts: int, latency: float,
                   reply: JudgeReply | None = None) -> Record:
    """A reply (or a rule's pair) whose pattern ran past its time: read ``invalid``."""
    pairwise = judge.protocol.kind != "pointwise"
    told = _told(reply) if reply is not None else {}
    return record(
        judge, request.item, request.order, request.sample, request.seed, status="ok", verdict="invalid",
        slot="invalid" if pairwise else None,
        raw=None if reply is None else reply.raw, latency_ms=round(latency * 1000, 2), attempts=attempts,
        error_kind="pattern_timeout", error=str(error), **told,
    )


def _told(reply: JudgeReply) -> dict[str, Any]:
    """What a reply says of itself, bounded: counts whole and clamped, names as text."""
    return {"tokens_in": bounds.count(reply.tokens_in), "tokens_out": bounds.count(reply.tokens_out),
            "served_model": _text(reply.served_model), "fingerprint": _text(reply.fingerprint),
            "tokens_cached": bounds.count(reply.tokens_cached), "truncated": reply.truncated is True,
            "tokens_cache_write": bounds.count(reply.tokens_cache_write)}


def _text(value: object) -> str | None:
    if value is None or isinstance(value, str) and len(value) <= 200:
        return value
    return str(value)[:200]


# The response cache (``cache:``, store/cache.py), for calls and provider batches alike.

def cache_key(judge: Judge, request: JudgeRequest) -> str:
    """The request's cache key: the judge, the messages, the order and the sampling, and for
    a sample after the first its index and seed, so that a cached reply never stands for
    another sample of the presentation (sample 0 keys as a judge asked once always did)."""
    spec = judge.spec
    sampling: tuple[Any, ...] = (spec.temperature, max_tokens(spec))
    if request.sample or request.seed is not None:
        sampling += (request.sample, request.seed)
    return request_key(judge.judge_id, request.messages, request.order, sampling)


def from_cache(cache: ResponseCache, judge: Judge, request: JudgeRequest) -> Record | None:
    """The key's record from the cache (``cached: true``, no latency), or None on a miss. The
    stored reply is read by the judge's own rule (``ok_record``), as a provider's reply is:
    an entry holds no verdict to believe."""
    hit = cache.get(judge.judge_id, cache_key(judge, request))
    if hit is None:
        return None
    reply = JudgeReply(hit.raw, hit.served_model, hit.fingerprint, hit.tokens_in, hit.tokens_out, hit.probs,
                       tokens_cached=hit.tokens_cached, truncated=hit.truncated,
                       tokens_cache_write=hit.tokens_cache_write)
    out = ok_record(judge, request, reply, 1, 0.0)
    return msgspec.structs.replace(out, latency_ms=None, cached=True)


def to_cache(cache: ResponseCache, judge: Judge, request: JudgeRequest, reply: JudgeReply,
             prune_now: bool = True) -> None:
    """Cache the reply, unless a code judge named its verdict itself (a slot or a score): the
    cache keeps replies, which the judge's rule reads on every hit, never verdicts.
    ``prune_now`` False: a prune that falls due is left to the caller (``ResponseCache.put``)."""
    if reply.slot is not None or reply.score is not None:
        return
    cache.put(judge.judge_id, cache_key(judge, request), prune_now=prune_now, reply=CachedReply(
        reply.raw, reply.served_model, reply.fingerprint, reply.tokens_in, reply.tokens_out, reply.probs,
        reply.tokens_cached, reply.tokens_cache_write, reply.truncated is True))


class CacheAfterLog:
    """The replies waiting to enter the response cache, each until its record is in the log
    (the writer calls ``written`` after each write): a process killed in between leaves
    neither, so a resume pays that call again and logs it, and the ledger rebuilt from the log
    prices it as an uninterrupted run did. Never a cached reply for a key the log lacks (no
    free hit for a call whose record was lost). Shared by the call path and provider batches."""

    def __init__(self) -> None:
        self._waiting: dict[tuple[str, str, str] | tuple[str, str, str, int],
                            tuple[ResponseCache, Judge, JudgeRequest, JudgeReply]] = {}

    def __len__(self) -> int:
        return len(self._waiting)

    def hold(self, cache: ResponseCache, judge: Judge, request: JudgeRequest, reply: JudgeReply,
             made: Record) -> Record:
        """Keep ``made``'s reply until its record is written; returns the record."""
        self._waiting[made.key] = (cache, judge, request, reply)
        return made

    def written(self, records: Iterable[Record]) -> list[ResponseCache]:
        """``records`` are in the log now: their replies go to the cache. Returns the caches
        whose prune fell due (``ResponseCache.put``), for the writer to run off the loop."""
        due: dict[int, ResponseCache] = {}
        for r in records:
            if (got := self._waiting.pop(r.key, None)) is not None:
                to_cache(*got, prune_now=False)
                if got[0].prune_due:
                    due[id(got[0])] = got[0]
        return list(due.values())
