"""Gold pairs: a reference against a controlled degradation of it.

``item_id`` is a content hash (blake2b) of everything that defines the pair and the seed,
never Python's salted ``hash()``; each item's RNG is seeded from its id, so an item is the
same on every machine and in every run, whatever else the plan holds.
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from collections.abc import Iterable
from typing import Literal

import msgspec

from .corpus import Reference
from .perturb import TEXT_PERTURBATIONS

ItemKind = Literal["text"]


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


class PerturbationAudit(msgspec.Struct, frozen=True):
    """How many items each (language, perturbation, severity) emitted and skipped as no-ops."""

    lang: str
    perturbation: str
    severity: float
    emitted: int
    skipped: int


def item_id(kind: str, ref: Reference, perturbation: str, severity: float, seed: int) -> str:
    fields = (kind, ref.lang, ref.ref_id, ref.prompt, ref.response, perturbation, repr(severity), str(seed))
    return hashlib.blake2b("\x1f".join(fields).encode(), digest_size=10).hexdigest()


def _same_text(a: str, b: str) -> bool:
    return "".join(a.split()) == "".join(b.split())


def build(
    references: Iterable[Reference], perturbations: Iterable[tuple[str, list[float]]], seed: int
) -> tuple[list[Item], list[PerturbationAudit]]:
    """Every (reference, perturbation, severity) whose perturbation changed something.

    A perturbation that leaves the text unchanged (or changed only in whitespace) would make
    the gold label false; that item is not emitted, only counted.
    """
    perturbations = list(perturbations)
    items: list[Item] = []
    emitted: Counter = Counter()
    skipped: Counter = Counter()
    for ref in references:
        for name, severities in perturbations:
            for severity in severities:
                iid = item_id("text", ref, name, severity, seed)
                rng = random.Random(int(iid, 16))
                perturbed = TEXT_PERTURBATIONS[name](ref.response, severity, rng, ref.lang)
                cell = (ref.lang, name, severity)
                if _same_text(perturbed, ref.response):
                    skipped[cell] += 1
                    continue
                emitted[cell] += 1
                items.append(
                    Item(iid, "text", ref.lang, ref.ref_id, ref.prompt, ref.response, perturbed,
                         name, severity, len(ref.response), len(perturbed))
                )
    audit = [
        PerturbationAudit(lang, name, sev, emitted[(lang, name, sev)], skipped[(lang, name, sev)])
        for lang, name, sev in sorted(set(emitted) | set(skipped))
    ]
    return items, audit
