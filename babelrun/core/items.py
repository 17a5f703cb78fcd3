"""Gold pairs: a reference against a controlled degradation of it.

``item_id`` is a content hash (blake2b) of everything that defines the pair and the seed,
never Python's salted ``hash()``; each item's RNG is seeded from its id, so an item is the
same on every machine and in every run, whatever else the plan holds.
"""

from __future__ import annotations

import hashlib
import random
import zlib
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Literal

import msgspec

ItemKind = Literal["text", "labelled", "code_switched", "tie_probe", "agentic", "probe", "labelled_tie"]
# Item families whose perturbation names carry a prefix in the cards: code-switched items
# are "cs:truncate", …, agent trajectories "agent:step_pad", …, so they never share a card
# cell with the plain items.
FAMILY_PREFIX = {"text": "", "code_switched": "cs:", "agentic": "agent:"}
PAIRS_PREFIX = "pairs:"  # labelled pairs: "pairs:<set>" (and "pairs:<set>@<mix>")
LABELLED_KINDS = ("labelled", "labelled_tie")  # labelled pairs: decisive gold, and tie gold
TIE_PROBE_PREFIX = "tie_probe:"  # translation tie probes: "tie_probe:<pivot>"
PROBE_PREFIX = "probe:"  # robustness probes: "probe:authority", "probe:clean", … (perturb/probes.py)


def bare_name(perturbation: str) -> str:
    """A perturbation's own name, its family's prefix removed (``agent:step_pad`` ->
    ``step_pad``; a labelled set's name for ``pairs:<set>``). The one place that knows the
    prefixes' shape."""
    return perturbation.split(":", 1)[-1]


def is_family(perturbation: str, kind: ItemKind) -> bool:
    """Whether a perturbation name belongs to item family ``kind``."""
    prefix = {"labelled": PAIRS_PREFIX, "tie_probe": TIE_PROBE_PREFIX,
              "probe": PROBE_PREFIX}.get(kind, FAMILY_PREFIX.get(kind, ""))
    if not prefix:  # plain text items carry no prefix: any name without a family's
        return ":" not in perturbation
    return perturbation.startswith(prefix)


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
    # A named language mix (``zh-en-switched``); empty for the plain language ``lang``.
    condition: str = ""
    # Which model, and model family, wrote each output (self-preference); empty: unknown.
    better_model: str = ""
    worse_model: str = ""
    better_family: str = ""
    worse_family: str = ""
    # The data labels the pair a tie (neither output better): ``better`` is then the data's
    # output_1 and ``worse`` its output_2, and its items are of kind ``labelled_tie``.
    tie: bool = False
    # Earlier turns of a multi-turn conversation, oldest first: (question, the better
    # output's answer, the worse output's answer); ``prompt``/``better``/``worse`` are the last.
    turns: tuple[tuple[str, str, str], ...] = ()

    @property
    def perturbation(self) -> str:
        """The name its items carry: ``pairs:<set>``, ``pairs:<set>@<mix>`` for a mix."""
        return f"pairs:{self.set_name}" + (f"@{self.condition}" if self.condition else "")


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
    # The model family that wrote the reference / the perturbed answer, where the data says
    # (labelled pairs): what a judge's self-preference is measured on. Not part of item_id.
    ref_family: str = ""
    pert_family: str = ""
    reference_answer: str = ""  # the corpus's reference answer, for reference-guided templates
    # A robustness probe's cue: which probe, cue language, text and placement
    # (``authority|en|1|between:2``; perturb/probes.py). Empty for every other item.
    cue: str = ""
    # Earlier turns (labelled multi-turn pairs), oldest first: (question, the reference's
    # answer, the perturbed answer's), for multi-turn templates (MT-Bench's {answer_a_1}).
    turns: tuple[tuple[str, str, str], ...] = ()


class PerturbationAudit(msgspec.Struct, frozen=True):
    """How many items each (language, perturbation, severity) emitted, skipped as no-ops, and
    merged into a lower severity of the same perturbation that gave the identical text."""

    lang: str
    perturbation: str
    severity: float
    emitted: int
    skipped: int
    merged: int = 0


class Segmentation(msgspec.Struct, frozen=True):
    """How a language's text references split into sentences (computed by the plan): the
    sentence perturbations need at least two per unit. ``weak``: the units average fewer
    than ``plan.WEAK_SENTENCES``."""

    lang: str
    units: int
    sentences_per_unit: float
    weak: bool


# What became of one (source, perturbation, severity): an item, a no-op (the perturbation
# changed nothing), or a merge (the same text as a lower severity's item: one item, not two).
Outcome = Literal["emitted", "no-op", "merged"]


def item_id(kind: str, ref: Reference, perturbation: str, severity: float, seed: int, *extra: str) -> str:
    """``extra``: what else defines an item of this kind (an agentic item's focus); text
    items have none, so their ids are what they always were."""
    fields = (kind, ref.lang, ref.ref_id, ref.prompt, ref.response, perturbation, repr(severity), str(seed), *extra)
    guide = getattr(ref, "reference_answer", "")
    if guide:  # only where there is one: ids without it stay what they were
        fields = (*fields, "reference_answer", guide)
    return hashlib.blake2b("\x1f".join(fields).encode(), digest_size=10).hexdigest()


def _same_text(a: str, b: str) -> bool:
    return _squeezed(a) == _squeezed(b)


Cell = tuple[str, str, float]  # (lang, perturbation, severity)
# How an item kind degrades its source: (source, perturbation name, severity, rng) -> the
# perturbed text, comparable with ``source.response``.
Perturber = Callable[[Reference, str, float, random.Random], str]


def generate(references: Iterable[Reference], perturbations: list[tuple[str, list[float]]],
             seed: int, perturb: Perturber, kind: ItemKind = "text",
             extra: tuple[str, ...] = ()) -> Iterator[tuple[Cell, Item | None, Outcome]]:
    """Every (reference, perturbation, severity) in plan order: its cell, its item (or
    ``None``) and what became of it. A perturbation that changed nothing (or only
    whitespace) is a no-op: the item would carry a false gold label, so it is never emitted,
    only counted. A severity whose text is identical to a lower severity's item of the same
    reference and perturbation (``truncate`` at 0.3 and 0.6 of a two-sentence text) is
    merged into it: one item keeps the lower severity, so the same call is not made twice
    and the intervals do not count one text as two.

    A source is anything with a Reference's fields (``lang, ref_id, prompt, response``):
    agentic items come from trajectories serialised into ``response`` (``babelrun.agentic``),
    with their own ``perturb`` and their focus in ``extra``."""
    prefix = FAMILY_PREFIX[kind]
    for ref in references:
        unchanged = _squeezed(ref.response)
        for name, severities in perturbations:
            texts: set[str] = set()  # this (reference, perturbation)'s items so far, spaces out
            for severity in sorted(severities):
                iid = item_id(kind, ref, name, severity, seed, *extra)
                rng = random.Random(int(iid, 16))
                perturbed = perturb(ref, name, severity, rng)
                cell = (ref.lang, prefix + name, severity)
                key = _squeezed(perturbed)
                if key == unchanged:
                    yield cell, None, "no-op"
                elif key in texts:
                    yield cell, None, "merged"
                else:
                    texts.add(key)
                    yield cell, Item(iid, kind, ref.lang, ref.ref_id, ref.prompt, ref.response, perturbed,
                                     prefix + name, severity, len(ref.response), len(perturbed),
                                     reference_answer=getattr(ref, "reference_answer", "")), "emitted"


def replay(references: Iterable[Reference], perturbations: list[tuple[str, list[float]]], seed: int,
           perturb: Perturber, outcomes: Iterator[Outcome], ids: Iterator[str],
           kind: ItemKind = "text", texts: Iterator[str] | None = None) -> Iterator[Item]:
    """The items ``generate`` emitted for the same arguments, again, from what it reported:
    ``outcomes`` (one per cell, in its order) and the emitted items' ids. A plan's passes
    after its survey use it: no id is hashed, no no-op or merge is checked, and a cell that
    emitted nothing is not perturbed again. Each item is identical to ``generate``'s (the
    perturbation is deterministic given the RNG seeded from the id). ``texts``: the emitted
    items' perturbed texts, in order, kept by the caller (``PackedTexts``): nothing is
    perturbed again."""
    prefix = FAMILY_PREFIX[kind]
    for ref in references:
        guide = getattr(ref, "reference_answer", "")
        for name, severities in perturbations:
            for severity in sorted(severities):
                if next(outcomes) != "emitted":
                    continue
                iid = next(ids)
                perturbed = (next(texts) if texts is not None
                             else perturb(ref, name, severity, random.Random(int(iid, 16))))
                yield Item(iid, kind, ref.lang, ref.ref_id, ref.prompt, ref.response, perturbed,
                           prefix + name, severity, len(ref.response), len(perturbed), reference_answer=guide)


class PackedTexts:
    """Perturbed texts kept for later passes, compressed: one zlib block per reference, with
    the reference's own text as the preset dictionary (a degraded answer is mostly its
    reference's text). A 118,000-call plan's 43.8 MB of perturbed text packs into 1.2 MB in
    0.14 s and unpacks in 0.09 s; perturbing it again took ~3 s, in the engine's event loop.
    ``add`` the texts in plan order; iterating yields them back in that order."""

    def __init__(self) -> None:
        # (the reference's text, each perturbed text's length in characters, the block)
        self._blocks: list[tuple[str, array[int], bytes]] = []
        self._source: str | None = None
        self._texts: list[str] = []
        self.nbytes = 0  # what the blocks hold (the references' texts are the references')

    def add(self, item: Item) -> None:
        if item.reference is not self._source:  # the next reference's items begin
            self.close()
            self._source = item.reference
        self._texts.append(item.perturbed)

    def close(self) -> None:
        """Pack the texts added since the last reference's block."""
        if self._source is None or not self._texts:
            return
        packer = zlib.compressobj(1, zdict=_utf8(self._source))
        block = packer.compress(_utf8("".join(self._texts))) + packer.flush()
        lengths = array("I", map(len, self._texts))
        self._blocks.append((self._source, lengths, block))
        self.nbytes += len(block) + lengths.itemsize * len(lengths) + 120
        self._texts = []

    def __iter__(self) -> Iterator[str]:
        for source, lengths, block in self._blocks:
            unpacker = zlib.decompressobj(zdict=_utf8(source))
            joined = (unpacker.decompress(block) + unpacker.flush()).decode("utf-8", "surrogatepass")
            at = 0
            for n in lengths:
                yield joined[at: at + n]
                at += n


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # corpus text may hold a lone surrogate (JSON allows it)


def _squeezed(text: str) -> str:
    return "".join(text.split())


class AuditTally:
    """``audit_counts``' counts, taken as the (cell, outcome) pairs come: a plan's survey
    keeps a count per distinct cell, not a tuple per item (~25 MB of small objects for a
    127,000-item plan, whose freed pages Python's allocator kept through the audit)."""

    def __init__(self) -> None:
        self._counts: dict[Outcome, Counter[Cell]] = {"emitted": Counter(), "no-op": Counter(), "merged": Counter()}

    def add(self, cell: Cell, outcome: Outcome) -> None:
        self._counts[outcome][cell] += 1

    def audit(self) -> list[PerturbationAudit]:
        emitted, skipped, merged = self._counts["emitted"], self._counts["no-op"], self._counts["merged"]
        return [PerturbationAudit(lang, name, sev, emitted[c], skipped[c], merged[c])
                for c in sorted(set(emitted) | set(skipped) | set(merged)) for lang, name, sev in [c]]


def audit_counts(cells: Iterable[tuple[Cell, Outcome]]) -> list[PerturbationAudit]:
    """Emitted / skipped / merged per cell from (cell, outcome) pairs."""
    tally = AuditTally()
    for cell, outcome in cells:
        tally.add(cell, outcome)
    return tally.audit()


def pair_item(pair: LabelledPair, seed: int) -> Item:
    """A labelled pair as an item: the better output in the reference's place, the worse in
    the perturbed one's, under the perturbation name ``pairs:<set>`` (severity 0;
    ``pairs:<set>@<mix>`` for a named mix, whose name joins the id)."""
    fields: tuple[str, ...] = ("labelled", pair.lang, pair.pair_id, pair.prompt, pair.better, pair.worse, str(seed))
    fields += (pair.condition,) if pair.condition else ()
    fields += ("tie",) if pair.tie else ()
    fields += tuple(text for turn in pair.turns for text in ("turn", *turn))  # none: the ids as before
    iid = hashlib.blake2b("\x1f".join(fields).encode(), digest_size=10).hexdigest()
    kind: ItemKind = "labelled_tie" if pair.tie else "labelled"
    return Item(iid, kind, pair.lang, pair.pair_id, pair.prompt, pair.better, pair.worse,
                pair.perturbation, 0.0, len(pair.better), len(pair.worse),
                pair.better_family, pair.worse_family, turns=pair.turns)


def build(references: Iterable[Reference], perturbations: Iterable[tuple[str, list[float]]],
          seed: int, perturb: Perturber) -> tuple[list[Item], list[PerturbationAudit]]:
    """All items of a plan in memory, with the perturbation audit (small plans, tests)."""
    outcomes = list(generate(references, list(perturbations), seed, perturb))
    return [it for _, it, _ in outcomes if it is not None], audit_counts((c, o) for c, _, o in outcomes)
