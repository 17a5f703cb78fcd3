"""Controlled degradations of a good answer; the gold label (prefer the original) holds by
construction. Every perturbation has the same shape: ``(text, severity, rng, lang) -> text``.
"""

from __future__ import annotations

from collections.abc import Callable
from random import Random

from . import text

Perturbation = Callable[[str, float, Random, str], str]

TEXT_PERTURBATIONS: dict[str, Perturbation] = {
    "truncate": text.truncate,
    "shuffle": text.shuffle,
    "number_corrupt": text.number_corrupt,
    "drop_entities": text.drop_entities,
    "repeat_pad": text.repeat_pad,
}



def perturb_reference(ref, name: str, severity: float, rng: Random) -> str:
    """A text reference's answer degraded by perturbation ``name`` (the plan's perturber for
    text items: ``core.items.generate``'s ``perturb``)."""
    return TEXT_PERTURBATIONS[name](ref.response, severity, rng, ref.lang)


__all__ = ["TEXT_PERTURBATIONS", "Perturbation", "perturb_reference"]
