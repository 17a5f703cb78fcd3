"""What a card may claim: its ✓/✗ verdict, the minimum-items rule, the below-chance flag,
and the rows for languages the plan asked for that have no card.

- ``verdict``: it follows R's interval, since a judge is sampled and R is an estimate:
  ``pass`` (the interval's lower bound at or above ``DEPLOY_R``), ``fail`` (its upper bound
  below), ``uncertain`` (the interval straddles the bar: more items decide it, roughly
  ``items_to_decide``), or a reason the card gets none of these: ``too few items`` (fewer
  than ``MIN_ITEMS``: an interval over a handful of items, two of them possibly the same
  text, says little), ``segmentation weak`` (the language's units average under
  ``plan.WEAK_SENTENCES`` sentences, so the sentence perturbations act on a few
  multi-sentence units only), or ``None`` where R is undefined.
  The numbers are shown in every case; only the verdict is withheld.
- ``unreadable``: more than ``MISCONFIGURED`` (20 %) of the card's replies were invalid (did
  not match the verdict pattern, or gave no score or probabilities). Such a judge is
  misconfigured, not biased: its card claims nothing (no ✓/✗, no below-chance flag, no bias
  advice), and when its overall card is unreadable so is every card of it. See
  ``score/diagnose.py`` for what the report and the CLI say about it.
- ``below_chance``: the accuracy interval lies entirely below 0.5 — the judge prefers the
  degraded answer. Such a judge can be perfectly order-consistent (κ_ord = 1) and get a
  middling R; the flag says that consistency is not correctness.
- Families: degradation items (plain and code-switched perturbations), each labelled-pair
  set (``pairs:<set>``) and agent trajectories (``agentic``) are scored into separate cards
  and never pooled into one language's card; so are the robustness probes (``probes``,
  score/probes.py), whose gold is the reference, except ``self_match``'s: a tie.
"""

from __future__ import annotations

import math

import msgspec

from ..core.items import (
    Segmentation,  # noqa: F401 (re-exported: the plan computes it)
    is_family,
)
from .stats import Interval

DEPLOY_R = 0.65  # the research's deployment threshold for R (and R_agent)
MIN_ITEMS = 30  # a card with fewer items shows its numbers but no verdict
CHANCE = 0.5
# An invalid share above this (overall, or in a card) withholds every claim: the judge is
# misconfigured (its replies do not match its verdict pattern), not biased.
MISCONFIGURED = 0.20
UNREADABLE = "unreadable replies"
PASS, FAIL, UNCERTAIN = "pass", "fail", "uncertain"
DECIDED = (PASS, FAIL, UNCERTAIN)  # the verdicts against the bar (the others withhold one)

DEGRADATION = "degradation"
AGENTIC = "agentic"
PROBES = "probes"


class NotJudged(msgspec.Struct, frozen=True):
    """A language the plan asked for that has no card in a family (for one judge, or for
    every judge when ``judge`` is None), and why."""

    lang: str
    language: str
    family: str  # degradation | pairs:<set> | agentic
    reason: str
    judge: str | None = None


def family(perturbation: str) -> str:
    """The card family of an item, from its perturbation name."""
    if is_family(perturbation, "labelled"):
        return perturbation
    if is_family(perturbation, "agentic"):
        return AGENTIC
    if is_family(perturbation, "probe"):
        return PROBES
    return DEGRADATION


def verdict(reliability: Interval, items: int, weak: bool = False,
            invalid: Interval | None = None) -> str | None:
    if reliability.value is None:
        return None
    if unreadable(invalid):
        return UNREADABLE
    if weak:
        return "segmentation weak"
    if items < MIN_ITEMS:
        return "too few items"
    return against_bar(reliability)


def against_bar(reliability: Interval, bar: float = DEPLOY_R) -> str:
    """pass / fail / uncertain from R's interval against ``bar``. A card without an interval
    (no bootstrap asked) is judged on its point value, the only estimate it has."""
    assert reliability.value is not None
    lo = reliability.value if reliability.lo is None else reliability.lo
    hi = reliability.value if reliability.hi is None else reliability.hi
    if lo >= bar:
        return PASS
    if hi < bar:
        return FAIL
    return UNCERTAIN


def items_to_decide(reliability: Interval, items: int, bar: float = DEPLOY_R) -> int | None:
    """Roughly how many items in all would decide an uncertain card, if R stayed where it is:
    an interval's half-width shrinks as 1/√n, so the side facing the bar (w, from R to that
    bound) must shrink to R's distance from the bar (d): n · (w / d)², rounded up. None when
    the card is not uncertain, or R sits on the bar (no number of items decides it then)."""
    r, lo, hi = reliability.value, reliability.lo, reliability.hi
    if r is None or lo is None or hi is None or items <= 0 or against_bar(reliability, bar) != UNCERTAIN:
        return None
    distance = abs(r - bar)
    width = (r - lo) if r >= bar else (hi - r)
    if distance < 1e-9:
        return None
    return max(items + 1, math.ceil(round(items * (width / distance) ** 2, 6)))  # 4.0000001 is 4


def unreadable(invalid: Interval | None) -> bool:
    """The invalid share passes ``MISCONFIGURED``."""
    return invalid is not None and invalid.value is not None and invalid.value > MISCONFIGURED


def below_chance(*accuracies: Interval | None) -> bool:
    """Every given accuracy interval lies below 0.5 (False when any is missing or has none)."""
    given = [a for a in accuracies if a is not None and a.value is not None]
    return bool(given) and all(a.hi is not None and a.hi < CHANCE for a in given)


def mark(verdict_text: str | None) -> str:
    """The verdict as the renderers show it next to R."""
    return {PASS: " ✓", FAIL: " ✗", UNCERTAIN: " ?", None: ""}.get(verdict_text, f" ({verdict_text})")
