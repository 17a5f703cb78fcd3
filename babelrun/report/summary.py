"""Views derived from a ReportData that both renderers show (the same numbers in each)."""

from __future__ import annotations

import msgspec

from ..score import Card, Cards, Change, CompositeCard, Interval, LanguageCard
from .recommend import THRESHOLDS

# The card metrics a mitigation's change is shown for, with their labels.
COMPARED = (("reliability", "R"), ("accuracy", "accuracy"), ("position_bias", "Δ (slot A)"),
            ("verbosity", "v (longer)"), ("order_consistency", "κ_ord"))


def number(iv: Interval | None, signed: bool = False) -> str:
    """An interval as ``value [lo, hi]`` to two decimals; – where there is none."""
    if iv is None or iv.value is None:
        return "–"
    fmt = "{:+.2f}" if signed else "{:.2f}"
    text = fmt.format(iv.value)
    if iv.lo is not None and iv.hi is not None:
        text += f" [{fmt.format(iv.lo)}, {fmt.format(iv.hi)}]"
    return text


class MitigationRow(msgspec.Struct, frozen=True):
    """A mitigation judge beside its base, as both renderers show it."""

    card: CompositeCard
    changes: list[Change | None]  # overall, one per COMPARED metric (None: not compared)
    targeted: list[bool]  # per COMPARED metric: what the mitigation is meant to move
    mcnemar_p: float | None
    note: str  # what else its kind measures: the escalation rate, the slot bias


def mitigation_rows(cards: Cards) -> list[MitigationRow]:
    rows = []
    for comp in cards.composites:
        overall = comp.change[0] if comp.change else None
        by_metric = {c.metric: c for c in overall.changes} if overall else {}
        note = (f"escalated {number(comp.escalation_rate)}" if comp.escalation_rate is not None
                else f"slot bias β = {comp.slot_bias['all']:+.2f} (pooled; {comp.calibration_items} held-out items)"
                if comp.slot_bias is not None else "")
        rows.append(MitigationRow(comp, [by_metric.get(m) for m, _ in COMPARED],
                                  [m in comp.targets for m, _ in COMPARED],
                                  overall.mcnemar.p if overall else None, note))
    return rows


class LeaderRow(msgspec.Struct, frozen=True):
    judge: str
    judge_id: str
    run: str
    card: Card
    worst: LanguageCard | None  # the language with the lowest R
    below: int                  # languages with R under the deployment threshold
    languages: int


def _r(card: Card) -> float:
    return -1.0 if card.reliability.value is None else card.reliability.value


def leaderboard(data) -> list[LeaderRow]:
    """Every judge of the report's runs, best overall R first (ties by name and id)."""
    rows = []
    for run, jc in data.judges():
        rated = [lc for lc in jc.languages if lc.card.reliability.value is not None]
        worst = min(rated, key=lambda lc: (lc.card.reliability.value, lc.lang)) if rated else None
        below = sum(lc.card.reliability.value < THRESHOLDS.reliability for lc in rated)
        rows.append(LeaderRow(jc.judge, jc.judge_id, run.name, jc.overall, worst, below, len(jc.languages)))
    return sorted(rows, key=lambda r: (-_r(r.card), r.judge, r.judge_id))


def ranking(judges: list[str], ranks: list[list[int]], lang: int) -> str:
    """Judges best first in one language; '>' between ranks, '=' within a tie."""
    order = sorted(range(len(judges)), key=lambda j: (ranks[j][lang], judges[j]))
    text = judges[order[0]]
    for prev, j in zip(order, order[1:], strict=False):
        text += (" = " if ranks[j][lang] == ranks[prev][lang] else " > ") + judges[j]
    return text


def cbc_rows(c) -> list[tuple[str, str, str]]:
    """(language, raw ranking, calibrated ranking) per language of a Calibration."""
    return [(lang, ranking(c.judges, c.ranks_raw, i), ranking(c.judges, c.ranks_calibrated, i))
            for i, lang in enumerate(c.langs)]


# ---- pointwise judges -----------------------------------------------------------------------

POINTWISE_HEADER = ["judge", "language", "items", "R_pw", "discrimination acc.", "tie rate", "margin",
                    "v (longer)", "pad gain", "stability", "scale offset", "invalid"]
SIDE_BY_SIDE_HEADER = ["language", "pairwise judge", "accuracy", "Δ (slot A)", "pointwise judge",
                       "discrimination acc.", "scale offset"]


def pointwise_rows(cards: Cards) -> list[list[str]]:
    """One row per pointwise judge and language (``all`` first), as plain text cells."""
    rows = []
    for jc in cards.pointwise or []:
        for label, card, offset in [("all", jc.overall, None)] + [
                (f"{lc.lang} ({lc.language})", lc.card, lc.scale_offset) for lc in jc.languages]:
            rows.append([jc.judge, label, str(card.items), number(card.reliability), number(card.discrimination),
                         number(card.tie_rate), number(card.margin, signed=True), number(card.verbosity),
                         number(card.verbosity_gain, signed=True), number(card.stability),
                         number(offset, signed=True), number(card.invalid_rate)])
    return rows


def side_by_side_rows(cards: Cards) -> list[list[str]]:
    """Each language's pairwise judges (accuracy, position bias Δ) beside its pointwise
    judges (discrimination, scale offset): which failure this run's judges suffer more."""
    if not cards.pointwise or not cards.judges:
        return []
    pair = {(j.judge, lc.lang): lc.card for j in cards.judges for lc in j.languages}
    point = {(j.judge, lc.lang): lc for j in cards.pointwise for lc in j.languages}
    langs = sorted({lang for _, lang in pair} & {lang for _, lang in point})
    rows = []
    for lang in langs:
        for pj in cards.judges:
            for qj in cards.pointwise:
                a, b = pair.get((pj.judge, lang)), point.get((qj.judge, lang))
                if a is None or b is None:
                    continue
                rows.append([f"{lang} ({b.language})", pj.judge, number(a.accuracy), number(a.position_bias, True),
                             qj.judge, number(b.card.discrimination), number(b.scale_offset, signed=True)])
    return rows
