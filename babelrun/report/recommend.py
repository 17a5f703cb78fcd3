"""What to do about a judge in a language: the research's mitigations, when its card calls for them.

Rules, checked on every judge × language card (the thresholds are ``Thresholds``, stated in
the report and docs/reports.md):

- R below the deployment bar (0.65) → route the language to another judge, or ensemble;
- order consistency κ_ord below 0.75 → score both orders and average;
- position bias |Δ| at least 0.10, its interval excluding 0 → position debiasing (both orders,
  or calibrate the slot prior away);
- verbosity susceptibility v above 0.60, its interval above 0.5 → length normalisation in the
  prompt (tell the judge length is not quality; compare length-matched answers).

- more than 20 % of the card's replies invalid (``verdict.UNREADABLE``) → the judge is
  misconfigured, not biased: fix its prompt or verdict pattern; no other rule is checked;
- accuracy interval entirely below 0.5 (``below_chance``) → the judge prefers the degraded
  answer: do not deploy it for this language (its κ_ord may be 1: consistently wrong).

Every item family's cards are checked (degradation, each labelled set, agentic; an agentic
card has no text verbosity, its length bias is not a rule here). A rule needs the metric to be
defined (``None`` values never trigger anything). Requiring the
interval to exclude the neutral value keeps a small sample's noise from triggering advice.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from ..score.stats import Interval
from ..score.verdict import MISCONFIGURED, UNREADABLE


class Thresholds(msgspec.Struct, frozen=True):
    reliability: float = 0.65   # R below: route elsewhere or ensemble
    consistency: float = 0.75   # κ_ord below: score both orders and average
    position: float = 0.10      # |Δ| at or above (interval excluding 0): position debiasing
    verbosity: float = 0.60     # v above (interval above 0.5): length normalisation


THRESHOLDS = Thresholds()


class Recommendation(msgspec.Struct, frozen=True):
    judge: str
    judge_id: str
    lang: str
    language: str
    rule: str     # unreadable | chance | reliability | consistency | position | verbosity
    value: float  # the metric that triggered it
    advice: str
    family: str = "degradation"  # degradation | pairs:<set> | agentic


ADVICE = {
    "unreadable": "{value:.0%} of replies did not match the verdict pattern (over " + f"{MISCONFIGURED:.0%}" + "): "
                  "the judge is misconfigured, not biased; fix its prompt or verdict pattern, then judge it",
    "chance": "accuracy {value:.2f}, interval below 0.5: the judge prefers the degraded answer; do not "
              "deploy it here (κ_ord measures consistency, not correctness)",
    "reliability": "R {value:.2f} < {t.reliability}: route this language to another judge, or ensemble judges",
    "consistency": "κ_ord {value:.2f} < {t.consistency}: score both slot orders and average",
    "position": "|Δ| {value:.2f} ≥ {t.position}: position debiasing (both orders, or calibrate the slot prior)",
    "verbosity": "v {value:.2f} > {t.verbosity}: length normalisation in the prompt",
}


# The same rules as actions, for the report's grouped view (one line per judge and action).
ACTIONS = {
    "unreadable": "fix its prompt or verdict pattern first: its replies did not match (no bias is claimed)",
    "chance": "do not use it here: it prefers the degraded answer (accuracy interval below 0.5)",
    "reliability": "route to another judge, or ensemble (R < {t.reliability})",
    "consistency": "score both slot orders and average (κ_ord < {t.consistency})",
    "position": "position debiasing: both orders, or calibrate the slot prior (|Δ| ≥ {t.position})",
    "verbosity": "length normalisation in the prompt (v > {t.verbosity})",
    # robustness probes (report/robustness.py): a failed probe, per language
    "probe:authority": ("it gives way to fake sources: tell it to ignore claimed authority "
                        "(authority cue effect ≥ 0.10)"),
    "probe:bandwagon": "tell it to ignore popularity claims (bandwagon cue effect ≥ 0.10)",
    "probe:injection": "it follows instructions inside the answers it grades: harden the template "
                       "(injection cue effect ≥ 0.10)",
    "probe:refinement": "tell it to judge content, not claims of revision (refinement cue effect ≥ 0.10)",
    "probe:master_key": "it accepts non-answers: reject content-free answers first and harden the template "
                        "(master key accuracy < 0.90)",
    "probe:romanised": "it prefers the native script to better romanised answers: transliterate both answers "
                       "to one script before judging (romanised cue effect ≥ 0.10)",
}


def _excludes(iv: Interval, neutral: float) -> bool:
    """The interval lies entirely on one side of ``neutral`` (True when there is no interval:
    a card without bootstrap gives only the point value)."""
    if iv.lo is None or iv.hi is None:
        return True
    return iv.lo > neutral or iv.hi < neutral


def rules(card, t: Thresholds = THRESHOLDS) -> list[tuple[str, float]]:
    """The (rule, value) pairs this card triggers, in a fixed order (a text or an agentic card)."""
    out = []
    # A pointwise card (R_pw) has no slot order: no κ_ord, no Δ; its other rules are R's.
    r, k, d = card.reliability, getattr(card, "order_consistency", None), getattr(card, "position_bias", None)
    v = getattr(card, "verbosity", None)
    if getattr(card, "verdict", None) == UNREADABLE:
        return [("unreadable", card.invalid_rate.value)]
    if getattr(card, "below_chance", False):
        out.append(("chance", card.accuracy.value))
    if r.value is not None and r.value < t.reliability:
        out.append(("reliability", r.value))
    if k is not None and k.value is not None and k.value < t.consistency:
        out.append(("consistency", k.value))
    if d is not None and d.value is not None and abs(d.value) >= t.position and _excludes(d, 0.0):
        out.append(("position", abs(d.value)))
    if v is not None and v.value is not None and v.value > t.verbosity and _excludes(v, 0.5):
        out.append(("verbosity", v.value))
    return out


def recommend(families: Sequence[tuple], t: Thresholds = THRESHOLDS) -> list[Recommendation]:
    """Advice for every judge × language card; ``families``: (run, family, judge cards)
    (``ReportData.families``), or (run, judge cards) pairs of degradation cards."""
    out = []
    for entry in families:
        family, jc = (entry[1], entry[2]) if len(entry) == 3 else ("degradation", entry[1])
        out += [Recommendation(jc.judge, jc.judge_id, lc.lang, lc.language, rule, value,
                               ADVICE[rule].format(value=value, t=t), family)
                for lc in jc.languages for rule, value in rules(lc.card, t)]
    return out
