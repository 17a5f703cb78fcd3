"""Item families built from a parallel corpus, for the language-switch protocol.

A parallel corpus has each unit in several languages under one ``ref_id`` (UDHR units,
FLORES passages). Against a pivot language:

- **code-switched references**: the target's sentences with every second one replaced by
  the pivot's sentence at the same position (t0 p1 t2 p3 …, the target's extra sentences
  after). The answer says the same thing in two languages, so it stays a good answer, and
  perturbing it keeps the gold label: these references go through the same five
  perturbations as family ``code_switched`` (cards: ``cs:truncate``, …).
- **translation tie probes**: the pivot's reference against the target's, the same answer in
  two languages. There is no better answer: a judge should say tie, and a preference for
  one side is a language preference. Items of kind ``tie_probe`` (no gold label: cards leave
  them out; ``babelrun invariance`` reports their tie rate and pivot share).

Labelled pairs in several language conditions (the Judge-LS protocol: one alignment id, the
same pair in English, Chinese, a Chinese-English mix) give tie probes the same way: the pivot
condition's better output against each other condition's (``pair_tie_probes``).

Sentences are aligned by position, which translations only roughly keep: code-switched text
is a mechanical mix, not a crafted one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

from ..core.items import TIE_PROBE_PREFIX, Item, LabelledPair, Reference
from ..perturb import script


def aligned(references: list[Reference], pivot: str) -> Iterator[tuple[Reference, Reference]]:
    """(pivot reference, target reference) for every unit the pivot shares with a target."""
    by_unit = {r.ref_id: r for r in references if r.lang == pivot}
    for ref in references:
        if ref.lang != pivot and ref.ref_id in by_unit:
            yield by_unit[ref.ref_id], ref


def code_switched(pivot: Reference, target: Reference) -> Reference:
    t, p = script.sentences(target.response, target.lang), script.sentences(pivot.response, pivot.lang)
    mixed = [(p[i] if i % 2 and i < len(p) else t[i]).text for i in range(len(t))]
    gap = script.sentence_gap(t) or script.sentence_gap(p)
    return Reference(target.lang, target.ref_id, target.prompt, gap.join(mixed))


def tie_probe(pivot: Reference, target: Reference, seed: int, mix: str = "") -> Item:
    """``mix``: the target's condition, for labelled pairs (``zh``, ``zh-en-switched``), kept
    in the id and the perturbation name (``tie_probe:en@zh-en-switched``): such probes never
    merge with a parallel corpus's, nor a mix with its language."""
    fields = ("tie_probe", pivot.lang, target.lang, target.ref_id, pivot.response, target.response, str(seed))
    fields += (mix,) if mix else ()
    iid = hashlib.blake2b("\x1f".join(fields).encode(), digest_size=10).hexdigest()
    name = f"{TIE_PROBE_PREFIX}{pivot.lang}" + (f"@{mix}" if mix else "")
    return Item(iid, "tie_probe", target.lang, target.ref_id, target.prompt, pivot.response,
                target.response, name, 0.0, len(pivot.response), len(target.response))


def condition_of(lang: str, mix: str) -> str:
    """A labelled pair's condition key: its mix's name, else its language."""
    return mix or lang


def pair_tie_probes(pairs: list[LabelledPair], pivot: str, seed: int) -> list[Item]:
    """The pivot condition's better output against every other condition's, per alignment id."""
    def ref(p: LabelledPair) -> Reference:
        return Reference(p.lang, p.pair_id, p.prompt, p.better)

    base = {p.pair_id: p for p in pairs if condition_of(p.lang, p.condition) == pivot}
    return [tie_probe(ref(base[p.pair_id]), ref(p), seed, condition_of(p.lang, p.condition)) for p in pairs
            if p.pair_id in base and condition_of(p.lang, p.condition) != pivot]
