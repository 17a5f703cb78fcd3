"""The report as one self-contained HTML page: no script, no outside request.

The page opens with the answer: the judge × language matrix of R (``_matrix``; its sort
orders are views picked by the link's fragment through CSS ``:target``, no script), then a
table of contents, then the sections: functions ``(ReportData, plots) -> str``, each
registered with ``@renders("html", name)``, in the order of ``sections.SECTIONS``; a new
section adds a line there and a function here. Every piece of judge, corpus or manifest text
goes through ``safe.h`` (HTML-escaped with quotes, bidi controls made visible); plots are inlined as SVG
drawn with glyph paths (``plots``). A Content-Security-Policy forbids scripts and every
outside fetch, as a second line of defence.
"""

from __future__ import annotations

from collections import defaultdict

from ..core.version import __version__
from ..score.cards import Card
from ..score.stats import Interval
from ..score.verdict import mark
from . import summary
from .data import MODES, Example, ReportData
from .markdown import VERDICTS
from .plots import Plot
from .safe import h
from .sections import rendered, renders
from .summary import (
    BAND_COLOURS,
    COMPARED,
    METRIC_HEADER,
    METRIC_RATE_COLUMNS,
    Matrix,
    actions,
    agreement_rows,
    audit_cell,
    audit_cells,
    band,
    card_notes,
    cbc_rows,
    leaderboard,
    matrix,
    metric_cells,
    mitigation_rows,
    planned_items,
)
from .summary import number as _num

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"

STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2em auto;max-width:1200px;\
padding:0 1em;color:#222;overflow-wrap:anywhere}
section{max-width:100%;overflow-x:auto}
.matrix td{padding:1px 5px;white-space:nowrap;font-variant-numeric:tabular-nums;text-align:right}\
.matrix td.l{text-align:left}
.matrix th{font-size:12px;max-width:9em;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.views>.view{display:none}.views>.view:target,.views>.view:last-child{display:block}.views>.view:target~.view:last-child{display:none}
nav.toc ol{columns:2;margin:.3em 0}.sorts a{margin-right:.6em}
h1{font-size:1.6em}h2{margin-top:2em;border-bottom:1px solid #ddd}h3{margin-top:1.4em}
table{border-collapse:collapse;margin:.6em 0}\
td,th{border:1px solid #ddd;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.n{text-align:right;font-variant-numeric:tabular-nums}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(170px,1fr));gap:8px}
.card{border:1px solid #ccc;border-radius:6px;padding:6px 8px;font-size:12px}
""" + "".join(f".{k}{{background:{v}}}" for k, v in BAND_COLOURS.items()) + """
.card b{font-size:14px}.bar{position:relative;height:8px;background:#fff;border:1px solid #aaa;margin:4px 0}
.fill{position:absolute;left:0;top:0;bottom:0;background:#555}.ci{position:absolute;top:3px;height:2px;background:#000}
.mark{position:absolute;top:-3px;bottom:-3px;width:2px;background:#c00}
figure{margin:1em 0}figure svg{max-width:100%;height:auto}figcaption{font-weight:bold}
.text{white-space:pre-wrap;border-left:3px solid #ccc;padding:2px 8px;margin:2px 0;background:#fafafa;\
max-height:16em;overflow:auto}
.raw{font-family:ui-monospace,monospace;white-space:pre-wrap;background:#f4f4f4;padding:1px 4px}
.note{color:#555}details{margin:.4em 0}summary{cursor:pointer}
"""


def _band(value: float | None) -> str:
    return band(value)


def _table(header: list[str], rows: list[list[str]], numeric: set[int] = frozenset()) -> str:
    """A table of cells that are already HTML (callers escape their text with ``h``)."""
    head = "".join(f"<th>{c}</th>" for c in header)
    body = "".join("<tr>" + "".join(f'<td class="n">{c}</td>' if i in numeric else f"<td>{c}</td>"
                                    for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _header(data: ReportData, plots: list[Plot]) -> str:
    runs = "".join(f"<li>{h(r.name)}: <code>{h(r.run_dir)}</code> (babelrun {h(r.babelrun_version)})</li>"
                   for r in data.runs)
    conf = data.runs[0].cards.confidence if data.runs else 0.95
    t = data.thresholds.reliability
    return (f"<h1>babelrun report</h1><ul>{runs}</ul>"
            f"<p class=note>Intervals: {round(conf * 100)}% item-clustered bootstrap (Wilson for tie and "
            f"invalid rates). Colours, the same in every table, card and plot: <span class=good>R ≥ "
            f"{t + 0.10:.2f}</span>, <span class=near>{t} ≤ R &lt; {t + 0.10:.2f}</span>, <span class=bad>R "
            f"&lt; {t}</span> (the deployment threshold; the red mark on each bar), <span class=none>not "
            "judged or undefined</span>. Definitions: docs/metrics.md.</p>")


@renders("html", "leaderboard")
def _leaderboard(data: ReportData, plots: list[Plot]) -> str:
    rows = leaderboard(data)
    if not rows:
        return "<h2>Leaderboard</h2><p>No judge has counted records yet.</p>"
    t = data.thresholds.reliability
    body = [[str(i), h(r.family), h(r.judge), f"<code>{h(r.judge_id)}</code>",
             f'<span class="{_band(r.card.reliability.value)}">{_num(r.card.reliability)}</span>'
             + h(mark(r.card.verdict)), _num(r.card.accuracy) + _CHANCE * r.card.below_chance,
             "–" if r.worst is None else f"{h(r.worst.lang)} ({h(r.worst.language)}) {_num(r.worst.card.reliability)}",
             r.below_text(), str(r.not_judged), str(r.card.items)] for i, r in enumerate(rows, 1)]
    return ("<h2>Leaderboard</h2><p class=note>Per item family (degradation items, each labelled-pair set, "
            "agentic): never pooled. R_agent for agent trajectories.</p>" + _table(
        ["#", "family", "judge", "judge_id", "R", "accuracy", "worst language (R)", f"languages below {t}",
         "not judged", "items"], body, {0, 7, 8, 9}))


_CHANCE = ' <b class=red title="the judge prefers the degraded answer">below chance</b>'


@renders("html", "diagnosis")
def _diagnosis(data: ReportData, plots: list[Plot]) -> str:
    """Misconfigured judges first: no verdict is claimed for them (score/diagnose.py)."""
    found = [d for run in data.runs for d in run.diagnoses]
    if not found:
        return ""
    return ("<h2>Diagnosis: judges whose replies could not be read</h2><p>These judges get no ✓/✗ and no "
            "bias advice: fix the prompt, the verdict pattern or the request before judging the judge.</p><ul>"
            + "".join(f"<li>{h(d.line())}</li>" for d in found) + "</ul>")


@renders("html", "recommendations")
def _recommendations(data: ReportData, plots: list[Plot]) -> str:
    """One line per judge and action, listing the languages that call for it, worst first."""
    t = data.thresholds
    intro = (f"<p>Per judge × language, when its card calls for it: R &lt; {t.reliability} → route the "
             f"language elsewhere or ensemble; κ_ord &lt; {t.consistency} → score both orders and average; "
             f"|Δ| ≥ {t.position} (interval excluding 0) → position debiasing; v &gt; {t.verbosity} "
             "(interval above 0.5) → length normalisation in the prompt.</p>")
    if not data.recommendations:
        none = "every card is within the thresholds" if data.families() else "no judge has counted records yet"
        return "<h2>Recommendations</h2>" + intro + f"<p>None: {none}.</p>"
    rows = [[h(judge), h(a.text), str(len(a.langs)), ", ".join(f"{h(lang)}&nbsp;{v:.2f}" for lang, v in a.langs)]
            for judge, _, acts in actions(data) for a in acts]
    return "<h2>Recommendations</h2>" + intro + _table(["judge", "action", "languages", "which (value)"], rows, {2})


MATRIX_VIEW_ROWS = 50  # a re-sorted view shows this many worst languages; the default view all
# Up to this many judges, each judge's sorted view shows every judge's column; beyond, only its
# own: the matrix then grows with judges × languages, never judges² (100 judges × 200
# languages: 35.8 MB of views before, tests/hostile/test_csv_and_report_size.py).
MATRIX_FULL_VIEWS = 12


def _cell(cell) -> str:
    if cell is None:
        return '<td class=none title="not planned in this judge\'s run">·</td>'
    flags = "".join(f" {h(f)}" for f in cell.flags)
    if cell.status == "not judged":
        return f'<td class=none title="not judged: {h(cell.note or "")}">n/j{flags}</td>'
    r = cell.reliability
    tip = f"R {_num(r)} · {cell.items} items" + (f" · {'; '.join(cell.flags)}" if cell.flags else "")
    mark = {"pass": "✓", "fail": "✗", "uncertain": "?"}.get(cell.status, "")
    value = "–" if r.value is None else f"{r.value:.2f}"
    return f'<td class={band(r.value)} title="{h(tip)}">{value}{mark}{flags}</td>'


def _matrix_table(m: Matrix, rows: list[int], cols: list[int] | None = None) -> str:
    cols = list(range(len(m.judges))) if cols is None else cols
    head = "".join(f'<th title="{h(m.judges[j].judge)} ({h(m.judges[j].judge_id)}, {h(m.judges[j].run)})">'
                   f"{h(m.judges[j].judge)}</th>" for j in cols)
    body = "".join(f'<tr><td class=l>{h(m.langs[i][0])} <small>{h(m.langs[i][1])}</small></td>'
                   + "".join(_cell(m.cells[i][j]) for j in cols) + "</tr>" for i in rows)
    return f'<table class=matrix><thead><tr><th>language</th>{head}</tr></thead><tbody>{body}</tbody></table>'


@renders("html", "matrix")
def _matrix(data: ReportData, plots: list[Plot]) -> str:
    """R per judge × language, first on the page. Sorting needs no script: each order is its
    own view, and the link's fragment (CSS ``:target``) shows it in place of the default."""
    m = matrix(data)
    if not m.judges:
        return "<h2>Judge × language</h2><p>No judge has counted records yet.</p>"
    t = data.thresholds.reliability
    k = MATRIX_VIEW_ROWS
    views = [("worst", "worst language first (lowest R of any judge)", -1)]
    views += [(f"j{j}", f"{judge.judge}: worst first", j) for j, judge in enumerate(m.judges)]
    more = len(m.langs) > k
    own_column = len(m.judges) > MATRIX_FULL_VIEWS  # many judges: a judge's view shows its column only
    html = []
    for anchor, title, by in views:
        rows = m.sorted_rows(by)[:k]
        cut = f" (the {k} worst of {len(m.langs)})" if more else ""
        cols = [by] if own_column and by >= 0 else None
        only = "; its column only" if cols else ""
        html.append(f'<div class=view id="m-{anchor}"><p class=note>Sorted by {h(title)}{cut}{only}.</p>'
                    f"{_matrix_table(m, rows, cols)}</div>")
    html.append(f'<div class=view id="m-lang"><p class=note>Sorted by language code.</p>'
                f"{_matrix_table(m, m.sorted_rows(None))}</div>")
    links = " ".join(f'<a href="#m-{a}">{h(title)}</a>' for a, title, _ in [("lang", "language", None), *views])
    return (f"<h2>Judge × language: reliability R</h2><p>{len(m.judges)} judge(s) × {len(m.langs)} "
            f"language(s). ✓ R's interval ≥ {t}, ✗ below, ? straddling it; n/j not judged; – undefined. "
            f"Hover a cell for its interval and items.</p><p class=sorts>Sort: {links}</p>"
            f"<div class=views>{''.join(html)}</div>")


def _bar(iv: Interval, threshold: float) -> str:
    if iv.value is None:
        return '<div class="bar"></div>'
    ci = (f'<div class="ci" style="left:{iv.lo * 100:.1f}%;width:{(iv.hi - iv.lo) * 100:.1f}%"></div>'
          if iv.lo is not None and iv.hi is not None else "")
    return (f'<div class="bar"><div class="fill" style="width:{iv.value * 100:.1f}%"></div>{ci}'
            f'<div class="mark" style="left:{threshold * 100:.1f}%"></div></div>')


def _card(title: str, card: Card, threshold: float) -> str:
    r = card.reliability
    return (f'<div class="card {_band(r.value)}"><b>{title}</b><br>R {_num(r)}{h(mark(card.verdict))}'
            f"{_bar(r, threshold)}acc {_num(card.accuracy)}{_CHANCE * card.below_chance}"
            f"<br>Δ {_num(card.position_bias, True)}<br>κ_ord "
            f"{_num(card.order_consistency)}<br>v {_num(card.verbosity)}<br>invalid "
            f"{card.invalid_rate.value or 0:.2f} · ties {card.tie_rate.value or 0:.2f} · {card.items} items</div>")


_REMARKS = {"verdict": lambda card: h(mark(card.verdict)), "below_chance": lambda card: _CHANCE * card.below_chance}


def _metric_row(label: str, card: Card) -> list[str]:
    return [label, *metric_cells(card, _REMARKS)]


CARD_GRID = 24  # language cards drawn per judge (worst R first); every language is in its table


def _perturbation_matrix(jc) -> str:
    """R per language × perturbation, one compact cell each (accuracy and items on hover):
    a table of every card's metrics would be a row per cell, megabytes at 500 languages."""
    perts = sorted({pc.perturbation for lc in jc.languages for pc in lc.perturbations})
    head = "".join(f"<th>{h(p)}</th>" for p in perts)
    rows = []
    for lc in jc.languages:
        cards = {pc.perturbation: pc.card for pc in lc.perturbations}
        cells = []
        for p in perts:
            card = cards.get(p)
            if card is None:
                cells.append("<td class=none>·</td>")
                continue
            r = card.reliability.value
            cells.append(f'<td class={band(r)} title="accuracy {_num(card.accuracy)} · {card.items} items">'
                         f'{"–" if r is None else f"{r:.2f}"}</td>')
        rows.append(f"<tr><td class=l>{h(lc.lang)}</td>{''.join(cells)}</tr>")
    return (f"<table class=matrix><thead><tr><th>language</th>{head}</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>")


@renders("html", "cards")
def _language_cards(data: ReportData, plots: list[Plot]) -> str:
    t = data.thresholds.reliability
    out = ["<h2>Reliability cards per language</h2><p class=note>"
           f"{h(VERDICTS.replace('*', ''))} Worst R first (the {CARD_GRID} worst where a judge has more "
           "languages); every language is in the table below each grid, by language code.</p>"]
    for run, family, jc in data.families():
        if family == "agentic":
            continue  # the agent-trajectory section
        worst_first = sorted(jc.languages, key=lambda lc: (lc.card.reliability.value is None,
                                                            lc.card.reliability.value or 0.0, lc.lang))
        cards = "".join(_card(f"{h(lc.lang)} <small>{h(lc.language)}</small>", lc.card, t)
                        for lc in worst_first[:CARD_GRID])
        cards += "".join(f'<div class="card none"><b>{h(n.lang)} <small>{h(n.language)}</small></b><br>'
                         f"not judged: {h(n.reason)}</div>" for n in _unjudged(run, family, jc.judge))
        rows = [_metric_row("all", jc.overall)] + [_metric_row(f"{h(lc.lang)} ({h(lc.language)})", lc.card)
                                                   for lc in jc.languages]
        what = "" if family == "degradation" else f" — labelled pairs <code>{h(family.removeprefix('pairs:'))}</code>"
        out += [f"<h3>{h(jc.judge)} <code>{h(jc.judge_id)}</code>{what}</h3>",
                f'<div class="cards">{_card("all languages", jc.overall, t)}{cards}</div>',
                _notes(jc, _planned(run, family, jc)),
                "<details><summary>table (every language)</summary>"
                + _table(["language", *METRIC_HEADER], rows, {1, *METRIC_RATE_COLUMNS}) + "</details>",
                "<details><summary>R by perturbation</summary>" + _perturbation_matrix(jc) + "</details>"]
    return "".join(out)


def _planned(run, family: str, jc) -> dict[str, int] | None:
    """Planned items per language for a judge's partly-judged notes; None for a composite
    (it holds items out by design) and for the other families."""
    if family != "degradation" or any(c.judge_id == jc.judge_id for c in run.cards.composites):
        return None
    return planned_items(run.cards)


def _notes(jc, planned: dict[str, int] | None) -> str:
    """The judge's uncertain, early-stopped and partly judged cards (summary.card_notes), a list item each."""
    notes = card_notes(jc, planned)
    return ("<ul class=note>" + "".join(f"<li>{h(label)}: {h(text)}</li>" for label, text in notes) + "</ul>"
            if notes else "")


def _unjudged(run, family: str, judge: str) -> list:
    return [n for n in run.cards.not_judged if n.family == family and n.judge in (None, judge)]


@renders("html", "plots")
def _plots(data: ReportData, plots: list[Plot]) -> str:
    if not plots:
        return ""
    figures = "".join(f'<figure id="plot-{h(p.name)}"><figcaption>{h(p.title)}</figcaption>{p.svg}'
                      f'<p class=note>plots/{h(p.name)}.png, plots/{h(p.name)}.svg</p></figure>' for p in plots)
    return "<h2>Plots</h2>" + figures


@renders("html", "audit")
def _audit(data: ReportData, plots: list[Plot]) -> str:
    out = ["<h2>Perturbation audit</h2><p>Items emitted / skipped as no-ops (the perturbation changed "
           "nothing, so the gold label would be false), per language and perturbation, all severities; "
           "+k: severities merged into a lower one because they gave the identical text.</p>"]
    for run in data.runs:
        cells = audit_cells(run.cards)
        if not cells:
            continue
        perts = sorted({p for _, p in cells})
        rows = [[h(lang), *(audit_cell(cells[(lang, p)]) for p in perts)]
                for lang in sorted({lang for lang, _ in cells})]
        if len(data.runs) > 1:
            out.append(f"<h3>{h(run.name)}</h3>")
        out.append(_table(["language", *map(h, perts)], rows, set(range(1, len(perts) + 1))))
        weak = [s for s in run.cards.segmentation if s.weak]
        if weak:
            out.append("<p>Segmentation weak (no verdict on these cards): " + "; ".join(
                f"{h(s.lang)}: {s.sentences_per_unit:.2f} sentences per unit over {s.units} units" for s in weak)
                + "</p>")
        if run.cards.removed_by_filters:
            out.append("<p>References removed by the corpus filters: " + "; ".join(
                f"{h(r.lang)}: {r.count} with {h(r.reason)}" for r in run.cards.removed_by_filters) + "</p>")
    return "".join(out)


@renders("html", "analyses")
def _analyses(data: ReportData, plots: list[Plot]) -> str:
    """Every analysis of the registry that was run, in registry order: its own section where
    ``_ANALYSES`` has one, else its text under its title."""
    from ..analyses import registry

    out = [f"<p class=note>Note: <code>{h(r.run_dir)}/{h(name)}</code> predates the log's newest records; "
           "run the analysis again.</p>" for r in data.runs for name in r.stale]
    for analysis in registry.ANALYSES:
        section = _ANALYSES.get(analysis.name, _analysis_text)
        out += [section(analysis, run, result) for run, result in data.analysis(analysis.name)]
    return "".join(out)


def _analysis_text(analysis, run, result) -> str:
    """An analysis without a section of its own: its text (as the command prints it)."""
    where = "" if analysis.spans_runs else f" ({h(run.name)})"
    return (f"<h2>{h(analysis.title)}{where}</h2><p>From <code>babelrun {h(analysis.name)}</code>.</p>"
            f"<pre>{h(analysis.text(result))}</pre>")


def _calibration(analysis, run, c) -> str:
    out = ["<h2>Cross-lingual bias calibration (CBC)</h2><p>From <code>babelrun calibrate</code>: each "
           "language's ranking of the judges before and after removing their language-specific bias.</p>",
           _table(["language", "raw ranking", "calibrated ranking"],
                  [[h(lang), h(raw), h(cal)] for lang, raw, cal in cbc_rows(c)])]
    if c.agreement is not None:
        a = c.agreement
        out.append(f"<p>Held-out cross-language rank agreement (Kendall τ_b): raw {a.raw.value}, calibrated "
                   f"{a.calibrated.value}, gain {a.gain.value} [{a.gain.lo}, {a.gain.hi}].</p>")
    out.append(f"<p>Significant rank reversals: {len(c.reversals)} of {c.reversal_tests} tests.</p>")
    return "".join(out)


def _invariance(analysis, run, inv) -> str:
    rows = [[h(r.judge), h(r.lang), str(r.matched), _num(r.judgment_flip), _num(r.correctness_flip),
             f"{r.mcnemar_p:.3g}"] for r in inv.rows]
    out = [f"<h2>Language-switch invariance against {h(inv.pivot)}</h2>"]
    if rows:
        out.append(_table(["judge", "language", "matched", "verdict flips", "correctness flips", "McNemar p"],
                          rows, {2, 5}))
    if inv.labelled is not None:
        lab = inv.labelled
        pairs = [[label, h(r.judge), h(r.condition), _num(r.accuracy), _num(r.accuracy_tie_half),
                  _num(r.position_inconsistency), "–" if r.correctness_flip is None else _num(r.correctness_flip),
                  "–" if r.mcnemar_p is None else f"{r.mcnemar_p:.3g}"]
                 for label, part in (("all", lab.all_pairs), ("audit-passing", lab.audit_passing))
                 for r in part.rows if r.subset == "all"]
        out += [f"<p>Labelled pairs across conditions (Judge-LS): the transformation audit flagged "
                f"{len(lab.flagged)} of {lab.all_pairs.pairs} pairs.</p>",
                _table(["pairs", "judge", "condition", "accuracy", "tie-half accuracy", "position inconsistency",
                        "correctness flips", "McNemar p"], pairs, {7})]
    return "".join(out)


def _agreement(analysis, run, a) -> str:
    rows = [[h(j), h(s), acc, h(kappa), str(n)] for j, s, acc, kappa, n in agreement_rows(a)]
    return (f"<h2>Agreement with human labels ({h(run.name)})</h2><p>From <code>babelrun agree</code>: "
            f"{a.matched} of {a.labels_read} labels matched judged pairs; both orders (an item agrees "
            f"when both its verdicts do), Wilson {a.confidence:.0%} intervals.</p>"
            + _table(["judge", "set", "accuracy", "Cohen's κ", "n"], rows, {4}))


def _self_preference(analysis, run, sp) -> str:
    head, rows = summary.self_preference_rows(sp)
    out = [f"<h2>Self-preference ({h(run.name)})</h2><p>From <code>babelrun self-preference</code>: how often "
           "each judge names the worse output when its own family wrote it, against when its family wrote "
           "neither; s = (own − neutral) / (1 − neutral), the share of decisions it hands its family.</p>"]
    out.append(_table(head, [[h(v) for v in row] for row in rows], {6})
               if rows else "<p>No judge declares a family (family: in the manifest).</p>")
    if sp.skipped:
        out.append(f"<p>Judges without a family: {h(', '.join(sp.skipped))}.</p>")
    return "".join(out)


# The analyses (registry names) with a section of their own; the others show their text.
_ANALYSES = {"calibrate": _calibration, "invariance": _invariance, "agree": _agreement,
             "self-preference": _self_preference}


@renders("html", "stats")
def _stats(data: ReportData, plots: list[Plot]) -> str:
    lat = ("p50", "p95", "p99")

    def ms(d: dict, q: str) -> str:
        return "–" if d.get(q) is None else f"{d[q]:g}"

    logged = [[h(run.name), h(s.judge), str(s.records), str(s.ok),
               h(", ".join(f"{k} {n}" for k, n in s.errors.items()) or "0"), str(s.calls), str(s.retries),
               *(ms(s.latency_ms, q) for q in lat), str(s.tokens_in), str(s.tokens_out)]
              for run in data.runs for s in run.log_stats]
    last = [[h(run.name), h(s.judge), str(s.calls), str(s.retries), str(s.rate_limited),
             h(", ".join(f"{k} {n}" for k, n in s.errors.items()) or "0"), *(ms(s.latency_ms, q) for q in lat),
             f"{s.calls_per_s:g}", f"{s.elapsed_s:g}", h(s.stopped or "–")]
            for run in data.runs for s in run.stats]
    return ("<h2>Run statistics</h2><p>From the log: every record of every audit process.</p>"
            + _table(["run", "judge", "records", "ok", "errors", "calls", "retries", "p50 ms", "p95 ms", "p99 ms",
                      "tokens in", "tokens out"], logged, {2, 3, 5, 6, 7, 8, 9, 10, 11})
            + "<p>Every audit process together (<code>stats.json</code>: each process's entry and their "
              "totals; latency percentiles are the busiest process's):</p>"
            + _table(["run", "judge", "calls", "retries", "429s", "failed by kind", "p50 ms", "p95 ms", "p99 ms",
                      "calls/s", "elapsed s", "stopped"], last, {2, 3, 4, 6, 7, 8, 9, 10}))


@renders("html", "spend")
def _spend(data: ReportData, plots: list[Plot]) -> str:
    rows = summary.spend_rows(data)
    if not rows:
        return ""
    return ("<h2>Spend</h2><p>The cost ledger: each judge's spend from the provider's reported usage and "
            "its <code>price</code> (<code>stats.json</code>, every audit process summed), by language and "
            "call kind; records served by the response cache cost nothing.</p>"
            + _table(summary.SPEND_HEADER, [[h(c) for c in row] for row in rows], {3, 4, 5, 6, 7}))


@renders("html", "identities")
def _identities(data: ReportData, plots: list[Plot]) -> str:
    rows = [[h(j.judge), f"<code>{h(j.judge_id)}</code>", h(j.backend or "not in run.yaml"), h(j.model or "–"),
             h(j.endpoint or "–"),
             "–" if j.prompt is None else (f"{h(j.prompt)}"
                                           + ("" if j.prompt_version is None else f" v{h(j.prompt_version)}")
                                           + f" ({h(j.prompt_language)})"),
             h(", ".join(j.served_models) or "–"), h(", ".join(j.fingerprints) or "–")]
            for run in data.runs for j in run.identities]
    return ("<h2>Judge identities</h2><p>From <code>run.yaml</code>; served model and fingerprint as the "
            "provider reported them in the records.</p>"
            + _table(["judge", "judge_id", "backend", "model", "endpoint", "prompt (version, language)",
                      "served model", "fingerprint"], rows))


@renders("html", "pointwise")
def _pointwise(data: ReportData, plots: list[Plot]) -> str:
    """Pointwise judges' cards, and beside the pairwise ones language by language."""
    out = ""
    for run in data.runs:
        rows = summary.pointwise_rows(run.cards)
        if rows:
            out += ("<h2>Pointwise judges</h2><p class=note>Each answer scored alone; the gold is "
                    "“the reference scores higher”. Scale offset: the language's mean reference score − "
                    "the pooled mean (docs/metrics.md, <i>Pointwise metrics</i>).</p>"
                    + _table(summary.POINTWISE_HEADER, [[h(c) for c in r] for r in rows], {2}))
        both = summary.side_by_side_rows(run.cards)
        if both:
            out += ("<h3>Pairwise and pointwise, side by side</h3>"
                    + _table(summary.SIDE_BY_SIDE_HEADER, [[h(c) for c in r] for r in both]))
    return out


@renders("html", "agentic")
def _agentic(data: ReportData, plots: list[Plot]) -> str:
    """Agent-trajectory cards: the agentic families and R_agent, per judge and language."""
    rows = []
    for run in data.runs:
        for jc in run.cards.agentic:
            for label, card in [("all", jc.overall)] + [(f"{lc.lang} ({lc.language})", lc.card) for lc in jc.languages]:
                r = card.reliability
                rows.append([h(jc.judge), h(label), str(card.items),
                             f'<span class="{_band(r.value)}">{_num(r)}</span>{h(mark(card.verdict))}'
                             + _CHANCE * card.below_chance, _num(card.tool_accuracy),
                             _num(card.argument_accuracy), _num(card.hallucination_detection),
                             _num(card.length_bias), _num(card.position_bias, True), _num(card.order_consistency),
                             h(", ".join(card.not_measured) or "–")])
            rows += [[h(jc.judge), f"{h(n.lang)} ({h(n.language)})", "0", f"not judged: {h(n.reason)}",
                      *["–"] * 7] for n in _unjudged(run, "agentic", jc.judge)]
    if not rows:
        return ""
    return ("<h2>Agent trajectories</h2><p class=note>Agentic items are scored apart from the text cards; "
            "R_agent has R's gating (docs/metrics.md). Families absent from the run are not measured "
            "and never scale the score.</p>"
            + _table(["judge", "language", "items", "R_agent", "tool accuracy", "argument accuracy",
                      "hallucination detection", "length bias v", "Δ (slot A)", "κ_ord", "not measured"],
                     rows, {2}))


def _change(change, targeted: bool) -> str:
    if change is None or change.a.value is None or change.b.value is None:
        return "–"
    text = f"{change.a.value:.2f} → {change.b.value:.2f}"
    if change.lo is not None and change.hi is not None:
        text += f"<br><small>{change.delta:+.2f} [{change.lo:+.2f}, {change.hi:+.2f}]</small>"
    return f"<b>{text}</b>" if targeted else text


@renders("html", "mitigations")
def _mitigations(data: ReportData, plots: list[Plot]) -> str:
    """Each mitigation judge beside its base judge on the same presentations, with its price."""
    rows = [[h(r.card.name), h(r.card.kind), h(r.card.base), f"{r.card.calls_per_decision:.2f}"]
            + [_change(c, t) for c, t in zip(r.changes, r.targeted, strict=True)]
            + ["–" if r.mcnemar_p is None else f"{r.mcnemar_p:.2g}", h(r.note)]
            for run in data.runs for r in mitigation_rows(run.cards)]
    if not rows:
        return ""
    return ("<h2>Mitigations against their base judge</h2><p class=note>Base → mitigation on the same "
            "presentations, the change with a paired item bootstrap interval; McNemar p on per-presentation "
            "correctness; calls per decision: what one deployed verdict costs in inner judge calls (the base "
            "judge: 1). Bold: what the mitigation targets.</p>"
            + _table(["mitigation", "kind", "base", "calls / decision", *[label for _, label in COMPARED],
                      "McNemar p", ""], rows, {3}))


def _text(label: str, text: str | None) -> str:
    return f'<div><i>{label}</i><div class="text" dir="auto">{h(text)}</div></div>'


def _raw(text: str | None) -> str:
    return "<i>(empty)</i>" if not text else f"<span class=raw>{h(text)}</span>"


def _example(e: Example) -> str:
    replies = "".join(f"<li>{h(r.order)}: {_raw(r.raw)} → "
                      f"{h(r.slot or '–')} ({h(r.verdict or '–')})</li>" for r in e.replies)
    texts = (_text("question", e.prompt) + _text("reference (the better answer)", e.reference)
             + _text(f"perturbed ({h(e.perturbation)} {e.severity:g})", e.perturbed)
             if e.reference is not None else "<p class=note>texts unavailable</p>")
    cue = f" · cue <code>{h(e.cue)}</code>" if e.cue else ""
    return (f"<details><summary>{h(e.lang)} · {h(e.perturbation)} {e.severity:g}{cue} · item "
            f"<code>{h(e.item_id)}</code></summary><ul>{replies}</ul>{texts}</details>")


@renders("html", "examples")
def _examples(data: ReportData, plots: list[Plot]) -> str:
    out = ["<h2>Example failures</h2><p>A few items per judge and failure mode (the first by item id), "
           "with the judge's raw replies and the item's texts, regenerated from the run's manifest. Any "
           "item, with the messages each judge was sent: <code>babelrun show RUN ITEM_ID</code>.</p>"]
    for run in data.runs:
        if run.texts_note:
            out.append(f"<p class=note>{h(run.name)}: {h(run.texts_note)}</p>")
        by: dict[tuple[str, str], dict[str, list[Example]]] = defaultdict(lambda: defaultdict(list))
        for e in run.examples:
            by[(e.judge, e.judge_id)][e.mode].append(e)
        for (judge, jid), modes in by.items():
            out.append(f"<h3>{h(judge)} <code>{h(jid)}</code></h3>")
            for mode, examples in modes.items():
                out.append(f"<h4>{h(MODES[mode])}</h4>" + "".join(_example(e) for e in examples))
    return "".join(out)


def render(data: ReportData, plots: list[Plot]) -> str:
    """The page: the header, the first section (the matrix), the contents, then every other
    section that has something to show, in ``sections.SECTIONS`` order."""
    shown = [(s.name, s.title, html) for s, section in rendered("html") if (html := section(data, plots))]
    toc = "".join(f'<li><a href="#{a}">{h(title)}</a></li>' for a, title, _ in shown)
    (first, _, opening), rest = shown[0], shown[1:]
    body = "\n".join([_header(data, plots), f'<section id="{first}">{opening}</section>',
                      f'<nav class=toc><b>Contents</b><ol>{toc}</ol></nav>',
                      *(f'<section id="{a}">{html}</section>' for a, _, html in rest)])
    return ("<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
            f'<meta http-equiv="Content-Security-Policy" content="{h(CSP)}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>babelrun report</title><style>{STYLE}</style></head><body>\n{body}\n"
            f"<p class=note>babelrun {h(__version__)}</p></body></html>\n")


from . import robustness  # noqa: E402, F401 (registers the robustness section's renderers)
