"""Gold pairs: a reference against a controlled degradation of it.

``item_id`` is a content hash (blake2b) of everything that defines the pair and the seed,
never Python's salted ``hash()``; each item's RNG is seeded from its id, so an item is the
same on every machine and in every run, whatever else the plan holds.
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Literal

import msgspec

ItemKind = Literal["text", "labelled", "code_switched", "tie_probe", "agentic"]
# Item families whose perturbation names carry a prefix in the cards: code-switched items
# are "cs:truncate", …, agent trajectories "agent:step_pad", …, so they never share a card
# cell with the plain items.
FAMILY_PREFIX = {"text": "", "code_switched": "cs:", "agentic": "agent:"}


class Reference(msgspec.Struct, frozen=True):
    """A prompt and a good answer to it, in one language."""

    lang: str
    ref_id: str
    prompt: str
    response: str
    # A separate reference answer for reference-guided grading (a template's {reference}):
    # never the answer under judgement. Empty where the corpus has none.
    reference_answer: str = ""


class LabelledPair(msgspec.Struct, frozen=True):
    """Two answers to one prompt and which is better, from the data (LLMBar format)."""

    lang: str
    pair_id: str
    set_name: str
    prompt: str
    better: str
    worse: str


class Removed(msgspec.Struct, frozen=True):
    """References a corpus filter took out, per language (reported in plan.json)."""

    lang: str
    reason: str
    count: int


class Item(msgspec.Struct, frozen=True):
    item_id: str
    kind: ItemKind
    lang: str
    ref_id: str
    prompt: str
    reference: str
    perturbed: str
    perturbation: str
    severity: float
    ref_len: int  # characters
    pert_len: int
    reference_answer: str = ""  # the corpus's reference answer, for reference-guided templates


class PerturbationAudit(msgspec.Struct, frozen=True):
    """How many items each (language, perturbation, severity) emitted and skipped as no-ops."""

    lang: str
    perturbation: str
    severity: float
    emitted: int
    skipped: int


def item_id(kind: str, ref: Reference, perturbation: str, severity: float, seed: int, *extra: str) -> str:
    """``extra``: what else defines an item of this kind (an agentic item's focus); text
    items have none, so their ids are what they always were."""
    fields = (kind, ref.lang, ref.ref_id, ref.prompt, ref.response, perturbation, repr(severity), str(seed), *extra)
    guide = getattr(ref, "reference_answer", "")
    if guide:  # only where there is one: ids without it stay what they were
        fields = (*fields, "reference_answer", guide)
    return hashlib.blake2b("\x1f".join(fields).encode(), digest_size=10).hexdigest()


def _same_text(a: str, b: str) -> bool:
    return "".join(a.split()) == "".join(b.split())


Cell = tuple[str, str, float]  # (lang, perturbation, severity)
# How an item kind degrades its source: (source, perturbation name, severity, rng) -> the
# perturbed text, comparable with ``source.response``.
Perturber = Callable[[Reference, str, float, random.Random], str]


def generate(references: Iterable[Reference], perturbations: list[tuple[str, list[float]]],
             seed: int, perturb: Perturber, kind: ItemKind = "text",
             extra: tuple[str, ...] = ()) -> Iterator[tuple[Cell, Item | None]]:
    """Every (reference, perturbation, severity) in plan order: its cell, and its item — or
    ``None`` where the perturbation changed nothing (or only whitespace). Such an item would
    carry a false gold label; it is never emitted, only counted.

    A source is anything with a Reference's fields (``lang, ref_id, prompt, response``):
    agentic items come from trajectories serialised into ``response`` (``babelrun.agentic``),
    with their own ``perturb`` and their focus in ``extra``."""
    prefix = FAMILY_PREFIX[kind]
    for ref in references:
        for name, severities in perturbations:
            for severity in severities:
                iid = item_id(kind, ref, name, severity, seed, *extra)
                rng = random.Random(int(iid, 16))
                perturbed = perturb(ref, name, severity, rng)
                cell = (ref.lang, prefix + name, severity)
                if _same_text(perturbed, ref.response):
                    yield cell, None
                else:
                    yield cell, Item(iid, kind, ref.lang, ref.ref_id, ref.prompt, ref.response,
                                     perturbed, prefix + name, severity, len(ref.response), len(perturbed),
                                     getattr(ref, "reference_answer", ""))


def audit_counts(cells: Iterable[tuple[Cell, bool]]) -> list[PerturbationAudit]:
    """Emitted / skipped per cell from (cell, emitted) pairs."""
    emitted: Counter = Counter()
    skipped: Counter = Counter()
    for cell, was_emitted in cells:
        (emitted if was_emitted else skipped)[cell] += 1
    return [PerturbationAudit(lang, name, sev, emitted[(lang, name, sev)], skipped[(lang, name, sev)])
            for lang, name, sev in sorted(set(emitted) | set(skipped))]


def pair_item(pair: LabelledPair, seed: int) -> Item:
    """A labelled pair as an item: the better output in the reference's place, the worse in
    the perturbed one's, under the perturbation name ``pairs:<set>`` (severity 0)."""
    fields = ("labelled", pair.lang, pair.pair_id, pair.prompt, pair.better, pair.worse, str(seed))
    iid = hashlib.blake2b("\x1f".join(fields).encode(), digest_size=10).hexdigest()
    return Item(iid, "labelled", pair.lang, pair.pair_id, pair.prompt, pair.better, pair.worse,
                f"pairs:{pair.set_name}", 0.0, len(pair.better), len(pair.worse))


def build(references: Iterable[Reference], perturbations: Iterable[tuple[str, list[float]]],
          seed: int, perturb: Perturber) -> tuple[list[Item], list[PerturbationAudit]]:
    """All items of a plan in memory, with the perturbation audit (small plans, tests)."""
    pairs = list(generate(references, list(perturbations), seed, perturb))
    return [it for _, it in pairs if it is not None], audit_counts((c, it is not None) for c, it in pairs)
