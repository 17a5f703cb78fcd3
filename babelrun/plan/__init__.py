"""The plan: which (judge, item, order) keys an audit must judge.

Items are not held in memory beyond a bound: ``Plan.items()`` regenerates them from the
references on each pass (perturbing is deterministic), so memory stays flat however large
the plan. One survey pass at construction counts the items, keeps their ids (for progress
totals and the done count) and the perturbation audit, and keeps what it made for later
passes (an audit's engine otherwise perturbed every item a second time, in its event loop):
the items themselves when their texts fit in ``HOLD_BYTES``, else their texts compressed
(``core.items.PackedTexts``, ~3 % of their size), from which a pass rebuilds the items; past
that bound too, nothing (a pass perturbs again).
Labelled pairs follow the perturbation items: already items, they are audited as
``pairs:<set>`` and counted as emitted; so are the parallel-corpus families
(``parallel.py``): code-switched items (``cs:<perturbation>``) and translation tie probes.
Agent trajectories (``babelrun.agentic``) follow the text items: perturbed and no-op-guarded
on their serialised form, audited as ``agent:<perturbation>``.

A plan can be narrowed to one shard (``sharded``): the keys of shard i of N (``log.Shard``),
judged by one process of several; the union of the N shards is the plan. Each shard still
walks every item (perturbing is cheap) and skips the keys of the others.
"""

from __future__ import annotations

import copy
import sys
from array import array
from collections import deque
from collections.abc import Iterable, Iterator
from itertools import islice

import numpy as np

from .. import agentic, corpus
from ..core import languages
from ..core.items import (
    AuditTally,
    Item,
    ItemKind,
    Outcome,
    PackedTexts,
    PerturbationAudit,
    Segmentation,
    generate,
    pair_item,
    replay,
)
from ..core.keys import ItemIds, Shard, plan_keys, slot
from ..core.records import ORDERS
from ..errors import ManifestError
from ..manifest import agentic_perturbations, text_perturbations
from ..perturb import perturb_reference, script
from ..spec import AgenticSpec, Manifest, ParallelSpec, PerturbationSpec
from ..store.done import DoneSet
from . import probes as probe_items
from .order import Placed, interleave, seeded_cell
from .parallel import aligned, code_switched, pair_tie_probes, tie_probe


def _condition(pivot: str) -> str:
    """The pivot as a condition key: a language's standard tag, or a mix's name as written."""
    try:
        return languages.normalize(pivot)
    except ValueError:
        return pivot

_OUTCOMES: tuple[Outcome, ...] = ("emitted", "no-op", "merged")

# A language whose text references average fewer sentences per unit is "segmentation weak":
# truncate, shuffle and repeat_pad then act on its few multi-sentence units only (the
# UDHR's well-segmented languages average 2.0–2.6: many articles are one sentence).
WEAK_SENTENCES = 1.5


def segmentation(references: list[corpus.Reference]) -> list[Segmentation]:
    """Per language: its text references, their mean sentences, and whether that is weak."""
    counts: dict[str, list[int]] = {}
    for _ in _counting(references, counts):
        pass
    return _segmentation(counts)


def _counting(references: list[corpus.Reference], counts: dict[str, list[int]]) -> Iterator[corpus.Reference]:
    """The references, each counting its sentences into ``counts`` (by language) as it is
    yielded: the survey splits a reference just before its perturbations split it again
    (``script.sentences`` keeps the last texts' splits), not in a pass of its own."""
    for ref in references:
        counts.setdefault(ref.lang, []).append(len(script.sentences(ref.response, ref.lang)))
        yield ref


def _segmentation(counts: dict[str, list[int]]) -> list[Segmentation]:
    return [Segmentation(lang, len(n), round(sum(n) / len(n), 4), sum(n) / len(n) < WEAK_SENTENCES)
            for lang, n in sorted(counts.items())]


def _text_bytes(item: Item) -> int:
    """What holding an item whole costs: its perturbed text and its id (the rest is shared
    with its reference, or small)."""
    return sys.getsizeof(item.perturbed) + 200


def _places(plan_ids: ItemIds, order: ItemIds) -> np.ndarray:
    """For each item of the plan, in plan order, its place in ``order`` (the same ids in
    another order), matched by key bits (``item_bits``) in sorted arrays: no dict of a str and
    an int for every item alive through judging. Ids that share their bits (the same id twice)
    take the last place, as a dict built over the order would give them."""
    bits = order.bits()
    by_bits = np.argsort(bits, kind="stable")
    ranked = bits[by_bits]
    wanted = plan_ids.bits()
    at = np.maximum(np.searchsorted(ranked, wanted, side="right") - 1, 0)
    if len(wanted) and not (ranked[at] == wanted).all():
        raise KeyError("an item of the plan is not in the feed's order")
    places: np.ndarray = by_bits[at]
    return places


class Plan:
    def __init__(self, references: list[corpus.Reference], perturbations: list[tuple[str, list[float]]],
                 seed: int, pairs: list[corpus.LabelledPair] = (), removed: list[corpus.Removed] = (),
                 parallel: ParallelSpec | None = None, trajectories: list[agentic.Trajectory] = (),
                 agentic_spec: AgenticSpec | None = None, probes: list[PerturbationSpec] = ()):
        self.references = references
        self.probes = list(probes)  # robustness probes (plan/probes.py), apart from the degradations
        spec = agentic_spec or AgenticSpec()
        self.trajectories = agentic.references(trajectories, spec.focus)
        self.agentic_perturbations = [(p.name, list(p.severities)) for p in agentic_perturbations(spec)]
        self.perturbations = perturbations
        self.seed = seed
        self.pairs = list(pairs)
        self.removed = list(removed)
        units = list(aligned(references, languages.normalize(parallel.pivot))) if parallel else []
        self.code_switched = [code_switched(p, t) for p, t in units] if parallel and parallel.code_switched else []
        self.tie_probes = [tie_probe(p, t, seed) for p, t in units] if parallel and parallel.tie_probes else []
        if parallel and parallel.tie_probes:
            self.tie_probes += pair_tie_probes(self.pairs, _condition(parallel.pivot), seed)
        cells = AuditTally()
        self.item_ids = ItemIds()  # packed: a str for each kept the survey's allocator pools in use
        sentences: dict[str, list[int]] = {}  # the text references' sentence counts (``segmentation``)
        self._survey(cells, sentences)
        for cell, item, outcome in self._regenerated():
            cells.add(cell, outcome)
            if item is not None:
                self.item_ids.append(item.item_id)
        for item in self._ready_items():
            cells.add((item.lang, item.perturbation, item.severity), "emitted")
            self.item_ids.append(item.item_id)
        self.audit: list[PerturbationAudit] = cells.audit()
        self.segmentation: list[Segmentation] = _segmentation(sentences)
        self.shard: Shard | None = None
        self.shuffled = False  # items in the interleaved seeded order (``ordered``: the engine's feed)
        self.stratified = True  # the feed's order within a language (``interleaved``)
        self.grouped = False  # … and a reference's items together (``interleaved``)
        self._interleaved: dict[tuple[bool, bool], ItemIds] = {}

    def _survey(self, cells: AuditTally, sentences: dict[str, list[int]]) -> None:
        """The one pass over the perturbed items at construction: each cell's outcome into
        ``cells``, each item's id into ``item_ids``, each text reference's sentence count into
        ``sentences``, and what later passes (``items``) replay from."""
        # The survey's outcome of every perturbed cell (text, then code-switched), one byte
        # each (``_OUTCOMES``): later passes replay them (``items``) instead of regenerating.
        self._surveyed: list[bytearray] = []
        # What the survey keeps of its perturbed items, by kind, for later passes (``items``):
        # the items themselves when their texts fit in ``HOLD_BYTES`` (a pass yields them as
        # they are); else their texts packed (``PackedTexts``, ~3 % of their size: a pass
        # rebuilds the items); past the bound packed too, nothing (a pass perturbs again).
        self._held: list[list[Item]] = []
        self._packed: list[PackedTexts | None] = []
        whole = self._expected_bytes() <= self.HOLD_BYTES
        room = self.HOLD_BYTES
        for kind, sources in self._perturbed():
            if kind == "text":
                sources = _counting(sources, sentences)
            room = self._survey_kind(kind, sources, cells, whole, room)
        if room < 0:  # more than the estimate said: hold none (its memory stays what it was, bench/full_plan.py)
            for kept in self._held:
                kept.clear()

    def _survey_kind(self, kind: ItemKind, sources: Iterable, cells: AuditTally, whole: bool, room: int) -> int:
        """The survey of one kind's sources: its outcome codes, and its items held whole
        (while ``whole`` and ``room`` bytes are left) or packed; returns the room left."""
        codes = bytearray()
        held: list[Item] = []
        packed = None if whole else PackedTexts()
        for cell, item, outcome in generate(sources, self.perturbations, self.seed, perturb_reference, kind=kind):
            cells.add(cell, outcome)
            codes.append(_OUTCOMES.index(outcome))
            if item is None:
                continue
            self.item_ids.append(item.item_id)
            if whole and room >= 0:
                room -= _text_bytes(item)
                held.append(item)
            elif packed is not None:
                packed.add(item)
                if packed.nbytes > self.HOLD_BYTES:
                    packed = None
        if packed is not None:
            packed.close()
        self._surveyed.append(codes)
        self._held.append(held)
        self._packed.append(packed if packed is not None and packed.nbytes <= self.HOLD_BYTES else None)
        return room

    # The survey's items are kept whole up to this many bytes of their texts (``_text_bytes``:
    # ~200 bytes of id and fields and the perturbed text; the reference's text is the
    # reference's own), their texts packed up to as many bytes (~1.2 MB for a 118,000-call
    # plan; a corpus of references far past zlib's 32 KB window packs poorly).
    HOLD_BYTES = 32 << 20

    def _expected_bytes(self) -> int:
        """About what holding every perturbed item whole would cost, before any is made: each
        source's text (as ``_text_bytes`` counts it) once per perturbation and severity. A
        plan past ``HOLD_BYTES`` holds none whole, not even for a while (a transient hold
        raised a 118,000-call audit's peak memory by ~20 MB)."""
        cells = sum(len(severities) for _, severities in self.perturbations)
        return sum(cells * (sys.getsizeof(source.response) + 200)
                   for _, sources in self._perturbed() for source in sources)

    def release(self) -> None:
        """Drop what the survey kept (the passes that need it are over): later passes perturb
        every item again. Shared with this plan's shard and ordered views."""
        for held in self._held:
            held.clear()
        for i in range(len(self._packed)):
            self._packed[i] = None
        script.forget()  # the perturbations' text caches (their entries pin heap blocks)

    @classmethod
    def from_manifest(cls, manifest: Manifest) -> Plan:
        degradations, probes = probe_items.split(text_perturbations(manifest))
        perturbations = [(p.name, list(p.severities)) for p in degradations]
        chosen = corpus.select(manifest)
        plan = cls(chosen.references, perturbations, manifest.seed, chosen.pairs, chosen.removed,
                   manifest.corpus.parallel, chosen.trajectories, manifest.agentic, probes)
        if not plan.n_items:
            raise ManifestError("corpus", f"the plan has no items: {plan.why_empty()}")
        return plan

    def why_empty(self) -> str:
        """Why a plan came out with no item, in words (what ``validate`` and ``audit`` say)."""
        if not (self.references or self.pairs or self.trajectories):
            removed = sum(r.count for r in self.removed)
            return (f"the corpus filters removed all {removed} references" if removed
                    else "the corpus offers no reference in the chosen languages")
        weak = [s.lang for s in self.segmentation if s.weak]
        text = f"every perturbation was a no-op on {len(self.references)} references"
        return text + (f" (segmentation weak in: {', '.join(weak)})" if weak else "")

    def _perturbed(self) -> list[tuple[ItemKind, list]]:
        """The sources of the perturbed text items, by kind: plain and code-switched."""
        return [("text", self.references), ("code_switched", self.code_switched)]

    def _regenerated(self) -> Iterator[tuple]:
        """The items every pass generates afresh (and their no-ops): agentic, then probes."""
        yield from agentic.generate(self.trajectories, self.agentic_perturbations, self.seed)
        yield from probe_items.generate(self.references, self.probes, self.seed)

    def _ready_items(self) -> Iterator[Item]:
        """Items that need no perturbing: labelled pairs and translation tie probes."""
        yield from (pair_item(pair, self.seed) for pair in self.pairs)
        yield from self.tie_probes

    @property
    def languages(self) -> set[str]:
        return {r.lang for r in self.references} | {p.lang for p in self.pairs} | {t.lang for t in self.trajectories}

    @property
    def n_items(self) -> int:
        return len(self.item_ids)

    @property
    def calls_per_judge(self) -> int:
        return len(ORDERS) * len(self.item_ids)

    def items(self) -> Iterator[Item]:
        """Every item, in plan order, regenerated: the perturbed ones replayed from the
        survey (``core.items.replay``: the same items, without re-hashing ids, re-checking
        no-ops or perturbing the cells that emitted nothing), then the agentic ones, then
        the ready ones."""
        ids = iter(self.item_ids)
        for (kind, sources), codes, held, packed in zip(self._perturbed(), self._surveyed, self._held,
                                                        list(self._packed), strict=True):
            kept = list(held)  # a copy: ``release`` may empty the list while this pass runs
            if kept:
                yield from kept
                deque(islice(ids, len(kept)), maxlen=0)  # their ids: taken
                continue
            yield from replay(sources, self.perturbations, self.seed, perturb_reference,
                              map(_OUTCOMES.__getitem__, codes), ids, kind, None if packed is None else iter(packed))
        for _, item, _ in self._regenerated():
            if item is not None:
                yield item
        yield from self._ready_items()

    def sharded(self, shard: Shard | None) -> Plan:
        """This plan narrowed to one shard's keys (the same references: nothing is copied)."""
        narrowed = copy.copy(self)
        narrowed.shard = shard
        return narrowed

    def wants(self, judge_id: str, item_id: str, order: str, sample: int = 0) -> bool:
        """Whether the key is this plan's to judge (always, unless the plan is a shard)."""
        return self.shard is None or self.shard.contains(judge_id, item_id, order, sample)

    def pending(self, judge_id: str, keys: tuple[str, ...], done: DoneSet | None = None,
                wanted: DoneSet | None = None, samples: int = 1) -> Iterator[tuple[Item, str, int]]:
        """The (item, key, sample) triples still to judge for one judge, in plan order: in this
        plan's shard, not in ``done``, and in ``wanted`` when given (a cascade's escalations).
        The one definition the engine, the batch APIs and bench-judge share; ``keys`` is the
        judge's protocol's (both orders, or both answers), ``samples`` its asks of each
        (a presentation's samples come together, sample 0 first). A wanted key is wanted for
        every sample (escalations are named by their sample 0)."""
        check = done is not None and len(done) > 0
        sharded = self.shard is not None
        for item in (self._shuffled_items() if self.shuffled else self.items()):
            for key in keys:
                if wanted is not None and not wanted.contains(judge_id, item.item_id, key):
                    continue
                for sample in range(samples):
                    if sharded and not self.wants(judge_id, item.item_id, key, sample):
                        continue
                    if check and done.contains(judge_id, item.item_id, key, sample):  # type: ignore[union-attr]
                        continue
                    yield item, key, sample

    def ordered(self, stratified: bool = True, grouped: bool = False) -> Plan:
        """This plan with its items in the interleaved seeded order (``interleaved``): the
        engine issues keys so, and a budget, a ``--limit`` or early stopping leaves every
        (language, perturbation) cell equally sampled."""
        narrowed = copy.copy(self)
        narrowed.shuffled, narrowed.stratified, narrowed.grouped = True, stratified, grouped and stratified
        return narrowed

    def interleaved(self, stratified: bool = True, grouped: bool = False) -> ItemIds:
        """Every item id in the feed's seeded order (``order.interleave``): round-robin over
        the languages and, ``stratified``, over a language's cells, ``grouped`` a reference
        at a time. Computed once per choice (one pass over the items), kept packed as
        ``item_ids`` is; a judge's feed is this order with its done keys left out."""
        choice = (stratified, grouped and stratified)
        if choice not in self._interleaved:
            placed = (Placed(i.item_id, i.lang, (i.kind, i.perturbation), i.ref_id) for i in self.items())
            self._interleaved[choice] = ItemIds(interleave(placed, self.seed, *choice))
        return self._interleaved[choice]

    # Items regenerated per window of the seeded order: memory bounded by the window.
    ORDER_WINDOW = 50_000

    def _shuffled_items(self) -> Iterator[Item]:
        """The items in the feed's order, a window of ``ORDER_WINDOW`` places per pass over
        ``items`` (whose order is ``item_ids``'): memory holds one window's items."""
        places = _places(self.item_ids, self.interleaved(self.stratified, self.grouped))
        for start in range(0, len(places), self.ORDER_WINDOW):
            end = start + self.ORDER_WINDOW
            window, at = [], array("q")
            for item, place in zip(self.items(), places, strict=True):
                if start <= place < end:
                    window.append(item)
                    at.append(place)
            yield from (window[k] for k in np.argsort(np.frombuffer(at, dtype=np.int64), kind="stable"))

    def stopping_cells(self, per_perturbation: bool = False) -> dict[str, list[str]]:
        """The stopping cells (plain degradation items, by language or language/perturbation),
        each cell's item ids in the seeded order: the order the engine issues them in
        (``interleaved``, stratified only for cells per perturbation)."""
        cells: dict[str, list[tuple[str, str]]] = {}
        for item in self.items():
            if item.kind != "text":
                continue
            name = f"{item.lang}/{item.perturbation}" if per_perturbation else item.lang
            cells.setdefault(name, []).append((item.ref_id, item.item_id))
        return {c: seeded_cell(self.seed, ids, per_perturbation) for c, ids in cells.items()}

    def _keys(self, judge_slot: str):
        keys = plan_keys(self.item_ids)
        return keys if self.shard is None else keys[self.shard.mask(judge_slot, keys)]

    def calls_for(self, judge_id: str, samples: int = 1) -> int:
        """This judge's planned keys, every sample (in this shard, when the plan is one)."""
        if self.shard is None:
            return self.calls_per_judge * samples
        return sum(len(self._keys(slot(judge_id, s))) for s in range(samples))

    def done_count(self, judge_id: str, done: DoneSet, samples: int = 1) -> int:
        """How many of this judge's planned keys (every sample) already have an ``ok`` record."""
        if self.shard is None:
            return done.count(judge_id, self.item_ids, samples)
        return sum(done.count_keys(name, self._keys(name)) for name in (slot(judge_id, s) for s in range(samples)))
