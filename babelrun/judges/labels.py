"""A verdict's labels: as slots (pairwise: A, B or tie) or as scores (pointwise: the
``{C: 1, I: 0}`` a grader's letter grades map to)."""

from __future__ import annotations

import msgspec

from ..spec import VerdictSpec
from .fields import TemplateError


def scored_labels(verdict: VerdictSpec, protocol: str) -> VerdictSpec:
    """A pointwise verdict whose ``labels`` map to scores (``{C: 1, I: 0}``) as the same map
    under ``values`` (its older name), so both spellings are one verdict and one judge_id;
    anything else as it is (``check_verdict`` says what is wrong)."""
    labels = verdict.labels
    if protocol != "pointwise" or not labels or not all(isinstance(v, (int, float)) for v in labels.values()):
        return verdict
    return msgspec.structs.replace(verdict, labels={}, values={**verdict.values,
                                                               **{k: float(v) for k, v in labels.items()}})


def slot_labels(verdict: VerdictSpec) -> dict[str, str]:
    """A pairwise verdict's labels (text -> A, B or tie)."""
    return {k: v for k, v in verdict.labels.items() if isinstance(v, str)}


def check_slot_labels(verdict: VerdictSpec) -> None:
    """A pairwise verdict's labels map to slots, some to A and some to B."""
    scored = next((k for k, v in verdict.labels.items() if not isinstance(v, str)), None)
    if scored is not None:
        raise TemplateError(f"verdict.labels.{scored}", "a pairwise label maps to A, B or tie; a label that maps "
                                                        "to a score is pointwise (protocol: pointwise)")
    if not {"A", "B"} <= set((slot_labels(verdict) or {"A": "A", "B": "B"}).values()):
        raise TemplateError("verdict.labels", "must map some label to A and some to B")


__all__ = ["check_slot_labels", "scored_labels", "slot_labels"]
