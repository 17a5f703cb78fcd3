"""Items of a finished run found again by id, for whoever shows them (the report's examples):
regenerated from the manifest and the corpus, never stored twice."""

from __future__ import annotations

from ..core.items import Item, generate
from ..corpus import Selection
from ..manifest import text_perturbations
from ..perturb import perturb_reference
from ..spec import Manifest
from . import Plan
from . import probes as probe_items


def lookup(manifest: Manifest, chosen: Selection, wanted: list[dict]) -> dict[str, Item]:
    """Items by id, regenerated from the run's manifest and its corpus selection. ``wanted``:
    records (dicts with item_id, kind, lang, ref_id, perturbation, severity). Plain text
    items straight from their reference (one perturbation each); the other families
    (labelled pairs, code-switched items) through a plan restricted to the references they
    came from."""
    by_ref = {(r.lang, r.ref_id): r for r in chosen.references}
    found, rest = {}, []
    for w in wanted:
        ref = by_ref.get((w["lang"], w.get("ref_id") or ""))
        if w.get("kind") == "text" and ref is not None:
            for _, item, _ in generate([ref], [(w["perturbation"], [w["severity"]])], manifest.seed,
                                    perturb_reference):
                if item is not None and item.item_id == w["item_id"]:
                    found[item.item_id] = item
        if w["item_id"] not in found:
            rest.append(w)
    if rest:
        ref_ids = {w.get("ref_id") or "" for w in rest}
        ref_ids = set() if "" in ref_ids else ref_ids  # a log from before records kept ref_id: all
        parallel = manifest.corpus.parallel
        langs = {w["lang"] for w in rest} | ({parallel.pivot} if parallel else set())
        refs = [r for r in chosen.references if (not ref_ids or r.ref_id in ref_ids) and r.lang in langs]
        pairs = [p for p in chosen.pairs if not ref_ids or p.pair_id in ref_ids]
        degradations, probes = probe_items.split(text_perturbations(manifest))
        plan = Plan(refs, [(p.name, list(p.severities)) for p in degradations], manifest.seed,
                    pairs, parallel=parallel, probes=probes)
        ids = {w["item_id"] for w in rest}
        found.update((it.item_id, it) for it in plan.items() if it.item_id in ids)
    return found
