"""Log records built from a judge's replies: the same for calls and for provider batches."""

from __future__ import annotations

import time
from typing import Any

from ..core.items import Item
from ..core.records import Record, verdict_of
from ..judges import Judge, JudgeReply, JudgeRequest


def record(judge: Judge, item: Item, order: str, **fields: Any) -> Record:
    return Record(
        judge_id=judge.judge_id, item_id=item.item_id, order=order, judge=judge.spec.name,
        kind=item.kind, lang=item.lang, ref_id=item.ref_id, perturbation=item.perturbation,
        severity=item.severity,
        ref_len=item.ref_len, pert_len=item.pert_len, ts=round(time.time(), 3), **fields,
    )


def ok_record(judge: Judge, request: JudgeRequest, reply: JudgeReply, attempts: int, latency: float) -> Record:
    slot, score = judge.protocol.read(reply)
    if judge.protocol.kind == "pointwise":
        verdict = "invalid" if score is None else None
    else:
        assert slot is not None  # a pairwise reading always names a slot (Judging.read)
        verdict = verdict_of(slot, request.order)
    probs = _NO_PROBS
    if judge.protocol.soft and reply.probs is not None:
        probs = dict(zip(("p_a", "p_b", "p_tie"), (round(p, 6) for p in reply.probs), strict=True))
    return record(
        judge, request.item, request.order, status="ok", verdict=verdict, slot=slot, score=score,
        raw=reply.raw, latency_ms=round(latency * 1000, 2), attempts=attempts,
        tokens_in=reply.tokens_in, tokens_out=reply.tokens_out,
        served_model=reply.served_model, fingerprint=reply.fingerprint, tokens_cached=reply.tokens_cached, **probs,
    )


_NO_PROBS: dict[str, float] = {}
