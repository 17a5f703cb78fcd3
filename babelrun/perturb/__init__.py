"""Controlled degradations of a good answer; the gold label (prefer the original) holds by
construction. Every perturbation has the same shape: ``(text, severity, rng, lang) -> text``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from random import Random

from . import text


@dataclass(frozen=True)
class Perturbation:
    """A text degradation and what it is, declared here so that nothing above keeps a list of
    names about it: ``lengthens`` (the degraded answer is longer than the reference: the
    verbosity probes, e.g. the pointwise pad gain)."""

    apply: Callable[[str, float, Random, str], str]
    lengthens: bool = False

    def __call__(self, answer: str, severity: float, rng: Random, lang: str) -> str:
        return self.apply(answer, severity, rng, lang)


TEXT_PERTURBATIONS: dict[str, Perturbation] = {
    "truncate": Perturbation(text.truncate),
    "shuffle": Perturbation(text.shuffle),
    "number_corrupt": Perturbation(text.number_corrupt),
    "drop_entities": Perturbation(text.drop_entities),
    "repeat_pad": Perturbation(text.repeat_pad, lengthens=True),
}


def lengthening() -> tuple[str, ...]:
    """The text perturbations that lengthen the answer."""
    return tuple(name for name, p in TEXT_PERTURBATIONS.items() if p.lengthens)



def perturb_reference(ref, name: str, severity: float, rng: Random) -> str:
    """A text reference's answer degraded by perturbation ``name`` (the plan's perturber for
    text items: ``core.items.generate``'s ``perturb``)."""
    return TEXT_PERTURBATIONS[name](ref.response, severity, rng, ref.lang)


__all__ = ["TEXT_PERTURBATIONS", "Perturbation", "lengthening", "perturb_reference"]
