"""The report at scale: 10 judges × 200 languages stays one readable page of bounded size, and
opens with the judge × language matrix."""

from __future__ import annotations

import importlib
import re

import numpy as np

from babelrun.core.items import PerturbationAudit
from babelrun.report import html, plots
from babelrun.report.data import ReportData, RunReport
from babelrun.report.recommend import recommend
from babelrun.score import Card, Cards, Interval, JudgeCards, LanguageCard, PerturbationCard

markdown = importlib.import_module("babelrun.report.markdown")

JUDGES, LANGS = 10, 200
NOT_JUDGED = {(3, 17), (9, 199)}  # (judge, language) planned but with no records
PAGE_BOUND = 3_000_000  # bytes of report.html, plots inlined; measured 2.3 MB


def _iv(v: float) -> Interval:
    return Interval(round(v, 4), round(max(0.0, v - 0.05), 4), round(min(1.0, v + 0.05), 4), 40)


def _card(r: float, rng) -> Card:
    return Card(40, 80, _iv(min(1.0, r + 0.1)), _iv(rng.uniform(-0.2, 0.2)), _iv(rng.uniform(0.3, 0.7)),
                _iv(rng.uniform(0.5, 1.0)), _iv(r), _iv(0.01), _iv(0.02))


def synthetic(judges: int = JUDGES, langs: int = LANGS) -> ReportData:
    rng = np.random.default_rng(0)
    codes = [f"l{i:03d}" for i in range(langs)]
    out = []
    for j in range(judges):
        cards = [LanguageCard(code, f"Language {code}", _card(rng.uniform(0.3, 0.95), rng),
                              [PerturbationCard(p, _card(rng.uniform(0.3, 0.95), rng)) for p in ("drop", "swap")])
                 for i, code in enumerate(codes) if (j, i) not in NOT_JUDGED]
        out.append(JudgeCards(f"judge-{j}", f"id{j:06d}", _card(0.7, rng), cards))
    audit = [PerturbationAudit(code, p, 0.5, 10, 0) for code in codes for p in ("drop", "swap")]
    run = RunReport("/runs/synthetic", "synthetic", "0", Cards(out, audit, 100, 0.95), [], [], [], None, [], None)
    return ReportData([run], recommend([(run, jc) for jc in out]))


def test_ten_judges_by_two_hundred_languages(tmp_path):
    data = synthetic()
    page = html.render(data, plots.render(data, tmp_path))
    assert len(page.encode()) < PAGE_BOUND, len(page.encode())
    # The matrix is the first section, before the contents and everything else.
    body = page.split("<body>", 1)[1]
    sections = re.findall(r'<section id="(\w+)"', body)
    assert sections[0] == "matrix" and sections[1] == "leaderboard"
    assert (body.index('<section id="matrix">') < body.index("<nav class=toc>")
            < body.index('<section id="leaderboard">'))
    assert body.index('<section id="matrix">') < body.index("<h2")
    # Its default view (by language code) has one row per language and a cell per judge.
    view = page.split('<div class=view id="m-lang">')[1].split("</div>")[0]
    rows = re.findall(r"<tr><td class=l>(l\d{3}) .*?</tr>", view)
    assert rows == [f"l{i:03d}" for i in range(LANGS)]
    cells = re.findall(r"<tr><td class=l>.*?</tr>", view)
    assert all(c.count("<td") == 1 + JUDGES for c in cells)
    assert view.count("n/j") == len(NOT_JUDGED) and view.count("title=\"not judged") == len(NOT_JUDGED)
    # A re-sorted view per judge and one for the worst language, each the 50 worst.
    assert len(re.findall(r'<div class=view id="m-j\d+">', page)) == JUDGES
    worst = page.split('<div class=view id="m-worst">')[1].split("</div>")[0]
    assert len(re.findall(r"<tr><td class=l>", worst)) == html.MATRIX_VIEW_ROWS
    # Recommendations: one line per judge and action, not per language.
    recs = page.split('<section id="recommendations">')[1].split("</section>")[0]
    assert recs.count("<tr>") - 1 == len({(r.judge, r.rule) for r in data.recommendations})


def test_markdown_matrix_has_every_planned_cell():
    text = markdown.render_report(synthetic(3, 40))
    assert text.index("## Judge × language") < text.index("## Leaderboard")
    section = text.split("## Judge × language")[1].split("\n## ")[0]
    rows = [line for line in section.splitlines() if re.match(r"\| l\d{3} \|", line)]
    assert len(rows) == 40 and all(line.count("|") == 3 + 2 for line in rows)
    assert section.count("n/j") == 1  # judge 3 is not in a 3-judge report; (9, 199) neither
