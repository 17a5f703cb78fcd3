"""The report as one self-contained HTML page: no script, no outside request.

The page is a list of section functions ``(ReportData, plots) -> str`` (``SECTIONS``); a new
card family adds a function. Every piece of judge, corpus or manifest text goes through
``safe.h`` (HTML-escaped with quotes, bidi controls made visible); plots are inlined as SVG
drawn with glyph paths (``plots.py``). A Content-Security-Policy forbids scripts and every
outside fetch, as a second line of defence.
"""

from __future__ import annotations

from collections import defaultdict

from .. import __version__
from ..score import Card, Interval
from . import summary
from .data import MODES, Example, ReportData
from .plots import Plot
from .safe import h
from .summary import COMPARED, cbc_rows, leaderboard, mitigation_rows
from .summary import number as _num

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"

STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2em auto;max-width:1200px;padding:0 1em;color:#222}
h1{font-size:1.6em}h2{margin-top:2em;border-bottom:1px solid #ddd}h3{margin-top:1.4em}
table{border-collapse:collapse;margin:.6em 0}td,th{border:1px solid #ddd;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.n{text-align:right;font-variant-numeric:tabular-nums}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(170px,1fr));gap:8px}
.card{border:1px solid #ccc;border-radius:6px;padding:6px 8px;font-size:12px}
.green{background:#d9f2d9}.yellow{background:#fff3c4}.red{background:#f8d7d7}.none{background:#eee}
.card b{font-size:14px}.bar{position:relative;height:8px;background:#fff;border:1px solid #aaa;margin:4px 0}
.fill{position:absolute;left:0;top:0;bottom:0;background:#555}.ci{position:absolute;top:3px;height:2px;background:#000}
.mark{position:absolute;top:-3px;bottom:-3px;width:2px;background:#c00}
figure{margin:1em 0}figure svg{max-width:100%;height:auto}figcaption{font-weight:bold}
.text{white-space:pre-wrap;border-left:3px solid #ccc;padding:2px 8px;margin:2px 0;background:#fafafa;max-height:16em;overflow:auto}
.raw{font-family:ui-monospace,monospace;white-space:pre-wrap;background:#f4f4f4;padding:1px 4px}
.note{color:#555}details{margin:.4em 0}summary{cursor:pointer}
"""


def _band(value: float | None) -> str:
    if value is None:
        return "none"
    return "green" if value >= 0.70 else "yellow" if value >= 0.60 else "red"


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
    t = data.thresholds
    return (f"<h1>babelrun report</h1><ul>{runs}</ul>"
            f"<p class=note>Intervals: {round(conf * 100)}% item-clustered bootstrap (Wilson for tie and "
            f"invalid rates). Cards: <span class=green>green R ≥ 0.70</span>, <span class=yellow>yellow "
            f"R ≥ 0.60</span>, <span class=red>red R &lt; 0.60</span>; the red mark on each bar is the "
            f"{t.reliability} deployment threshold. Definitions: README, <i>Metrics</i>.</p>")


def _leaderboard(data: ReportData, plots: list[Plot]) -> str:
    rows = leaderboard(data)
    if not rows:
        return "<h2>Leaderboard</h2><p>No judge has counted records yet.</p>"
    t = data.thresholds.reliability
    body = [[str(i), h(r.judge), f"<code>{h(r.judge_id)}</code>",
             f'<span class="{_band(r.card.reliability.value)}">{_num(r.card.reliability)}</span>',
             _num(r.card.accuracy),
             "–" if r.worst is None else f"{h(r.worst.lang)} ({h(r.worst.language)}) {_num(r.worst.card.reliability)}",
             f"{r.below}/{r.languages}", str(r.card.items)] for i, r in enumerate(rows, 1)]
    return ("<h2>Leaderboard</h2>" + _table(
        ["#", "judge", "judge_id", "R", "accuracy", "worst language (R)", f"languages below {t}", "items"],
        body, {0, 6, 7}))


def _recommendations(data: ReportData, plots: list[Plot]) -> str:
    t = data.thresholds
    intro = (f"<p>Per judge × language, when its card calls for it: R &lt; {t.reliability} → route the "
             f"language elsewhere or ensemble; κ_ord &lt; {t.consistency} → score both orders and average; "
             f"|Δ| ≥ {t.position} (interval excluding 0) → position debiasing; v &gt; {t.verbosity} "
             "(interval above 0.5) → length normalisation in the prompt.</p>")
    if not data.recommendations:
        return "<h2>Recommendations</h2>" + intro + "<p>None: every card is within the thresholds.</p>"
    by: dict[tuple, list[str]] = defaultdict(list)
    for r in data.recommendations:
        by[(r.judge, r.lang, r.language)].append(h(r.advice))
    rows = [[h(j), f"{h(lang)} ({h(name)})", "<br>".join(adv)] for (j, lang, name), adv in by.items()]
    return "<h2>Recommendations</h2>" + intro + _table(["judge", "language", "advice"], rows)


def _bar(iv: Interval, threshold: float) -> str:
    if iv.value is None:
        return '<div class="bar"></div>'
    ci = (f'<div class="ci" style="left:{iv.lo * 100:.1f}%;width:{(iv.hi - iv.lo) * 100:.1f}%"></div>'
          if iv.lo is not None and iv.hi is not None else "")
    return (f'<div class="bar"><div class="fill" style="width:{iv.value * 100:.1f}%"></div>{ci}'
            f'<div class="mark" style="left:{threshold * 100:.1f}%"></div></div>')


def _card(title: str, card: Card, threshold: float) -> str:
    r = card.reliability
    return (f'<div class="card {_band(r.value)}"><b>{title}</b><br>R {_num(r)}{_bar(r, threshold)}'
            f"acc {_num(card.accuracy)}<br>Δ {_num(card.position_bias, True)}<br>κ_ord "
            f"{_num(card.order_consistency)}<br>v {_num(card.verbosity)}<br>invalid "
            f"{card.invalid_rate.value or 0:.2f} · ties {card.tie_rate.value or 0:.2f} · {card.items} items</div>")


def _metric_row(label: str, card: Card) -> list[str]:
    return [label, str(card.items), _num(card.reliability), _num(card.accuracy), _num(card.position_bias, True),
            _num(card.verbosity), _num(card.order_consistency), f"{card.tie_rate.value or 0:.2f}",
            f"{card.invalid_rate.value or 0:.2f}"]


_METRIC_HEAD = ["items", "R", "accuracy", "Δ (slot A)", "v (longer)", "κ_ord", "ties", "invalid"]


def _language_cards(data: ReportData, plots: list[Plot]) -> str:
    t = data.thresholds.reliability
    out = ["<h2>Reliability cards per language</h2>"]
    for _, jc in data.judges():
        cards = "".join(_card(f"{h(lc.lang)} <small>{h(lc.language)}</small>", lc.card, t) for lc in jc.languages)
        rows = [_metric_row("all", jc.overall)] + [_metric_row(f"{h(lc.lang)} ({h(lc.language)})", lc.card)
                                                   for lc in jc.languages]
        per = [_metric_row(f"{h(lc.lang)} / {h(pc.perturbation)}", pc.card) for lc in jc.languages
               for pc in lc.perturbations]
        out += [f"<h3>{h(jc.judge)} <code>{h(jc.judge_id)}</code></h3>",
                f'<div class="cards">{_card("all languages", jc.overall, t)}{cards}</div>',
                "<details><summary>table</summary>" + _table(["language", *_METRIC_HEAD], rows, {1, 7, 8})
                + "</details>",
                "<details><summary>by perturbation</summary>"
                + _table(["language / perturbation", *_METRIC_HEAD], per, {1, 7, 8}) + "</details>"]
    return "".join(out)


def _plots(data: ReportData, plots: list[Plot]) -> str:
    if not plots:
        return ""
    figures = "".join(f'<figure id="plot-{h(p.name)}"><figcaption>{h(p.title)}</figcaption>{p.svg}'
                      f'<p class=note>plots/{h(p.name)}.png, plots/{h(p.name)}.svg</p></figure>' for p in plots)
    return "<h2>Plots</h2>" + figures


def _audit(data: ReportData, plots: list[Plot]) -> str:
    out = ["<h2>Perturbation audit</h2><p>Items emitted / skipped as no-ops (the perturbation changed "
           "nothing, so the gold label would be false), per language and perturbation, all severities.</p>"]
    for run in data.runs:
        cells: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
        for row in run.cards.perturbation_audit:
            cells[(row.lang, row.perturbation)][0] += row.emitted
            cells[(row.lang, row.perturbation)][1] += row.skipped
        if not cells:
            continue
        perts = sorted({p for _, p in cells})
        rows = [[h(lang), *("{} / {}".format(*cells[(lang, p)]) for p in perts)]
                for lang in sorted({lang for lang, _ in cells})]
        if len(data.runs) > 1:
            out.append(f"<h3>{h(run.name)}</h3>")
        out.append(_table(["language", *map(h, perts)], rows, set(range(1, len(perts) + 1))))
        if run.cards.removed_by_filters:
            out.append("<p>References removed by the corpus filters: " + "; ".join(
                f"{h(r.lang)}: {r.count} with {h(r.reason)}" for r in run.cards.removed_by_filters) + "</p>")
    return "".join(out)


def _analyses(data: ReportData, plots: list[Plot]) -> str:
    out = [f"<p class=note>Note: <code>{h(r.run_dir)}/{h(name)}</code> predates the log's newest records; "
           "run the analysis again.</p>" for r in data.runs for name in r.stale]
    c = data.calibration
    if c is not None:
        out += ["<h2>Cross-lingual bias calibration (CBC)</h2><p>From <code>babelrun calibrate</code>: each "
                "language's ranking of the judges before and after removing their language-specific bias.</p>",
                _table(["language", "raw ranking", "calibrated ranking"],
                       [[h(lang), h(raw), h(cal)] for lang, raw, cal in cbc_rows(c)])]
        if c.agreement is not None:
            a = c.agreement
            out.append(f"<p>Held-out cross-language rank agreement (Kendall τ_b): raw {a.raw.mean}, calibrated "
                       f"{a.calibrated.mean}, gain {a.gain.mean} [{a.gain.lo}, {a.gain.hi}].</p>")
        out.append(f"<p>Significant rank reversals: {len(c.reversals)} of {c.reversal_tests} tests.</p>")
    for inv in data.invariance:
        rows = [[h(r.judge), h(r.lang), str(r.matched), _num(r.judgment_flip), _num(r.correctness_flip),
                 f"{r.mcnemar_p:.3g}"] for r in inv.rows]
        out += [f"<h2>Language-switch invariance against {h(inv.pivot)}</h2>",
                _table(["judge", "language", "matched", "verdict flips", "correctness flips", "McNemar p"], rows,
                       {2, 5})]
    return "".join(out)


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
            + "<p>The last audit process (<code>stats.json</code>):</p>"
            + _table(["run", "judge", "calls", "retries", "429s", "failed by kind", "p50 ms", "p95 ms", "p99 ms",
                      "calls/s", "elapsed s", "stopped"], last, {2, 3, 4, 6, 7, 8, 9, 10}))


def _identities(data: ReportData, plots: list[Plot]) -> str:
    rows = [[h(j.judge), f"<code>{h(j.judge_id)}</code>", h(j.backend or "not in run.yaml"), h(j.model or "–"),
             h(j.endpoint or "–"),
             "–" if j.prompt is None else (f"{h(j.prompt)}" + ("" if j.prompt_version is None else f" v{h(j.prompt_version)}")
                                           + f" ({h(j.prompt_language)})"),
             h(", ".join(j.served_models) or "–"), h(", ".join(j.fingerprints) or "–")]
            for run in data.runs for j in run.identities]
    return ("<h2>Judge identities</h2><p>From <code>run.yaml</code>; served model and fingerprint as the "
            "provider reported them in the records.</p>"
            + _table(["judge", "judge_id", "backend", "model", "endpoint", "prompt (version, language)",
                      "served model", "fingerprint"], rows))


def _pointwise(data: ReportData, plots: list[Plot]) -> str:
    """Pointwise judges' cards, and beside the pairwise ones language by language."""
    out = ""
    for run in data.runs:
        rows = summary.pointwise_rows(run.cards)
        if rows:
            out += ("<h2>Pointwise judges</h2><p class=note>Each answer scored alone; the gold is "
                    "“the reference scores higher”. Scale offset: the language's mean reference score − "
                    "the pooled mean (README, <i>Pointwise metrics</i>).</p>"
                    + _table(summary.POINTWISE_HEADER, [[h(c) for c in r] for r in rows], {2}))
        both = summary.side_by_side_rows(run.cards)
        if both:
            out += ("<h3>Pairwise and pointwise, side by side</h3>"
                    + _table(summary.SIDE_BY_SIDE_HEADER, [[h(c) for c in r] for r in both]))
    return out


def _agentic(data: ReportData, plots: list[Plot]) -> str:
    """Agent-trajectory cards: the agentic families and R_agent, per judge and language."""
    rows = []
    for run in data.runs:
        for jc in run.cards.agentic:
            for label, card in [("all", jc.overall)] + [(f"{lc.lang} ({lc.language})", lc.card) for lc in jc.languages]:
                r = card.reliability
                rows.append([h(jc.judge), h(label), str(card.items),
                             f'<span class="{_band(r.value)}">{_num(r)}</span>', _num(card.tool_accuracy),
                             _num(card.argument_accuracy), _num(card.hallucination_detection),
                             _num(card.length_bias), _num(card.position_bias, True), _num(card.order_consistency),
                             h(", ".join(card.not_measured) or "–")])
    if not rows:
        return ""
    return ("<h2>Agent trajectories</h2><p class=note>Agentic items are scored apart from the text cards; "
            "R_agent has R's gating (README, <i>Metrics</i>). Families absent from the run are not measured "
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
    return (f"<details><summary>{h(e.lang)} · {h(e.perturbation)} {e.severity:g} · item "
            f"<code>{h(e.item_id)}</code></summary><ul>{replies}</ul>{texts}</details>")


def _examples(data: ReportData, plots: list[Plot]) -> str:
    out = ["<h2>Example failures</h2><p>A few items per judge and failure mode (the first by item id), "
           "with the judge's raw replies and the item's texts, regenerated from the run's manifest.</p>"]
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


SECTIONS = [_header, _leaderboard, _recommendations, _language_cards, _pointwise, _mitigations, _agentic, _plots, _audit,
            _analyses, _stats, _identities, _examples]


def render(data: ReportData, plots: list[Plot]) -> str:
    body = "\n".join(filter(None, (section(data, plots) for section in SECTIONS)))  # empty: nothing to show
    return ("<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
            f'<meta http-equiv="Content-Security-Policy" content="{h(CSP)}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>babelrun report</title><style>{STYLE}</style></head><body>\n{body}\n"
            f"<p class=note>babelrun {h(__version__)}</p></body></html>\n")
