"""The cards' types: a card per judge, language and perturbation (``Card``), the composite
judges' and drift's comparisons (``Change``, ``McNemar``, ``LanguageDrift``, ``CompositeCard``),
every family's cards together (``Cards``), and cards.json's layout (``RunMeta``, ``encode``,
``decode``). No computation: ``columnar`` computes them.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pyarrow as pa

from ..core.items import PerturbationAudit, Removed, Segmentation
from . import agentic, pointwise, verdict
from .replylang import ReplyLanguage
from .stats import Interval


class Card(msgspec.Struct, frozen=True):
    items: int
    presentations: int
    accuracy: Interval
    position_bias: Interval
    verbosity: Interval
    order_consistency: Interval
    reliability: Interval
    tie_rate: Interval
    invalid_rate: Interval
    # Same verdict in both orders, tie/tie included (score/metrics.py); a default, so a
    # cards.json written before it decodes.
    verdict_consistency: Interval = Interval(None, None, None, 0)
    # Soft-verdict judges: the mean of P(reference's slot) − P(perturbed's slot) over the
    # presentations that carry probabilities (no interval yet). None for other judges.
    soft_margin: Interval | None = None
    # What the card may claim (score/verdict.py): pass / fail against the deployment R, or
    # why neither (too few items, segmentation weak); and whether accuracy is below chance.
    verdict: str | None = None
    below_chance: bool = False
    # Labelled sets: how many of the card's pairs are tie-labelled (gold: neither better; a
    # ``tie`` verdict is correct). Absent from cards.json where there are none.
    tie_labelled: int | msgspec.UnsetType = msgspec.UNSET
    # Early stopping (engine/stopping.py): "stopped at n = … of …"; the reliability interval
    # is then the anytime-valid confidence sequence's, not the bootstrap's (docs/stopping.md).
    stopped: str | msgspec.UnsetType = msgspec.UNSET  # absent from cards.json where not stopped
    # Judges whose replies hold prose: the share not in the item's language, and accuracy split
    # by it (score/replylang.py). Absent from cards.json where the replies hold no prose.
    reply_language: ReplyLanguage | msgspec.UnsetType = msgspec.UNSET
    # A judge asked ``samples: k`` > 1 (score/metrics.py): the share of a presentation's sample
    # pairs that agree, overall and per order. Absent from cards.json for a judge asked once.
    self_consistency: Interval | msgspec.UnsetType = msgspec.UNSET
    self_consistency_ref_first: Interval | msgspec.UnsetType = msgspec.UNSET
    self_consistency_pert_first: Interval | msgspec.UnsetType = msgspec.UNSET


class PerturbationCard(msgspec.Struct, frozen=True):
    perturbation: str
    card: Card


class LanguageCard(msgspec.Struct, frozen=True):
    lang: str
    language: str
    card: Card
    perturbations: list[PerturbationCard]


class JudgeCards(msgspec.Struct, frozen=True):
    judge: str
    judge_id: str
    overall: Card
    languages: list[LanguageCard]


class Change(msgspec.Struct, frozen=True):
    """One metric in both runs (value and interval each) and its change B − A."""

    metric: str
    a: Interval
    b: Interval
    delta: float | None
    lo: float | None
    hi: float | None


class McNemar(msgspec.Struct, frozen=True):
    b: int  # presentations correct in A only
    c: int  # presentations correct in B only
    p: float


class LanguageDrift(msgspec.Struct, frozen=True):
    lang: str
    language: str
    items: int
    presentations: int
    changes: list[Change]
    mcnemar: McNemar


class CompositeCard(msgspec.Struct, frozen=True):
    """A mitigation judge's facts beside its card (score/composite.py): what it costs and
    what it changed against its base judge, on the same presentations."""

    name: str
    kind: str
    judge_id: str
    inner: list[str]  # the judges it is computed from
    base: str
    targets: list[str]  # the card metrics the mitigation is meant to move
    calls_per_decision: float  # inner calls one deployed decision costs
    presentations: int
    unresolved: int  # presentations it could not decide for want of an inner record
    escalation_rate: Interval | None = None  # cascade: share the strong judge decided
    slot_bias: dict[str, float] | None = None  # calibrated: β per language ("all": pooled)
    calibration_items: int | None = None  # calibrated: held-out items (never scored)
    change: list[LanguageDrift] = []  # composite − base: overall first, then per language


class FamilyCards(msgspec.Struct, frozen=True):
    """The cards of one labelled-pair set (``pairs:<set>``): human-labelled pairs, scored
    apart from the degradation items so a language's R stays comparable across languages."""

    family: str
    judges: list[JudgeCards]


class ProbeCard(Card, frozen=True):
    """A robustness probe's card (score/probes.py): the usual fields over its cued
    presentations (self_match: ``accuracy`` is its tie rate, a tie being the gold), plus the
    paired cue metrics where they apply (cue probes) and the self match's slot preference."""

    # accuracy on the clean twins − accuracy with the cue, on the same (reference, order)
    cue_effect: Interval | None = None
    # share of cued presentations where the judge named the cued (worse) answer
    cue_success: Interval | None = None
    mcnemar: McNemar | None = None  # b: right on the twin only; c: right with the cue only
    slot_preference: Interval | None = None  # self_match: P(slot A) − P(slot B)
    # pointwise cue probes: the cued answer's score − its clean twin's, item by item (the
    # score a cue buys, which a tie with the reference hides from cue_success)
    score_lift: Interval | None = None


class ProbePerturbationCard(msgspec.Struct, frozen=True):
    perturbation: str  # probe:authority, probe:authority@en, …
    card: ProbeCard


class ProbeLanguageCard(msgspec.Struct, frozen=True):
    lang: str
    language: str
    card: ProbeCard  # every cue probe and master key of the language pooled
    perturbations: list[ProbePerturbationCard]


class ProbeJudgeCards(msgspec.Struct, frozen=True):
    judge: str
    judge_id: str
    overall: ProbeCard
    languages: list[ProbeLanguageCard]
    # each probe over every language (the report's judge × probe matrix)
    probes: list[ProbePerturbationCard] = []


class ProbeFamilyCards(msgspec.Struct, frozen=True):
    family: str  # "probes" (pairwise judges) or "probes:pointwise"
    judges: list[ProbeJudgeCards]


class Cards(msgspec.Struct, frozen=True):
    judges: list[JudgeCards]  # degradation items (plain and code-switched perturbations)
    perturbation_audit: list[PerturbationAudit]
    bootstrap: int
    confidence: float
    removed_by_filters: list[Removed] = []
    composites: list[CompositeCard] = []
    # Agent-trajectory items are scored apart from the text cards (score/agentic.py).
    agentic: list[agentic.AgenticJudgeCards] = []
    # Pointwise judges (score/pointwise.py); absent from cards.json when the run has none.
    pointwise: list[pointwise.PointwiseJudgeCards] | msgspec.UnsetType = msgspec.UNSET
    pairs: list[FamilyCards] = []
    # Every (language, family) the plan asked for and that has no card, with the reason;
    # and how each language's references segment (plan.json).
    not_judged: list[verdict.NotJudged] = []
    segmentation: list[Segmentation] = []
    # Robustness probes (score/probes.py), never pooled with the other families; absent from
    # cards.json when the run has none.
    probes: list[ProbeFamilyCards] | msgspec.UnsetType = msgspec.UNSET

    def to_arrow(self, run: str = "") -> pa.Table:
        """One long table, a row per (judge, language, perturbation, metric): score/tidy.py."""
        from . import tidy

        return tidy.table(self, run)

    def to_pandas(self, run: str = "") -> Any:
        """``to_arrow`` as a pandas DataFrame (pandas must be installed)."""
        return self.to_arrow(run).to_pandas()

    def to_polars(self, run: str = "") -> Any:
        """``to_arrow`` as a polars DataFrame (polars must be installed)."""
        import polars

        return polars.from_arrow(self.to_arrow(run))


# cards.json's layout: bump when a field is renamed or removed (additions keep the version).
SCHEMA_VERSION = 1


class RunMeta(msgspec.Struct, frozen=True):
    """Which run a cards.json describes. No paths or clocks: the same log gives the same bytes
    wherever it is scored."""

    name: str
    babelrun_version: str  # the version that planned the run (run.yaml)
    seed: int
    judges: dict[str, str]  # name -> judge_id
    planned_items: int


def encode(cards: Cards, run: RunMeta | None = None) -> bytes:
    """cards.json: ``schema_version`` and the run's metadata first, then the cards."""
    return b"".join(encoded(cards, run))


def encoded(cards: Cards, run: RunMeta | None = None) -> list[bytes | memoryview]:
    """``encode``'s bytes in pieces, to be written one after another: the head (schema
    version, run metadata) and the cards formatted apart, the head's members spliced before
    the cards' (the bytes of one indented object with the head first), with neither a
    builtins copy of every card nor a copy of the whole document (the cards of a 500-language
    run with probes are ~25 MB indented: one copy more was that much more peak memory)."""
    head = {"schema_version": SCHEMA_VERSION, "run": run} if run is not None else {"schema_version": SCHEMA_VERSION}
    top = msgspec.json.format(msgspec.json.encode(head), indent=2)  # b'{\n  ...\n}'
    body = msgspec.json.encode(cards)
    if body == b"{}":
        return [top, b"\n"]
    formatted = msgspec.json.format(body, indent=2)  # b'{\n  "judges": ...\n}'
    del body
    return [memoryview(top)[:-2], b",\n", memoryview(formatted)[2:], b"\n"]


def decode(data: bytes) -> Cards:
    """A cards.json (any schema version up to ours) back into Cards."""
    return msgspec.json.decode(data, type=Cards)
