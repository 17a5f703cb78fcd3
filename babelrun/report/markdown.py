"""Markdown: the whole report (``render_report``, report.md: every section of
``sections.SECTIONS`` in its order, as report.html) and the cards alone (``render``). Judge
replies and names are untrusted: ``safe.md`` escapes every character Markdown could read as
syntax; codes go through ``_cell``."""

from __future__ import annotations

import re

import msgspec

from ..core.items import bare_name
from ..plan import WEAK_SENTENCES
from ..score.agentic import AgenticCard
from ..score.cards import Card, Cards
from ..score.stats import fmt_interval
from ..score.verdict import DEPLOY_R, MIN_ITEMS, mark
from . import summary
from .safe import md, neutralise
from .sections import rendered, renders
from .summary import (
    COMPARED,
    METRIC_HEADER,
    METRIC_RATE_COLUMNS,
    audit_cell,
    audit_cells,
    metric_cells,
    mitigation_rows,
)
from .summary import number as _num

THRESHOLD = DEPLOY_R  # the research's deployment threshold for R
VERDICTS = (f"✓/✗: R at or above / below the {DEPLOY_R} deployment threshold; no verdict (reason in "
            f"brackets) on a card with fewer than {MIN_ITEMS} items or a weakly segmented language. "
            "**below chance**: the accuracy interval lies below 0.5 — the judge prefers the degraded "
            "answer, and a high κ_ord then means consistently wrong. Definitions: docs/metrics.md.")
_PLAIN = re.compile(r"[\w.\-/:@+~ ]*")


def _cell(text: str) -> str:
    """A code or name for a table cell (languages, perturbations): pipes and tags escaped,
    controls made visible. Free text (judge names, replies) goes through ``safe.md``."""
    return (neutralise(text).replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;")
            .replace("`", "\\`").replace("\n", " "))


def _code(text: str) -> str:
    """``text`` as a code span when it is plain (letters, digits, ``. _ - / : @ + ~`` and
    spaces); anything else as escaped text, since a backtick would end the span early and
    backslashes do not escape inside one."""
    return f"`{text}`" if _PLAIN.fullmatch(text) else md(text)


_REMARKS = {"verdict": lambda card: mark(card.verdict),
            "below_chance": lambda card: " **below chance**" if card.below_chance else "",
            "consistently_wrong": lambda card: " (consistently wrong)" if card.below_chance else ""}


def _row(label: str, card: Card) -> str:
    return f"| {_cell(label)} | " + " | ".join(metric_cells(card, _REMARKS)) + " |"


def _unjudged(cards: Cards, family: str, judge: str, columns: int) -> list[str]:
    """A "not judged: <reason>" row for each planned language of ``family`` without a card."""
    return [f"| {_cell(f'{n.lang} ({n.language})')} | 0 | not judged: {_cell(n.reason)} |" + " |" * (columns - 3)
            for n in cards.not_judged if n.family == family and n.judge in (None, judge)]


def _judge_tables(cards: Cards, judges, family: str) -> list[str]:
    out = []
    for judge in judges:
        title = f"Judge {_code(judge.judge)} ({judge.judge_id})"
        if family != "degradation":
            title += f" — labelled pairs {_code(family.removeprefix('pairs:'))}"
        out += [f"## {title}", "", _HEADER.format(what="language")]
        out.append(_row("all", judge.overall))
        out += [_row(f"{lc.lang} ({lc.language})", lc.card) for lc in judge.languages]
        out += _unjudged(cards, family, judge.judge, 1 + len(METRIC_HEADER))
        if family == "degradation":
            out += ["", "### By perturbation", "", _HEADER.format(what="language / perturbation")]
            for lc in judge.languages:
                out += [_row(f"{lc.lang} / {pc.perturbation}", pc.card) for pc in lc.perturbations]
        out += _reply_language(judge)
        out.append("")
    return out


def _reply_language(judge) -> list[str]:
    """The share of a judge's replies whose prose is not in the item's language (score/replylang.py)."""
    rows = [(lc.lang, lc.card.reply_language) for lc in judge.languages
            if lc.card.reply_language is not msgspec.UNSET]
    if not rows:
        return []
    out = ["", "### Reply language", "",
           f"Replies holding prose ({rows[0][1].identifier}; a reply with no prose is not counted): the share not "
           "in the item's language, and accuracy split by it where both groups hold 20 replies.", "",
           "| judge | language | replies with prose | not in the item's language | accuracy: in it / not |",
           "|---|---|---:|---|---|"]
    for lang, r in rows:
        split = (f"{fmt_interval(r.accuracy_in_language)} / {fmt_interval(r.accuracy_other)}"
                 if r.accuracy_in_language is not None else "–")
        out.append(f"| {_cell(judge.judge)} | {_cell(lang)} | {r.replies} | {fmt_interval(r.not_in_item_language)} "
                   f"| {split} |")
    return out


_HEADER = ("| {what} | " + " | ".join(METRIC_HEADER) + " |\n|---|"
           + "".join("---:|" if i in {1, *METRIC_RATE_COLUMNS} else "---|" for i in range(1, len(METRIC_HEADER) + 1)))


def _card_tables(cards: Cards) -> list[str]:
    """The text cards: degradation items, then each labelled-pair set (never pooled)."""
    out = _judge_tables(cards, cards.judges, "degradation")
    for fc in cards.pairs:  # human-labelled pairs: their own cards, never pooled with the degradations
        out += _judge_tables(cards, fc.judges, fc.family)
    return out


def render(cards: Cards) -> str:
    """The cards alone, as Markdown (no leaderboard, analyses or run statistics): the card
    sections of the report, in its order. ``report.md`` is always the whole report
    (``render_report``); this is for a caller holding only Cards."""
    pct = round(cards.confidence * 100)
    out = [
        "# babelrun reliability cards",
        "",
        f"Intervals: {pct}% item-clustered bootstrap ({cards.bootstrap} resamples). {VERDICTS}",
        "",
    ]
    for part in (_card_tables, _pointwise, _mitigations, _agentic, _audit):
        out += part(cards)
    return "\n".join(out) + "\n"


_AGENTIC_HEADER = (
    "| language | items | R_agent | tool acc. | argument acc. | hallucination det. | length v | Δ (slot A) "
    "| κ_ord | not measured |\n"
    "|---|---:|---|---|---|---|---|---|---|---|"
)


def _agentic_row(label: str, card: AgenticCard) -> str:
    flag = mark(card.verdict) + (" **below chance**" if card.below_chance else "")
    return (f"| {_cell(label)} | {card.items} | {_num(card.reliability)}{flag} | {_num(card.tool_accuracy)} | "
            f"{_num(card.argument_accuracy)} | {_num(card.hallucination_detection)} | {_num(card.length_bias)} | "
            f"{_num(card.position_bias, signed=True)} | {_num(card.order_consistency)} | "
            f"{_cell(', '.join(card.not_measured)) or '–'} |")


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(_cell(c) for c in row) + " |" for row in rows)]


def _pointwise(cards: Cards) -> list[str]:
    rows = summary.pointwise_rows(cards)
    if not rows:
        return []
    out = ["## Pointwise judges", "",
           "Each answer scored alone; the gold is \"the reference scores higher\". Margin and pad gain "
           "in scale units; scale offset: the language's mean reference score − the pooled mean. "
           "Definitions: docs/metrics.md, *Pointwise metrics*.", "", *_md_table(summary.POINTWISE_HEADER, rows), ""]
    both = summary.side_by_side_rows(cards)
    if both:
        out += ["### Pairwise and pointwise, side by side", "",
                "Position bias (pairwise Δ) against scale drift (pointwise offset), language by language.", "",
                *_md_table(summary.SIDE_BY_SIDE_HEADER, both), ""]
    return out


def _agentic(cards: Cards) -> list[str]:
    out = []
    for judge in cards.agentic:
        out += [f"## Agentic: judge `{_cell(judge.judge)}` ({judge.judge_id})", "",
                "Agent trajectories, scored apart from the text cards. R_agent gates the families' "
                "accuracy like R; a family not measured is left out and the weights renormalised.", "",
                _AGENTIC_HEADER, _agentic_row("all", judge.overall)]
        out += [_agentic_row(f"{lc.lang} ({lc.language})", lc.card) for lc in judge.languages]
        out += _unjudged(cards, "agentic", judge.judge, 10)
        out += ["", "Accuracy by agentic perturbation:", ""]
        names = [p.perturbation for p in judge.overall.by_perturbation]
        out += ["| language | " + " | ".join(_cell(bare_name(n)) for n in names) + " |",
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
    cells = audit_cells(cards)
    perts = sorted({p for _, p in cells})
    langs = sorted({lang for lang, _ in cells})
    out = [
        "## Perturbation audit",
        "",
        "Items emitted / skipped as no-ops (the perturbation changed nothing, so the gold label "
        "would be false), per language and perturbation, all severities together; "
        "+k: severities merged into a lower one because they gave the identical text.",
        "",
        "| language | " + " | ".join(perts) + " |",
        "|---|" + "---:|" * len(perts),
    ]
    for lang in langs:
        out.append(f"| {_cell(lang)} | " + " | ".join(audit_cell(cells[(lang, p)]) for p in perts) + " |")
    out.append("")
    weak = [s for s in cards.segmentation if s.weak]
    if weak:
        out += [f"Segmentation weak (units average under {WEAK_SENTENCES} sentences: the sentence perturbations "
                "act on few units; these cards carry no verdict):", ""]
        out += [f"- {_cell(s.lang)}: {s.sentences_per_unit:.2f} sentences per unit over {s.units} units" for s in weak]
        out.append("")
    if cards.removed_by_filters:
        out += ["References removed by the corpus filters:", ""]
        out += [f"- {_cell(r.lang)}: {r.count} with {_cell(r.reason)}" for r in cards.removed_by_filters]
        out.append("")
    return out


def _change(c, targeted: bool) -> str:
    if c is None or c.a.value is None or c.b.value is None:
        return "–"
    text = f"{c.a.value:.2f} → {c.b.value:.2f}"
    if c.lo is not None and c.hi is not None:
        text += f" ({c.delta:+.2f} [{c.lo:+.2f}, {c.hi:+.2f}])"
    return f"**{text}**" if targeted else text


def _mitigations(cards: Cards) -> list[str]:
    """Each composite beside its base judge on the same presentations: what it changed
    (with a paired bootstrap interval and McNemar on correctness) and what it costs."""
    rows = mitigation_rows(cards)
    if not rows:
        return []
    out = [
        "## Mitigations against their base judge",
        "",
        "Base → mitigation on the same presentations, change with a paired item bootstrap "
        "interval; McNemar p on per-presentation correctness; calls per decision: the inner "
        "judge calls one deployed verdict costs (the base judge: 1). Bold: what the mitigation targets.",
        "",
        "| mitigation | kind | base | calls/decision | " + " | ".join(label for _, label in COMPARED)
        + " | McNemar p | |",
        "|---|---|---|---:|" + "---|" * len(COMPARED) + "---:|---|",
    ]
    for row in rows:
        comp = row.card
        cells = [_change(c, t) for c, t in zip(row.changes, row.targeted, strict=True)]
        p = "–" if row.mcnemar_p is None else f"{row.mcnemar_p:.2g}"
        out.append(f"| {_cell(comp.name)} | {comp.kind} | {_cell(comp.base)} | {comp.calls_per_decision:.2f} | "
                   + " | ".join(cells) + f" | {p} | {_cell(row.note)} |")
    out.append("")
    return out


# ---- the full report (report.md: ``babelrun report``, ``score``, and ``audit`` at the end) --
# One function per section over a ReportData, each returning its lines, registered with
# ``@renders("markdown", name)``; the order is sections.SECTIONS, the same as report.html's.
# Judge and corpus text goes through safe.md (Markdown syntax escaped, bidi controls made visible).

@renders("markdown", "leaderboard")
def _leaderboard(data) -> list[str]:
    from .summary import leaderboard

    rows = leaderboard(data)
    if not rows:
        return ["No judge has counted records yet.", ""]
    out = ["## Leaderboard", "",
           f"Judges by overall R (R_agent for agent trajectories), per item family: degradation items, "
           f"each labelled-pair set, agentic — never pooled. Worst language: the lowest R. Below {THRESHOLD}: "
           f"languages under the deployment threshold, of the languages planned (not judged: no card).", "",
           "| # | family | judge | judge_id | R | accuracy | worst language | below " + str(THRESHOLD)
           + " | not judged | items |",
           "|---:|---|---|---|---|---|---|---:|---:|---:|"]
    for i, row in enumerate(rows, 1):
        worst = "–" if row.worst is None else f"{_cell(row.worst.lang)} ({_num(row.worst.card.reliability)})"
        chance = " **below chance**" if row.card.below_chance else ""
        out.append(f"| {i} | {_cell(row.family)} | {md(row.judge)} | {row.judge_id} | "
                   f"{_num(row.card.reliability)}{mark(row.card.verdict)} | {_num(row.card.accuracy)}{chance} | "
                   f"{worst} | {row.below}/{row.languages} | {row.not_judged} | {row.card.items} |")
    return out + [""]


@renders("markdown", "recommendations")
def _recommendations(data) -> list[str]:
    from .summary import actions

    t = data.thresholds
    out = ["## Recommendations", "",
           f"Per judge × language, when its card calls for it: R < {t.reliability} → route the language "
           f"elsewhere or ensemble; κ_ord < {t.consistency} → score both orders and average; "
           f"|Δ| ≥ {t.position} (interval excluding 0) → position debiasing; v > {t.verbosity} "
           "(interval above 0.5) → length normalisation in the prompt; accuracy interval below 0.5 → "
           "the judge prefers the degraded answer. One line per judge and action, languages worst first; "
           "every item family is checked.", ""]
    if not data.recommendations:
        if not data.families():
            return out + ["None: no judge has counted records yet.", ""]
        return out + ["None: every card is within the thresholds.", ""]
    out += ["| judge | action | languages | which (value) |", "|---|---|---:|---|"]
    out += [f"| {md(judge)} | {md(a.text)} | {len(a.langs)} | "
            + ", ".join(f"{_cell(lang)} {v:.2f}" for lang, v in a.langs) + " |"
            for judge, _, acts in actions(data) for a in acts]
    return out + [""]


@renders("markdown", "matrix")
def _matrix(data) -> list[str]:
    """R per judge × language, every planned pair: ✓/✗ against the threshold, n/j not judged."""
    from .summary import matrix

    m = matrix(data)
    if not m.judges:
        return []

    def cell(c) -> str:
        if c is None:
            return "·"
        if c.status == "not judged":
            return "n/j" + "".join(f" {_cell(f)}" for f in c.flags)
        value = "–" if c.reliability.value is None else f"{c.reliability.value:.2f}"
        return value + {"pass": " ✓", "fail": " ✗"}.get(c.status, "") + "".join(f" {_cell(f)}" for f in c.flags)

    out = ["## Judge × language: reliability R", "",
           f"✓ R ≥ {data.thresholds.reliability}, ✗ below (R_pw in a pointwise column, R_agent in an agentic one); "
           "n/j: planned but not judged; –: undefined. "
           "Intervals: the cards below.", "",
           "| language | " + " | ".join(md(j.judge) for j in m.judges) + " |",
           "|---|" + "---:|" * len(m.judges)]
    out += [f"| {_cell(m.langs[i][0])} | " + " | ".join(cell(c) for c in m.cells[i]) + " |"
            for i in m.sorted_rows(None)]
    return out + [""]


@renders("markdown", "diagnosis")
def _diagnosis(data) -> list[str]:
    """Misconfigured judges first: no verdict is claimed for them (score/diagnose.py)."""
    found = [d for run in data.runs for d in run.diagnoses]
    if not found:
        return []
    return ["## Diagnosis: judges whose replies could not be read", "",
            "These judges get no ✓/✗ and no bias advice: fix the prompt, the verdict pattern or the "
            "request before judging the judge.", ""] + [f"- {md(d.line())}" for d in found] + [""]


@renders("markdown", "cards")
def _cards(data) -> list[str]:
    out = []
    for run in data.runs:
        if len(data.runs) > 1:
            out += [f"## Run {md(run.name)} ({_code(run.run_dir)})", ""]
        out += _card_tables(run.cards)
    return out


def _per_run(part):
    """A section of each run's cards, one run after another."""
    return lambda data: [line for run in data.runs for line in part(run.cards)]


renders("markdown", "pointwise")(_per_run(_pointwise))
renders("markdown", "mitigations")(_per_run(_mitigations))
renders("markdown", "agentic")(_per_run(_agentic))
renders("markdown", "audit")(_per_run(_audit))


@renders("markdown", "plots")
def _plots(data) -> list[str]:
    """Nothing: plots are images, in report.html and plots/."""
    return []


@renders("markdown", "analyses")
def _analyses(data) -> list[str]:
    """Every analysis of the registry that was run, in registry order: its own section where
    ``_ANALYSES`` has one, else its text under its title."""
    from ..analyses import registry

    out = [f"Note: {_code(r.run_dir)}/{name} predates the log's newest records; run the analysis again."
           for r in data.runs for name in r.stale]
    out += [""] if out else []
    for analysis in registry.ANALYSES:
        section = _ANALYSES.get(analysis.name, _analysis_text)
        for run, result in data.analysis(analysis.name):
            out += section(analysis, run, result)
    return out


def _analysis_text(analysis, run, result) -> list[str]:
    """An analysis without a section of its own: its text (as the command prints it), as an
    indented code block (each line indented, so no line of it can end the block)."""
    where = "" if analysis.spans_runs else f" ({md(run.name)})"
    lines = analysis.text(result).rstrip("\n").split("\n")
    return [f"## {md(analysis.title)}{where}", "", f"From `babelrun {analysis.name}`.", "",
            *(f"    {neutralise(line)}".rstrip() for line in lines), ""]


def _calibration(analysis, run, c) -> list[str]:
    from .summary import cbc_rows

    out = ["## Cross-lingual bias calibration (CBC)", "",
           "From `babelrun calibrate`: each language's ranking of the judges before and after "
           "removing their language-specific bias.", "",
           "| language | raw ranking | calibrated ranking |", "|---|---|---|"]
    out += [f"| {_cell(lang)} | {md(raw)} | {md(cal)} |" for lang, raw, cal in cbc_rows(c)]
    if c.agreement is not None:
        a = c.agreement
        out += ["", f"Held-out cross-language rank agreement (Kendall τ_b): raw {a.raw.value}, "
                f"calibrated {a.calibrated.value}, gain {a.gain.value} [{a.gain.lo}, {a.gain.hi}]."]
    return out + [f"Significant rank reversals: {len(c.reversals)} of {c.reversal_tests} tests.", ""]


def _invariance(analysis, run, inv) -> list[str]:
    out = [f"## Language-switch invariance against {_cell(inv.pivot)}", ""]
    if inv.rows:
        out += ["| judge | language | matched | verdict flips | correctness flips | McNemar p |",
                "|---|---|---:|---|---|---:|"]
        out += [f"| {md(r.judge)} | {_cell(r.lang)} | {r.matched} | {_num(r.judgment_flip)} | "
                f"{_num(r.correctness_flip)} | {r.mcnemar_p:.3g} |" for r in inv.rows]
        out.append("")
    return out + (_judge_ls(inv.labelled) if inv.labelled is not None else [])


def _agreement(analysis, run, a) -> list[str]:
    from .summary import agreement_rows

    out = [f"## Agreement with human labels ({md(run.name)})", "",
           f"From `babelrun agree`: {a.matched} of {a.labels_read} labels matched judged pairs; both "
           f"orders, Wilson {a.confidence:.0%} intervals.", "",
           "| judge | set | accuracy | Cohen's κ | n |", "|---|---|---|---|---:|"]
    out += [f"| {md(j)} | {_cell(st)} | {acc} | {md(kappa)} | {n} |" for j, st, acc, kappa, n in agreement_rows(a)]
    return out + [""]


def _self_preference(analysis, run, sp) -> list[str]:
    head, rows = summary.self_preference_rows(sp)
    out = [f"## Self-preference ({md(run.name)})", "",
           "From `babelrun self-preference`: how often each judge names the worse output when its own family "
           "wrote it, against when its family wrote neither; s = (own − neutral) / (1 − neutral), the share "
           "of decisions it hands its family.", ""]
    if rows:
        out += ["| " + " | ".join(head) + " |", "|" + "---|" * 6 + "---:|" + "---|" * (len(head) - 7)]
        out += ["| " + " | ".join([md(judge), _cell(family), *figures]) + " |" for judge, family, *figures in rows]
    else:
        out.append("No judge declares a family (family: in the manifest).")
    if sp.skipped:
        out += ["", f"Judges without a family: {md(', '.join(sp.skipped))}."]
    return out + [""]


# The analyses (registry names) with a section of their own; the others show their text.
_ANALYSES = {"calibrate": _calibration, "invariance": _invariance, "agree": _agreement,
             "self-preference": _self_preference}


def _judge_ls(lab) -> list[str]:
    """Labelled pairs across language conditions: every pair, then the audit-passing ones."""
    out = [f"Labelled pairs across conditions (Judge-LS): the transformation audit flagged "
           f"{len(lab.flagged)} of {lab.all_pairs.pairs} pairs; each row twice, all pairs and audit-passing.", "",
           "| pairs | judge | condition | accuracy | tie-half accuracy | position inconsistency | "
           "correctness flips | McNemar p |", "|---|---|---|---|---|---|---|---:|"]
    for label, part in (("all", lab.all_pairs), ("audit-passing", lab.audit_passing)):
        out += [f"| {label} | {md(r.judge)} | {_cell(r.condition)} | {_num(r.accuracy)} | "
                f"{_num(r.accuracy_tie_half)} | {_num(r.position_inconsistency)} | "
                f"{'–' if r.correctness_flip is None else _num(r.correctness_flip)} | "
                f"{'–' if r.mcnemar_p is None else f'{r.mcnemar_p:.3g}'} |" for r in part.rows if r.subset == "all"]
    return out + [""]


@renders("markdown", "stats")
def _stats(data) -> list[str]:
    out = ["## Run statistics", "",
           "From the log: every record of every audit process (a retried key counts each try). "
           "429s and calls/s of the audit processes are in report.html and stats.json.", "",
           "| run | judge | records | ok | errors | calls | retries | p50 ms | p95 ms | p99 ms | "
           "tokens in | tokens out |",
           "|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for run in data.runs:
        for s in run.log_stats:
            lat = [("–" if s.latency_ms.get(q) is None else f"{s.latency_ms[q]:g}") for q in ("p50", "p95", "p99")]
            errors = ", ".join(f"{md(k)} {n}" for k, n in s.errors.items()) or "0"
            out.append(f"| {md(run.name)} | {md(s.judge)} | {s.records} | {s.ok} | {errors} | {s.calls} | "
                       f"{s.retries} | {' | '.join(lat)} | {s.tokens_in} | {s.tokens_out} |")
    return out + [""]


@renders("markdown", "spend")
def _spend(data) -> list[str]:
    rows = summary.spend_rows(data)
    if not rows:
        return []
    out = ["## Spend", "",
           "The cost ledger: each judge's spend from the provider's reported usage and its `price` "
           "(stats.json, every audit process summed), by language and call kind; records served by "
           "the response cache cost nothing.", "",
           "| " + " | ".join(summary.SPEND_HEADER) + " |", "|---|---|---|---:|---:|---:|---:|---:|"]
    out += ["| " + " | ".join(md(c) for c in row) + " |" for row in rows]
    return out + [""]


@renders("markdown", "identities")
def _identities(data) -> list[str]:
    out = ["## Judge identities", "",
           "From `run.yaml`; served model and fingerprint as the provider reported them in the records.", "",
           "| judge | judge_id | backend | model | endpoint | prompt | served model | fingerprint |",
           "|---|---|---|---|---|---|---|---|"]
    for run in data.runs:
        for j in run.identities:
            version = "" if j.prompt_version is None else f" v{j.prompt_version}"
            prompt = "–" if j.prompt is None else f"{j.prompt}{version} ({j.prompt_language})"
            out.append(f"| {md(j.judge)} | {j.judge_id} | {md(j.backend or 'not in run.yaml')} | "
                       f"{md(j.model or '–')} | {md(j.endpoint or '–')} | {md(prompt)} | "
                       f"{md(', '.join(j.served_models) or '–')} | {md(', '.join(j.fingerprints) or '–')} |")
    return out + [""]


def _raw(text: str | None) -> str:
    """A raw reply in quotes (so that spaces show), escaped and cut at 80 characters."""
    return "(empty)" if not text else f"“{md(text, 80)}”"


@renders("markdown", "examples")
def _examples(data) -> list[str]:
    from .data import MODES

    out = ["## Example failures", "",
           "A few items per judge and failure mode (the first by item id), with the judge's raw "
           "replies; texts are in report.html, and any item with the messages each judge was sent: "
           "`babelrun show RUN ITEM_ID`.", ""]
    any_example = False
    for run in data.runs:
        if run.texts_note:
            out += [f"Note ({md(run.name)}): {md(run.texts_note)}", ""]
        if not run.examples:
            continue
        any_example = True
        out += ["| judge | failure | item | language | perturbation | replies (order: raw) |",
                "|---|---|---|---|---|---|"]
        for e in run.examples:
            replies = "; ".join(f"{r.order}: {_raw(r.raw)} → {r.slot or '–'}" for r in e.replies)
            out.append(f"| {md(e.judge)} | {MODES[e.mode].split(' (')[0]} | {_cell(e.item_id)} | {_cell(e.lang)} | "
                       f"{_cell(e.perturbation)} {e.severity:g}{_cue(e.cue)} | {replies} |")
        out.append("")
    return out if any_example else out + ["None found.", ""]


def leaderboard(data) -> str:
    """The leaderboard alone (what ``babelrun report`` prints)."""
    return "\n".join(_leaderboard(data))


def render_report(data) -> str:
    """The whole report as Markdown: the same numbers as report.html."""
    runs = ", ".join(f"{md(r.name)} ({_code(r.run_dir)})" for r in data.runs)
    first = data.runs[0].cards if data.runs else None
    pct = round(first.confidence * 100) if first else 95
    out = ["# babelrun report", "", f"Runs: {runs}.", "",
           f"Intervals: {pct}% item-clustered bootstrap. {VERDICTS}", ""]
    for _, section in rendered("markdown"):
        out += section(data)
    return "\n".join(out).rstrip("\n") + "\n"


from . import robustness  # noqa: E402, F401 (registers the robustness section's renderers)


def _cue(cue: str | None) -> str:
    """A probe example's recorded cue (probe|language|text|placement), after its perturbation."""
    return f" (cue {_cell(cue)})" if cue else ""
