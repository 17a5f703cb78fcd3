"""``score``, ``report``, ``compact``, ``export``, ``show``: what a run directory's log becomes."""

from __future__ import annotations

import argparse
from pathlib import Path

from .command import Command, diagnose, print_result, warn


def _run_dir(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", type=Path)


def _score(args: argparse.Namespace) -> int:
    from ..audit import score_run
    from ..scoring import run_warnings

    cards = score_run(args.run_dir)
    judges = {jc.judge_id for jc in cards.judges} | {jc.judge_id for jc in cards.agentic} | {
        jc.judge_id for jc in cards.pointwise or []} | {jc.judge_id for fc in cards.pairs for jc in fc.judges}
    print(f"{args.run_dir}: cards for {len(judges)} judge(s) -> cards.json, report.md")
    warn(run_warnings(args.run_dir))
    return diagnose(args.run_dir, 0)


def _report_arguments(r: argparse.ArgumentParser) -> None:
    r.add_argument("run_dirs", type=Path, nargs="+", metavar="RUN_DIR")
    r.add_argument("--out", type=Path, metavar="DIR",
                   help="where to write (default: the run directory; required with several)")
    r.add_argument("--html", action=argparse.BooleanOptionalAction, default=True,
                   help="also write report.html and plots/ (default; --no-html: Markdown only)")
    r.add_argument("--png", action="store_true",
                   help="also write plots/*.png beside the SVG files (for slides and chat; "
                        "report.html inlines the SVG drawings)")


def _report(args: argparse.Namespace) -> int:
    from ... import report
    from ...errors import UsageError
    from ...store.rundir import RunDir

    if args.out is None and len(args.run_dirs) > 1:
        raise UsageError("several run directories make one report: say where with --out DIR")
    for run_dir in args.run_dirs:
        RunDir(run_dir).info()  # a clear line for a folder that is no run directory
    out = args.out or args.run_dirs[0]
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: is a file; give a folder")
    data = report.write(args.run_dirs, out, html=args.html, png=args.png)
    print(report.markdown_leaderboard(data), end="")
    written = [report.REPORT_MD] + ([report.REPORT_HTML, "plots/"] if args.html else [])
    print(f"\n{out}: " + ", ".join(written))
    return 0


def _compact(args: argparse.Namespace) -> int:
    from ..audit import compact_run

    path = compact_run(args.run_dir)
    print(f"{path}")
    return 0


def _export_arguments(ex: argparse.ArgumentParser) -> None:
    ex.add_argument("run_dir", type=Path)
    ex.add_argument("--format", choices=("parquet", "csv", "json"), default="parquet",
                    help="parquet (default), csv, or json (JSON Lines, .jsonl)")
    ex.add_argument("--out", type=Path, metavar="DIR", help="where to write (default RUN_DIR/export)")


def _export(args: argparse.Namespace) -> int:
    from ..export import export

    for path in export(args.run_dir, args.out, args.format):
        print(path)
    return 0


def _show_arguments(sh: argparse.ArgumentParser) -> None:
    sh.add_argument("run_dir", type=Path)
    sh.add_argument("item_id")
    sh.add_argument("--judge", metavar="NAME", help="only this judge's presentations")
    sh.add_argument("--json", action="store_true", help="print as JSON")


def _show(args: argparse.Namespace) -> int:
    from .. import show

    result = show.show(args.run_dir, args.item_id, args.judge)
    print_result(result, show.text(result), args.json)
    return 0


SCORE = Command(
    "score", "recompute cards and report from a run directory's log",
    "Rebuild judgements.parquet, cards.json and report.md from RUN_DIR/log alone (no judge calls).",
    _run_dir, _score, (0, 2, 3))
REPORT = Command(
    "report", "write the report (Markdown, HTML, plots) of one or more runs",
    "Rebuild the report from the run directories' logs alone (cards are "
    "re-scored, no judge calls): report.md (leaderboard, recommendations, cards, "
    "perturbation audit, analyses, run statistics, judge identities, example "
    "failures), and with --html (the default) a self-contained report.html and "
    "plots/*.svg (--png: plots/*.png too). Several run directories make one report over all their "
    "judges. audit writes the same report at the end of every run.",
    _report_arguments, _report)
COMPACT = Command(
    "compact", "write RUN_DIR/judgements.parquet from the log",
    "Write the counted records (one per key) of RUN_DIR's log to "
    "judgements.parquet, for scoring and for pandas / polars / DuckDB. "
    "audit does this at the end of every run.",
    _run_dir, _compact)
SHOW = Command(
    "show", "one item as the judges saw it, and their replies",
    "The item's question and both answers, regenerated from the run's "
    "manifest and corpus, and for every presentation (judge, order): the chat "
    "messages the judge was sent, its raw reply, the verdict, latency and attempts. "
    "ITEM_ID: from report.html's examples or judgements.parquet; a unique prefix is "
    "enough.",
    _show_arguments, _show)
EXPORT = Command(
    "export", "a run's cards and presentations as flat tables",
    "Write cards.FMT (one row per judge, family, language, perturbation "
    "and metric: run, judge, judge_id, family, lang, perturbation, metric, value, lo, "
    "hi, n) and presentations.FMT (one row per counted record, with a correct column "
    "and ts as a UTC timestamp) for pandas, polars, DuckDB or a spreadsheet.",
    _export_arguments, _export)
