"""The judge protocol, the typed request/reply, and the errors the engine retries or stops on.

A backend turns one ``JudgeRequest`` into one ``JudgeReply`` (the raw text and what the
provider says it served). It never parses verdicts and never retries: the engine does both,
the same way for every backend. Backends that batch (local models) collect concurrent
requests behind this same per-request call.
"""

from __future__ import annotations

from typing import Protocol

import msgspec

from ..core.items import Item
from ..core.records import ORDERS, Order
from ..errors import FatalJudgeError, RejectedError, RetryableError
from ..spec import JudgeSpec
from .prompt import Template, render

__all__ = ["ORDERS", "FatalJudgeError", "Judge", "JudgeReply", "JudgeRequest", "Order", "RejectedError",
           "RetryableError"]


class JudgeRequest(msgspec.Struct, frozen=True):
    item: Item
    order: Order
    messages: list[dict[str, str]]

    @classmethod
    def of(cls, item: Item, order: Order, template: Template, in_item_language: bool = False) -> JudgeRequest:
        """The presentation of ``item`` in ``order``: the reference in slot A for
        ``ref_first``, in slot B for ``pert_first``; the instructions in English, or in the
        item's language when asked for and written."""
        a, b = (item.reference, item.perturbed) if order == "ref_first" else (item.perturbed, item.reference)
        lang = item.lang if in_item_language else None
        return cls(item, order, render(template, item.prompt, a, b, lang))

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


class Judge(Protocol):
    spec: JudgeSpec
    judge_id: str

    async def judge(self, request: JudgeRequest) -> JudgeReply: ...

    async def aclose(self) -> None: ...
