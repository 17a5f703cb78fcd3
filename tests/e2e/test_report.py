"""The report: untrusted text stays inert, plots are valid files, the page is self-contained,
and `babelrun report` rebuilds everything from the log alone."""

from __future__ import annotations

import re
import shutil
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import msgspec
import pytest

from babelrun.app.cli import main
from babelrun.report import recommend
from babelrun.score import Card, Interval
from helpers import LoopbackServer, quiet_audit, simulated, write_manifest

SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(1)>'
RLO = "\u202e"
PLOT_NAMES = ("reliability_vs_accuracy", "metrics_heatmap", "radar", "perturbation_accuracy", "cbc_ranks",
              "language_switch")


class Tags(HTMLParser):
    """Every element and attribute a browser would build from the page."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += attrs

    handle_startendtag = handle_starttag


def parse(html: str) -> Tags:
    tags = Tags()
    tags.feed(html)
    tags.close()
    return tags


class HostileJudge(LoopbackServer):
    """An OpenAI-compatible judge whose replies are attacks, plain verdicts in between."""

    REPLIES = (SCRIPT, IMG, f"{RLO}A", "A", "B", f"B {SCRIPT}")

    def __init__(self):
        self.n = 0

    def add_routes(self, app) -> None:
        from aiohttp import web

        async def chat(request):
            await request.read()
            self.n += 1
            content = self.REPLIES[self.n % len(self.REPLIES)]
            return web.json_response({
                "id": "x", "object": "chat.completion", "model": f"served-{SCRIPT}",
                "system_fingerprint": f"fp{IMG}",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 1}})

        app.router.add_post("/v1/chat/completions", chat)


def _hostile_corpus(path: Path) -> None:
    rows = []
    for lang in ("en", "ar"):
        for i in range(3):
            rows.append({
                "id": f"u{i}", "language": lang, "prompt": f"Question {i} {SCRIPT}?",
                "reference": (f"First sentence {SCRIPT} number {i + 10}. Second {RLO}sentence {IMG} here. "
                              f"Third sentence about Paris and Berlin. Fourth one ends it."),
            })
    path.write_bytes(b"\n".join(msgspec.json.encode(r) for r in rows) + b"\n")


def test_html_holds_no_live_markup_from_references_or_replies(tmp_path):
    corpus = tmp_path / "refs.jsonl"
    _hostile_corpus(corpus)
    with HostileJudge() as server:
        judge = {"name": "hostile<svg onload=alert(1)>", "backend": "openai", "model": "m",
                 "endpoint": server.url + "/v1", "retries": 0, "concurrency": 2}
        path = write_manifest(tmp_path, [judge], corpus={"sources": [{"kind": "jsonl", "path": str(corpus)}],
                                                         "languages": "all", "references_per_language": 3},
                              perturbations=[{"name": "truncate", "severities": [0.5]},
                                             {"name": "repeat_pad", "severities": [0.5]}])
        result = quiet_audit(path)
    assert result.exit_code == 0
    run = tmp_path / "run"
    page = (run / "report.html").read_text()
    tags = parse(page)
    assert "script" not in tags.tags and "img" not in tags.tags
    assert not [name for name, _ in tags.attrs if name.lower().startswith("on")]
    assert RLO not in page and "⟦U+202E⟧" in page  # shown, not obeyed
    # The attacks are displayed as text: from the replies, the served model and the references.
    assert page.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 3
    assert "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;" in page
    assert "First sentence &lt;script&gt;" in page  # an example's reference text
    for svg in (run / "plots").glob("*.svg"):
        text = svg.read_text()
        assert "<script" not in text and RLO not in text, svg
    md = (run / "report.md").read_text()
    assert not re.search(r"(?<!\\)<[A-Za-z/!?]", md) and RLO not in md  # no tag a renderer would read
    assert "\\<script\\>alert(1)\\</script\\>" in md  # Markdown-escaped, still readable

    # With the corpus gone, the report says so and still shows ids and raw replies.
    corpus.unlink()
    (run / "report.html").unlink()
    assert main(["report", str(run)]) == 0
    page = (run / "report.html").read_text()
    assert "texts unavailable" in page and "First sentence" not in page
    assert "script" not in parse(page).tags and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def _parallel_corpus(path: Path) -> None:
    langs = ("en", "fr", "de", "es", "sw", "hi")
    rows = [{"id": f"unit{i}", "language": lang, "prompt": f"Tell me about unit {i} ({lang}).",
             "reference": (f"Unit {i} in {lang} opens in Paris in {1990 + i}. Then Berlin sends {i + 3} letters. "
                           f"Madrid answers the next morning. Everyone agrees in the end.")}
            for lang in langs for i in range(4)]
    path.write_bytes(b"\n".join(msgspec.json.encode(r) for r in rows) + b"\n")


def _png_ok(path: Path) -> bool:
    data = path.read_bytes()
    return data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR" and len(data) > 1000


def _outside_urls(page: str) -> list[str]:
    refs = [v for name, v in parse(page).attrs if name.lower() in ("src", "href", "xlink:href", "action")]
    refs += re.findall(r"url\(\s*['\"]?([^'\")]*)", page)
    return [r for r in refs if r and re.match(r"\s*(https?:|//)", r, re.I)]


@pytest.fixture(scope="module")
def two_judges(tmp_path_factory):
    """A two-judge, six-language run over a parallel corpus, with calibrate and invariance run."""
    tmp = tmp_path_factory.mktemp("report")
    corpus = tmp / "refs.jsonl"
    _parallel_corpus(corpus)
    judges = [simulated("good", default_accuracy=0.95, accuracy={"sw": 0.6}, position_bias=0.05),
              simulated("leaning", default_accuracy=0.8, position_bias=0.3, verbosity_bias=0.5, invalid_rate=0.05)]
    path = write_manifest(tmp, judges, corpus={"sources": [{"kind": "jsonl", "path": str(corpus)}],
                                               "languages": "all", "references_per_language": 4},
                          scoring={"bootstrap": 100})
    assert quiet_audit(path).exit_code == 0
    run = tmp / "run"
    assert main(["calibrate", str(run), "--replicates", "20"]) == 0
    assert main(["invariance", str(run)]) == 0
    assert (run / "calibration.json").is_file() and (run / "invariance.json").is_file()
    assert main(["report", str(run)]) == 0
    return run


def test_every_plot_is_a_valid_svg_and_with_png_a_png_too_and_the_page_is_self_contained(two_judges, tmp_path):
    run = two_judges
    for name in PLOT_NAMES:
        assert not (run / "plots" / f"{name}.png").exists(), name  # a raster copy only when asked
        root = ET.parse(run / "plots" / f"{name}.svg").getroot()
        assert root.tag.endswith("svg"), name
    # --png adds the raster copies, the SVG files unchanged; a report without it removes them
    # again (they would show the numbers of an earlier report)
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    assert main(["report", str(copy), "--png"]) == 0
    for name in PLOT_NAMES:
        assert _png_ok(copy / "plots" / f"{name}.png"), name
        assert (copy / "plots" / f"{name}.svg").read_bytes() == (run / "plots" / f"{name}.svg").read_bytes(), name
    assert main(["report", str(copy)]) == 0
    assert not list((copy / "plots").glob("*.png"))
    page = (run / "report.html").read_text()
    assert _outside_urls(page) == []
    tags = parse(page)
    assert tags.tags.count("svg") == len(PLOT_NAMES)  # every plot inlined
    assert not {"script", "link", "iframe", "object", "embed", "img"} & set(tags.tags)
    assert "Content-Security-Policy" in page
    ids = [v for name, v in tags.attrs if name == "id"]
    assert len(ids) == len(set(ids)) > 100  # the inlined figures share no id
    refs = {v[1:] for name, v in tags.attrs if name in ("href", "xlink:href") and v.startswith("#")}
    refs |= set(re.findall(r"url\(#([^)]+)\)", page))
    assert refs and refs <= set(ids)  # and every internal reference resolves


def test_markdown_and_html_show_the_same_numbers(two_judges):
    cards = msgspec.json.decode((two_judges / "cards.json").read_bytes())
    md = (two_judges / "report.md").read_text()
    page = (two_judges / "report.html").read_text()
    assert [j["judge"] for j in cards["judges"]] == ["good", "leaning"]
    for judge in cards["judges"]:
        r = judge["overall"]["reliability"]
        text = f"{r['value']:.2f} [{r['lo']:.2f}, {r['hi']:.2f}]"
        assert text in md and text in page
        sw = next(lc for lc in judge["languages"] if lc["lang"] == "sw")["card"]["accuracy"]
        assert f"{sw['value']:.2f} [{sw['lo']:.2f}, {sw['hi']:.2f}]" in md
    # The leaderboard puts the better judge first, in both.
    board = md.split("## Leaderboard")[1].split("##")[0]
    assert board.index("| good |") < board.index("| leaning |")
    assert page.index("<td>good</td>") < page.index("<td>leaning</td>")
    # The leaning judge's position bias (0.3) and verbosity (0.5) call for advice; the good
    # judge's Swahili (accuracy 0.6) for routing.
    # Grouped: one line per judge and action, listing its languages with their values.
    assert re.search(r"\| leaning \| position debiasing.* \| \d+ \| \w+ 0\.\d\d", md)
    assert re.search(r"\| good \| route to another judge.* \| \d+ \| (\w+ 0\.\d\d, )*sw 0\.\d\d", md)
    assert len(re.findall(r"^\| good \| route to another judge", md, re.M)) == 1
    assert "## Cross-lingual bias calibration" in md and "## Language-switch invariance against en" in md


def test_report_rebuilds_everything_from_the_log_alone(two_judges, tmp_path):
    run = tmp_path / "copy"
    import shutil

    shutil.copytree(two_judges, run)
    before = {name: (run / name).read_bytes() for name in ("cards.json", "report.md", "report.html")}
    svg = (run / "plots" / "radar.svg").read_bytes()
    for name in ("cards.json", "report.md", "report.html", "judgements.parquet"):
        (run / name).unlink()
    shutil.rmtree(run / "plots")
    assert main(["report", str(run)]) == 0
    for name, data in before.items():  # the same bytes, but for the run directory's path
        assert (run / name).read_bytes() == data.replace(bytes(two_judges), bytes(run)), name
    assert (run / "plots" / "radar.svg").read_bytes() == svg


def test_an_audit_draws_the_plots_the_report_draws(two_judges, tmp_path):
    """An audit hands its plot-drawing children the cards and the analyses' results alone, as
    soon as it has scored (``report.data.plotted``): the plots are byte for byte those that
    `babelrun report` draws from all it gathers, the calibration and invariance figures too."""
    import shutil

    folder = tmp_path / "copy"
    shutil.copytree(two_judges.parent, folder)  # the manifest, the corpus and the run
    shutil.rmtree(folder / "run" / "plots")
    assert quiet_audit(folder / "manifest.yaml").exit_code == 0  # nothing to judge: scored, reported
    plots = folder / "run" / "plots"
    audited = {p.name: p.read_bytes() for p in sorted(plots.iterdir())}
    assert {f"{name}.svg" for name in PLOT_NAMES} <= set(audited)
    assert main(["report", str(folder / "run")]) == 0
    assert {p.name: p.read_bytes() for p in sorted(plots.iterdir())} == audited


def test_several_runs_make_one_leaderboard(two_judges, tmp_path, capsys):
    other = tmp_path / "other"
    path = write_manifest(other.parent, [simulated("third", default_accuracy=0.7)], output_dir=str(other),
                          corpus={"sources": [{"kind": "bundled"}], "languages": ["en", "sw"],
                                  "references_per_language": 2}, scoring={"bootstrap": 0})
    assert quiet_audit(path).exit_code == 0
    assert main(["report", str(two_judges), str(other)]) == 2  # where to write, with several?
    assert main(["report", str(two_judges), str(other), "--out", str(tmp_path / "both"), "--no-html"]) == 0
    board = (tmp_path / "both" / "report.md").read_text().split("## Leaderboard")[1].split("\n## ")[0]
    assert {"| good |", "| leaning |", "| third |"} <= set(re.findall(r"\| (?:good|leaning|third) \|", board))
    assert not (tmp_path / "both" / "report.html").exists()
    assert "## Leaderboard" in capsys.readouterr().out


def _card(r=0.8, k=0.9, d=(0.0, -0.05, 0.05), v=(0.5, 0.45, 0.55)) -> Card:
    def iv(x):
        return Interval(*x, 100) if isinstance(x, tuple) else Interval(x, x - 0.05, x + 0.05, 100)
    return Card(50, 100, iv(0.9), iv(d), iv(v), iv(k), iv(r), iv(0.0), iv(0.0))


@pytest.mark.parametrize(("card", "expected"), [
    (_card(), []),
    (_card(r=0.55), ["reliability"]),           # R's interval [0.50, 0.60] below the bar: fail
    (_card(r=0.6), ["uncertain"]),              # [0.55, 0.65] straddles the 0.65 bar: more items decide it
    (_card(r=0.72), []),                        # [0.67, 0.77]: pass
    (_card(k=0.7), ["consistency"]),
    (_card(d=(-0.2, -0.3, -0.1)), ["position"]),
    (_card(d=(0.2, -0.02, 0.4)), []),           # the interval holds 0: not shown to be biased
    (_card(v=(0.7, 0.6, 0.8)), ["verbosity"]),
    (_card(v=(0.7, 0.45, 0.9)), []),
    (_card(r=0.3, k=0.5, d=(0.4, 0.3, 0.5), v=(0.8, 0.7, 0.9)),
     ["reliability", "consistency", "position", "verbosity"]),
])
def test_recommendation_rules(card, expected):
    assert [rule for rule, _ in recommend.rules(card)] == expected


def test_an_analysis_older_than_the_log_is_flagged(two_judges, tmp_path):
    import os
    import shutil

    run = tmp_path / "copy"
    shutil.copytree(two_judges, run)
    assert "predates" not in (run / "report.md").read_text()
    segment = sorted((run / "log").glob("*.jsonl"))[-1]
    later = (run / "calibration.json").stat().st_mtime + 10
    os.utime(segment, (later, later))  # as if the audit had added records since
    assert main(["report", str(run), "--no-html"]) == 0
    text = (run / "report.md").read_text()
    assert "calibration.json predates the log's newest records" in text
    assert "invariance.json predates the log's newest records" in text
