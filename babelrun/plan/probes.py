"""The robustness-probe family's items (``babelrun/perturb/probes.py`` says what each probe is).

Per reference and probe, in plan order: a cue probe's clean twin (once per reference and
base degradation, shared by every cue probe on that base) and one cued item per cue language;
a master key per cue language; the self match. A cue probe whose base degradation is a no-op
on a reference (``truncate`` of a one-sentence answer) is a no-op too: with no worse answer
there is no gold label, so neither the twin nor the cued items are emitted, only counted.

Items are of kind ``probe`` and carry ``probe:<…>`` names; each item's RNG is seeded from its
id, as every other item's.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

from ..core.items import Cell, Item, Outcome, Reference, item_id
from ..perturb import TEXT_PERTURBATIONS, probes
from ..spec import PerturbationSpec

KIND = "probe"


def is_probe(name: str) -> bool:
    return name in probes.PROBES


def split(perturbations: Sequence[PerturbationSpec]) -> tuple[list[PerturbationSpec], list[PerturbationSpec]]:
    """A manifest's perturbations as (degradations, probes)."""
    return ([p for p in perturbations if not is_probe(p.name)], [p for p in perturbations if is_probe(p.name)])


def _item(ref: Reference, name: str, severity: float, perturbed: str, iid: str, cue: str = "",
          reference: str | None = None) -> Item:
    shown = ref.response if reference is None else reference  # the romanised probe shows its own
    return Item(iid, KIND, ref.lang, ref.ref_id, ref.prompt, shown, perturbed, name, severity,
                len(shown), len(probes.strip_slot(perturbed)),
                reference_answer=getattr(ref, "reference_answer", ""), cue=cue)


def _romanised(ref: Reference, name: str, severity: float, degraded: str, seed: int) -> tuple[Item | None, Outcome]:
    """The reference in Latin script against the native degraded answer; a no-op where the
    romanisation changes nothing but whitespace (a Latin-script reference)."""
    from ..core import languages
    from ..perturb.romanise import romanise, transliterator

    if languages.script(ref.lang) == "Latn":  # its own romanisation (uroman would only strip its marks)
        return None, "no-op"
    shown = romanise(ref.response, ref.lang)
    if "".join(shown.split()) == "".join(ref.response.split()):
        return None, "no-op"
    iid = item_id(KIND, ref, name, severity, seed)
    cue = f"{probes.ROMANISED}|Latn|{transliterator(ref.lang)}|reference"
    return _item(ref, name, severity, degraded, iid, cue, shown), "emitted"


def generate(references: Sequence[Reference], specs: Sequence[PerturbationSpec],
             seed: int) -> Iterator[tuple[Cell, Item | None, Outcome]]:
    """Every probe item of the plan (and the no-ops among them), as ``core.items.generate``."""
    if not specs:
        return
    tables = {spec.cues: probes.cues(spec.cues) for spec in specs}
    for ref in references:
        twins: dict[tuple[str, float], str | None] = {}  # base -> its degraded text (None: a no-op)
        for spec in specs:
            table = tables[spec.cues]
            kind = probes.PROBES[spec.name]
            if kind == "self_match":
                name = probes.name(spec.name)
                iid = item_id(KIND, ref, name, 0.0, seed)
                yield (ref.lang, name, 0.0), _item(ref, name, 0.0, ref.response, iid, "self_match"), "emitted"
                continue
            langs = probes.cue_languages(ref.lang, spec.cue_language, table)
            if kind == "master_key":
                for cue_lang in langs:
                    name = probes.name(spec.name, "" if cue_lang == ref.lang else cue_lang)
                    iid = item_id(KIND, ref, name, 0.0, seed, cue_lang)
                    text, index = probes.master_key(ref.response, cue_lang, table, random.Random(int(iid, 16)))
                    yield (ref.lang, name, 0.0), _item(ref, name, 0.0, text, iid,
                                                       f"master_key|{cue_lang}|{index}|alone"), "emitted"
                continue
            base = (spec.base.name, spec.base.severity) if spec.base is not None else probes.DEFAULT_BASE
            twin_name = probes.name(probes.CLEAN, "", base)
            if base not in twins:
                iid = item_id(KIND, ref, twin_name, base[1], seed)
                degraded = TEXT_PERTURBATIONS[base[0]](ref.response, base[1], random.Random(int(iid, 16)), ref.lang)
                same = "".join(degraded.split()) == "".join(ref.response.split())
                twins[base] = None if same else degraded
                cell = (ref.lang, twin_name, base[1])
                yield cell, (None if same else _item(ref, twin_name, base[1], degraded, iid)), (
                    "no-op" if same else "emitted")
            degraded_text = twins[base]
            if spec.name == probes.ROMANISED:
                name = probes.name(spec.name, "", base)
                item, outcome = ((None, "no-op") if degraded_text is None
                                 else _romanised(ref, name, base[1], degraded_text, seed))
                yield (ref.lang, name, base[1]), item, outcome
                continue
            for cue_lang in langs:
                name = probes.name(spec.name, "" if cue_lang == ref.lang else cue_lang, base)
                cell = (ref.lang, name, base[1])
                if degraded_text is None:
                    yield cell, None, "no-op"
                    continue
                iid = item_id(KIND, ref, name, base[1], seed, cue_lang)
                text, cue = probes.cued(degraded_text, spec.name, cue_lang, table, random.Random(int(iid, 16)))
                yield cell, _item(ref, name, base[1], text, iid, cue), "emitted"
