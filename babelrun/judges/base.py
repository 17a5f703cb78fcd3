"""The judge protocol, the typed request/reply, and the errors the engine retries or stops on.

A backend turns one ``JudgeRequest`` into one ``JudgeReply`` (the raw text and what the
provider says it served). It never parses verdicts and never retries: the engine does both,
the same way for every backend. Backends that batch (local models) collect concurrent
requests behind this same per-request call.
"""

from __future__ import annotations

import hashlib
from typing import Protocol

import msgspec

from ..core.items import Item
from ..core.records import ORDERS, Order
from ..errors import FatalJudgeError, RejectedError, RetryableError
from ..spec import JudgeSpec
from .prompt import TEMPLATES, Template, render

__all__ = ["ORDERS", "FatalJudgeError", "Judge", "JudgeReply", "JudgeRequest", "Order", "RejectedError",
           "RetryableError", "judge_id"]


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


class Judge(Protocol):
    spec: JudgeSpec
    judge_id: str

    async def judge(self, request: JudgeRequest) -> JudgeReply: ...

    async def aclose(self) -> None: ...


def judge_id(spec: JudgeSpec) -> str:
    """Short hash of everything that can change a verdict, and nothing that cannot.

    In: backend, model, endpoint, prompt template name, version and language, sampling
    parameters, and
    the simulated judge's knobs. Out: the judge's display name, concurrency, rate limits,
    timeouts, retries and the key variable, which change how fast verdicts come, not which.
    """
    template = TEMPLATES[spec.prompt]
    identity = {
        "backend": spec.backend,
        "model": spec.model,
        "endpoint": (spec.endpoint or "").rstrip("/"),
        "prompt": f"{template.name}@v{template.version}",
        "prompt_language": spec.prompt_language,
        "temperature": spec.temperature,
        "max_tokens": spec.max_tokens,
        "soft": spec.soft,
        "simulated": _knobs(spec) if spec.backend == "simulated" else None,
    }
    if spec.rule is not None:  # added later: only rule judges carry it, so no id changes
        identity["rule"] = msgspec.structs.asdict(spec.rule)
    blob = msgspec.json.encode(identity, order="sorted")
    return hashlib.blake2b(blob, digest_size=6).hexdigest()


# Knobs added after judge ids were first published: left out of the identity while they hold
# their default, so adding a knob never renames existing judges.
_LATER_KNOBS = {"noise": None, "accuracy_by_perturbation": {}, "self_preference": 0.0}


def _knobs(spec: JudgeSpec) -> dict | None:
    if spec.simulated is None:
        return None
    knobs = msgspec.structs.asdict(spec.simulated)
    for name, default in _LATER_KNOBS.items():
        if knobs[name] == default:
            del knobs[name]
    return knobs
