"""Agent trajectories as another item kind, through the same items, plan, engine, log and score.

A reference trajectory becomes an ``AgenticReference``: the fields a text ``Reference`` has
(``lang, ref_id, prompt, response``) with the task and the tool definitions as the prompt and
the trajectory serialised in the run's focus as the response. ``items.generate`` then builds
``Item(kind="agentic")`` pairs the usual way: item ids hash that text and the focus, each
item's RNG is seeded from its id, the perturbed trajectory is serialised in the same focus,
and the no-op guard compares the two texts — a perturbation the judge could not see is
skipped and counted in ``plan.json``. Perturbation names carry the ``agent:`` prefix.

Modules: ``trajectory`` (the model, OpenAI-chat and BFCL loaders), ``perturb`` (the nine
perturbations), ``serialise`` (the ``tool_calls`` and ``full_trace`` focus modes); the
bundled reference set is in ``bundled/`` (``bundled/README.md``).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from importlib import resources

import msgspec

from . import serialise
from .perturb import AGENTIC_PERTURBATIONS
from .serialise import FOCUSES, Focus, task_prompt
from .trajectory import Trajectory, read_lines

__all__ = ["AGENTIC_PERTURBATIONS", "FOCUSES", "AgenticReference", "Focus", "Trajectory", "bundled",
           "generate", "references"]


class AgenticReference(msgspec.Struct, frozen=True):
    lang: str
    ref_id: str
    prompt: str  # the task and the tools
    response: str  # the reference trajectory in ``focus``
    trajectory: Trajectory
    focus: Focus


def references(trajectories: Iterable[Trajectory], focus: Focus) -> list[AgenticReference]:
    return [AgenticReference(t.lang, t.traj_id, task_prompt(t), serialise.serialise(t, focus), t, focus)
            for t in trajectories]


def perturb(ref: AgenticReference, name: str, severity: float, rng: random.Random) -> str:
    return serialise.serialise(AGENTIC_PERTURBATIONS[name](ref.trajectory, severity, rng), ref.focus)


def generate(refs: list[AgenticReference], perturbations: list[tuple[str, list[float]]], seed: int) -> Iterator:
    """``items.generate`` for trajectories: (cell, item or None, outcome) in plan order."""
    from ..core.items import generate as generate_items

    for focus in FOCUSES:
        chosen = [r for r in refs if r.focus == focus]
        if chosen:
            yield from generate_items(chosen, perturbations, seed, perturb, kind="agentic",
                                      extra=(focus,))


def bundled() -> Iterator[Trajectory]:
    """The reference trajectories shipped in the package, one file per language."""
    from ..core import languages

    folder = resources.files(__package__) / "bundled"
    for f in sorted((f for f in folder.iterdir() if f.name.endswith(".jsonl")), key=lambda f: f.name):
        lang = languages.normalize(f.name.removesuffix(".jsonl"))
        for traj in read_lines(f.read_bytes(), "openai_chat", lang, source=f"{f.name}: "):
            yield msgspec.structs.replace(traj, lang=languages.normalize(traj.lang))
