"""A judgement as the log keeps it: one ``Record`` per finished call of a key.

A pairwise key is ``(judge_id, item_id, order, sample)``; ``order`` says which answer sat in slot A
(``ref_first``: the reference). ``slot`` is what the judge named, ``verdict`` what that
means for the gold label (``verdict_of``).

A pointwise key is ``(judge_id, item_id, answer)``, ``answer ∈ {reference, degraded}``: the
one answer the call scored. It is kept in the same ``order`` field (one key shape for the
log, the done-set, shards and merges; ``core.keys`` packs ``degraded`` into the bit of
``pert_first``); the record's ``score`` holds the number read from the reply, ``None`` with
``verdict: invalid`` when none could be read.
"""

from __future__ import annotations

from typing import Literal

import msgspec

Order = Literal["ref_first", "pert_first"]
ORDERS: tuple[Order, Order] = ("ref_first", "pert_first")
Answer = Literal["reference", "degraded"]
ANSWERS: tuple[Answer, Answer] = ("reference", "degraded")  # pointwise keys, in key-bit order
Slot = Literal["A", "B", "tie", "invalid"]
Status = Literal["ok", "error"]
Verdict = Literal["reference", "perturbed", "tie", "invalid"]


class Record(msgspec.Struct, frozen=True, omit_defaults=True):
    judge_id: str
    item_id: str
    order: str
    status: Status
    judge: str  # the judge's display name in the manifest
    kind: str
    lang: str
    perturbation: str
    severity: float
    ref_len: int
    pert_len: int
    # The reference (or labelled pair) the item came from: the same id across the languages
    # of a parallel corpus. (Absent from logs written before it was recorded.)
    ref_id: str = ""
    verdict: Verdict | None = None
    slot: Slot | None = None  # what the judge named: A, B, tie or invalid
    p_a: float | None = None  # soft verdict: P(A), P(B), P(tie) from one forward pass
    p_b: float | None = None
    p_tie: float | None = None
    score: float | None = None  # pointwise: the score the judge gave the one answer
    raw: str | None = None
    latency_ms: float | None = None
    attempts: int = 1
    tokens_in: int | None = None
    tokens_out: int | None = None
    served_model: str | None = None
    fingerprint: str | None = None
    error_kind: str | None = None
    error: str | None = None
    ts: float = 0.0
    # A robustness probe's cue as the item recorded it (``authority|en|1|between:2``:
    # probe, cue language, text, placement); absent for every other item.
    cue: str | None = None
    cached: bool = False  # served from the response cache (``cache:``): no call was made
    tokens_cached: int | None = None  # input tokens the provider served from its prompt cache
    truncated: bool = False  # the reply stopped at max_tokens, as the provider said (omitted when not)
    # input tokens the provider wrote to its prompt cache (Anthropic ``cache_creation_input_tokens``),
    # part of ``tokens_in`` and priced at ``cache_write_per_mtok``
    tokens_cache_write: int | None = None
    # Which of a judge's ``samples: k`` asks of this presentation (0 … k−1): part of the key.
    # Omitted at 0, so a judge asked once writes the records it always wrote.
    sample: int = 0
    # The sampling the call was sent with: the judge's temperature (omitted at 0) and the
    # request's seed (only when the judge sets ``seed``: ``core.keys.sample_seed``).
    temperature: float | None = None
    seed: int | None = None

    @property
    def key(self) -> tuple[str, str, str] | tuple[str, str, str, int]:
        """(judge_id, item_id, order), with the sample index after it for a sample after the
        first: sample 0 keys as a record always did (``DoneSet`` takes either shape)."""
        if self.sample:
            return (self.judge_id, self.item_id, self.order, self.sample)
        return (self.judge_id, self.item_id, self.order)


def verdict_of(slot: str, order: str) -> str:
    """What a named slot means for the gold label: the reference, the perturbed answer, or
    tie / invalid as named."""
    if slot in ("tie", "invalid"):
        return slot
    ref_slot = "A" if order == "ref_first" else "B"
    return "reference" if slot == ref_slot else "perturbed"
