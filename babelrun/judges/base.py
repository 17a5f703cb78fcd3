"""The typed request/reply, and the errors the engine retries or stops on (the judge interface
itself, ``Judge``, is in ``protocol.py`` beside the protocol every judge carries).

A backend turns one ``JudgeRequest`` into one ``JudgeReply`` (the raw text and what the
provider says it served). It never parses verdicts and never retries: the engine does both,
the same way for every backend. Backends that batch (local models) collect concurrent
requests behind this same per-request call.
"""

from __future__ import annotations

import msgspec

from ..core.items import Item
from ..core.records import ORDERS, Answer, Order
from ..errors import FatalJudgeError, RejectedError, RetryableError

__all__ = ["ORDERS", "FatalJudgeError", "JudgeReply", "JudgeRequest", "Order", "RejectedError",
           "RetryableError"]


class JudgeRequest(msgspec.Struct, frozen=True):
    item: Item
    order: Order | Answer  # the key: a slot order (pairwise) or the one answer shown (pointwise)
    messages: list[dict[str, str]]  # rendered by the judge's protocol (``Judging.request``)
    sample: int = 0  # which ask of this presentation (0 … samples − 1): part of the key
    seed: int | None = None  # sent to the provider where its API takes one (the judge's ``seed`` set)

    @property
    def answer(self) -> str:
        """The one answer a pointwise request shows (its key: reference or degraded)."""
        return self.item.reference if self.order == "reference" else self.item.perturbed

    @property
    def answer_a(self) -> str:
        return self.item.reference if self.order == "ref_first" else self.item.perturbed

    @property
    def answer_b(self) -> str:
        return self.item.perturbed if self.order == "ref_first" else self.item.reference


class JudgeReply(msgspec.Struct, frozen=True):
    raw: str
    served_model: str | None = None
    fingerprint: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    probs: tuple[float, float, float] | None = None  # soft verdict: P(A), P(B), P(tie)
    # Judges that are code may decide directly: a slot (pairwise) or a score (pointwise),
    # read instead of ``raw``.
    slot: str | None = None
    score: float | None = None
    tokens_cached: int | None = None  # input tokens served from the provider's prompt cache
    truncated: bool = False  # the provider says the reply stopped at max_tokens (its finish reason)
    tokens_cache_write: int | None = None  # input tokens written to the provider's prompt cache (Anthropic)
