"""Judge backends behind one protocol (``base.Judge``)."""

from __future__ import annotations

from ..manifest import JudgeSpec
from .base import (
    ORDERS,
    FatalJudgeError,
    Judge,
    JudgeReply,
    JudgeRequest,
    Order,
    RejectedError,
    RetryableError,
    judge_id,
)


def build(spec: JudgeSpec, seed: int) -> Judge:
    jid = judge_id(spec)
    if spec.backend == "simulated":
        from .simulated import SimulatedJudge

        return SimulatedJudge(spec, jid, seed)
    if spec.backend == "openai":
        from .openai import OpenAIJudge

        return OpenAIJudge(spec, jid)
    raise ValueError(f"unknown backend {spec.backend!r}")


__all__ = [
    "ORDERS", "FatalJudgeError", "Judge", "JudgeReply", "JudgeRequest", "Order",
    "RejectedError", "RetryableError", "build", "judge_id",
]
