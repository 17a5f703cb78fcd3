"""Views derived from a ReportData that both renderers show (the same numbers in each)."""

from __future__ import annotations

from collections import defaultdict

import msgspec

from ..score import Card, Cards, Change, CompositeCard, Interval, LanguageCard
from ..score.agentic import AgenticCard, AgenticLanguageCard
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
    card: Card | AgenticCard
    worst: LanguageCard | AgenticLanguageCard | None  # the language with the lowest R
    below: int                  # languages with R under the deployment threshold
    languages: int              # languages the plan asked for in this family (cards + not judged)
    family: str = "degradation"  # degradation | pairs:<set> | agentic: where the numbers come from
    not_judged: int = 0         # planned languages without a card (cards.json ``not_judged``)


def _r(card) -> float:
    return -1.0 if card.reliability.value is None else card.reliability.value


def leaderboard(data) -> list[LeaderRow]:
    """Every judge of the report's runs in every item family, best overall R first within a
    family (degradation first, then the labelled sets, then agentic); ties by name and id."""
    order = {"degradation": 0, "agentic": 2}
    rows = []
    for run, family, jc in data.families():
        rated = [lc for lc in jc.languages if lc.card.reliability.value is not None]
        worst = min(rated, key=lambda lc: (lc.card.reliability.value, lc.lang)) if rated else None
        below = sum(lc.card.reliability.value < THRESHOLDS.reliability for lc in rated)
        missing = {n.lang for n in run.cards.not_judged if n.family == family and n.judge in (None, jc.judge)}
        rows.append(LeaderRow(jc.judge, jc.judge_id, run.name, jc.overall, worst, below,
                              len(jc.languages) + len(missing - {lc.lang for lc in jc.languages}),
                              family, len(missing)))
    return sorted(rows, key=lambda r: (order.get(r.family, 1), r.family, -_r(r.card), r.judge, r.judge_id))


def flags(card) -> str:
    """What a card's verdict withholds or warns of, in words ('' when nothing)."""
    out = []
    if card.verdict not in (None, "pass", "fail"):
        out.append(f"no verdict: {card.verdict}")
    if card.below_chance:
        out.append("accuracy below chance: prefers the degraded answer (κ_ord is consistency, not correctness)")
    return "; ".join(out)


def audit_cells(cards: Cards) -> dict[tuple[str, str], list[int]]:
    """(language, perturbation) -> [emitted, skipped, merged], all severities together."""
    cells: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    for row in cards.perturbation_audit:
        cell = cells[(row.lang, row.perturbation)]
        cell[0] += row.emitted
        cell[1] += row.skipped
        cell[2] += row.merged
    return cells


def audit_cell(counts: list[int]) -> str:
    """``emitted / skipped``, with ``+merged`` when severities were merged."""
    emitted, skipped, merged = counts
    return f"{emitted} / {skipped}" + (f" +{merged}" if merged else "")


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
