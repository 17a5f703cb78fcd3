"""Log records built from a judge's replies: the same for calls and for provider batches."""

from __future__ import annotations

import time
from typing import Any

from ..core.items import Item
from ..core.records import Record, verdict_of
from ..judges import Judge, JudgeReply, JudgeRequest
from ..judges.protocol import Judging, judging


def record(judge: Judge, item: Item, order: str, **fields: Any) -> Record:
    return Record(
        judge_id=judge.judge_id, item_id=item.item_id, order=order, judge=judge.spec.name,
        kind=item.kind, lang=item.lang, ref_id=item.ref_id, perturbation=item.perturbation,
        severity=item.severity,
        ref_len=item.ref_len, pert_len=item.pert_len, ts=round(time.time(), 3), **fields,
    )


def ok_record(judge: Judge, request: JudgeRequest, reply: JudgeReply, attempts: int, latency: float) -> Record:
    how = judging(judge.spec, judge.judge_id)
    probs = _NO_PROBS
    score = None
    if how.read_score is not None:  # pointwise: a score, or invalid
        score = _score(reply, how)
        slot, verdict = None, "invalid" if score is None else None
    else:
        if judge.spec.soft:  # the verdict is the argmax of the soft verdict, never the text
            slot = "invalid" if reply.probs is None else ("A", "B", "tie")[max(range(3), key=reply.probs.__getitem__)]
            if reply.probs is not None:
                probs = dict(zip(("p_a", "p_b", "p_tie"), (round(p, 6) for p in reply.probs), strict=True))
        elif reply.slot is not None:  # a judge that is code named the slot itself
            slot = reply.slot
        else:
            assert how.read_slot is not None  # a pairwise judge always has a slot reader
            slot = how.read_slot(reply.raw)
        verdict = verdict_of(slot, request.order)
    return record(
        judge, request.item, request.order, status="ok", verdict=verdict, slot=slot, score=score,
        raw=reply.raw, latency_ms=round(latency * 1000, 2), attempts=attempts,
        tokens_in=reply.tokens_in, tokens_out=reply.tokens_out,
        served_model=reply.served_model, fingerprint=reply.fingerprint, **probs,
    )


_NO_PROBS: dict[str, float] = {}


def _score(reply: JudgeReply, how: Judging) -> float | None:
    if reply.score is None:
        assert how.read_score is not None  # only pointwise judges are scored (the caller checked)
        return how.read_score(reply.raw)
    assert how.verdict is not None and how.verdict.scale is not None  # pointwise: its score reader needed both
    lo, hi = how.verdict.scale
    return reply.score if lo <= reply.score <= hi else None
