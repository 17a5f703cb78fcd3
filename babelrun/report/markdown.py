"""The cards as Markdown. Corpus and judge text never appears here, only numbers and codes;
codes and names are still escaped for table cells."""

from __future__ import annotations

from collections import defaultdict

from ..score import Card, Cards, CompositeCard, Interval
from ..score.agentic import AgenticCard

THRESHOLD = 0.65  # the research's deployment threshold for R


def _cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace("\n", " ")


def _num(iv: Interval, signed: bool = False) -> str:
    if iv.value is None:
        return "–"
    fmt = "{:+.2f}" if signed else "{:.2f}"
    text = fmt.format(iv.value)
    if iv.lo is not None and iv.hi is not None:
        text += f" [{fmt.format(iv.lo)}, {fmt.format(iv.hi)}]"
    return text


def _row(label: str, card: Card) -> str:
    flag = "" if card.reliability.value is None else (" ✓" if card.reliability.value >= THRESHOLD else " ✗")
    return (
        f"| {_cell(label)} | {card.items} | {_num(card.reliability)}{flag} | {_num(card.accuracy)} | "
        f"{_num(card.position_bias, signed=True)} | {_num(card.verbosity)} | "
        f"{_num(card.order_consistency)} | {card.tie_rate.value or 0:.2f} | {card.invalid_rate.value or 0:.2f} |"
    )


_HEADER = (
    "| {what} | items | R | accuracy | Δ (slot A) | v (longer) | κ_ord | ties | invalid |\n"
    "|---|---:|---|---|---|---|---|---:|---:|"
)


def render(cards: Cards) -> str:
    pct = round(cards.confidence * 100)
    out = [
        "# babelrun reliability cards",
        "",
        f"Intervals: {pct}% item-clustered bootstrap ({cards.bootstrap} resamples). "
        f"✓/✗: R at or above / below the {THRESHOLD} deployment threshold. "
        "Definitions: README, *Metrics*.",
        "",
    ]
    for judge in cards.judges:
        out += [f"## Judge `{_cell(judge.judge)}` ({judge.judge_id})", "", _HEADER.format(what="language")]
        out.append(_row("all", judge.overall))
        out += [_row(f"{lc.lang} ({lc.language})", lc.card) for lc in judge.languages]
        out += ["", "### By perturbation", "", _HEADER.format(what="language / perturbation")]
        for lc in judge.languages:
            out += [_row(f"{lc.lang} / {pc.perturbation}", pc.card) for pc in lc.perturbations]
        out.append("")
    out += _agentic(cards)
    out += _mitigations(cards)
    out += _audit(cards)
    return "\n".join(out) + "\n"


_AGENTIC_HEADER = (
    "| language | items | R_agent | tool acc. | argument acc. | hallucination det. | length v | Δ (slot A) "
    "| κ_ord | not measured |\n"
    "|---|---:|---|---|---|---|---|---|---|---|"
)


def _opt(iv: Interval | None, signed: bool = False) -> str:
    return "–" if iv is None else _num(iv, signed)


def _agentic_row(label: str, card: AgenticCard) -> str:
    r = card.reliability.value
    flag = "" if r is None else (" ✓" if r >= THRESHOLD else " ✗")
    return (f"| {_cell(label)} | {card.items} | {_num(card.reliability)}{flag} | {_opt(card.tool_accuracy)} | "
            f"{_opt(card.argument_accuracy)} | {_opt(card.hallucination_detection)} | {_opt(card.length_bias)} | "
            f"{_num(card.position_bias, signed=True)} | {_num(card.order_consistency)} | "
            f"{_cell(', '.join(card.not_measured)) or '–'} |")


def _agentic(cards: Cards) -> list[str]:
    out = []
    for judge in cards.agentic:
        out += [f"## Agentic: judge `{_cell(judge.judge)}` ({judge.judge_id})", "",
                "Agent trajectories, scored apart from the text cards. R_agent gates the families' "
                "accuracy like R; a family not measured is left out and the weights renormalised.", "",
                _AGENTIC_HEADER, _agentic_row("all", judge.overall)]
        out += [_agentic_row(f"{lc.lang} ({lc.language})", lc.card) for lc in judge.languages]
        out += ["", "Accuracy by agentic perturbation:", ""]
        names = [p.perturbation for p in judge.overall.by_perturbation]
        out += ["| language | " + " | ".join(_cell(n.removeprefix("agent:")) for n in names) + " |",
                "|---|" + "---|" * len(names)]
        for label, card in [("all", judge.overall), *((lc.lang, lc.card) for lc in judge.languages)]:
            acc = {p.perturbation: p.accuracy for p in card.by_perturbation}
            out.append(f"| {_cell(label)} | " + " | ".join(
                "–" if acc.get(n) is None or acc[n].value is None else f"{acc[n].value:.2f}" for n in names) + " |")
        out.append("")
    return out


def _audit(cards: Cards) -> list[str]:
    if not cards.perturbation_audit:
        return []
    cells: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for row in cards.perturbation_audit:
        cells[(row.lang, row.perturbation)][0] += row.emitted
        cells[(row.lang, row.perturbation)][1] += row.skipped
    perts = sorted({p for _, p in cells})
    langs = sorted({lang for lang, _ in cells})
    out = [
        "## Perturbation audit",
        "",
        "Items emitted / skipped as no-ops (the perturbation changed nothing, so the gold label "
        "would be false), per language and perturbation, all severities together.",
        "",
        "| language | " + " | ".join(perts) + " |",
        "|---|" + "---:|" * len(perts),
    ]
    for lang in langs:
        out.append(f"| {_cell(lang)} | " + " | ".join(
            "{} / {}".format(*cells[(lang, p)]) for p in perts) + " |")
    out.append("")
    if cards.removed_by_filters:
        out += ["References removed by the corpus filters:", ""]
        out += [f"- {_cell(r.lang)}: {r.count} with {_cell(r.reason)}" for r in cards.removed_by_filters]
        out.append("")
    return out


_COMPARED = (("reliability", "R"), ("accuracy", "accuracy"), ("position_bias", "Δ (slot A)"),
             ("verbosity", "v (longer)"), ("order_consistency", "κ_ord"))


def _change(c) -> str:
    if c.a.value is None or c.b.value is None:
        return "–"
    text = f"{c.a.value:.2f} → {c.b.value:.2f}"
    if c.lo is not None and c.hi is not None:
        text += f" ({c.delta:+.2f} [{c.lo:+.2f}, {c.hi:+.2f}])"
    return text


def _extra(comp: CompositeCard) -> str:
    if comp.escalation_rate is not None:
        return f"escalated {_num(comp.escalation_rate)}"
    if comp.slot_bias is not None:
        return f"slot bias β = {comp.slot_bias['all']:+.2f} (pooled; {comp.calibration_items} held-out items)"
    return ""


def _mitigations(cards: Cards) -> list[str]:
    """Each composite beside its base judge on the same presentations: what it changed
    (with a paired bootstrap interval and McNemar on correctness) and what it costs."""
    if not cards.composites:
        return []
    out = [
        "## Mitigations against their base judge",
        "",
        "Base → mitigation on the same presentations, change with a paired item bootstrap "
        "interval; McNemar p on per-presentation correctness; calls per decision: the inner "
        "judge calls one deployed verdict costs (the base judge: 1). Bold: what the mitigation targets.",
        "",
        "| mitigation | kind | base | calls/decision | " + " | ".join(label for _, label in _COMPARED)
        + " | McNemar p | |",
        "|---|---|---|---:|" + "---|" * len(_COMPARED) + "---:|---|",
    ]
    for comp in cards.composites:
        overall = comp.change[0] if comp.change else None
        changes = {c.metric: c for c in overall.changes} if overall else {}
        cells = [(f"**{_change(changes[m])}**" if m in comp.targets else _change(changes[m]))
                 if m in changes else "–" for m, _ in _COMPARED]
        p = f"{overall.mcnemar.p:.2g}" if overall else "–"
        out.append(f"| {_cell(comp.name)} | {comp.kind} | {_cell(comp.base)} | {comp.calls_per_decision:.2f} | "
                   + " | ".join(cells) + f" | {p} | {_cell(_extra(comp))} |")
    out.append("")
    return out
