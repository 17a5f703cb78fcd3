"""The report's size and drawing time from 1 judge × 1 language to 20 judges × 500 languages
(the synthetic cards of tests/unit/test_report_scale.py). The ratio: the plots' SVG bytes at 20 × 500
÷ at 10 × 200, against a cell count 5× larger — the figures show the worst languages once there
are many, so they grow far slower than the run.

    python bench/report_scale.py
"""

from __future__ import annotations

import importlib
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from test_report_scale import synthetic  # noqa: E402

from babelrun.report import html, plots  # noqa: E402

markdown = importlib.import_module("babelrun.report.markdown")

SIZES = ((1, 1), (1, 500), (20, 20), (10, 200), (20, 500))


def main() -> None:
    svg = {}
    print("judges  languages  report.html  plots (SVG)  report.md  plots drawn in")
    for judges, langs in SIZES:
        data = synthetic(judges, langs)
        with tempfile.TemporaryDirectory() as out:
            start = time.perf_counter()
            drawn = plots.render(data, Path(out))
            seconds = time.perf_counter() - start
        page = len(html.render(data, drawn).encode())
        svg[(judges, langs)] = sum(len(p.svg) for p in drawn)
        print(f"{judges:>6}  {langs:>9}  {page / 1e6:>9.2f} MB  {svg[(judges, langs)] / 1e6:>8.2f} MB  "
              f"{len(markdown.render_report(data).encode()) / 1e6:>6.2f} MB  {seconds:>6.1f} s")
    print(f"ratio: plot bytes 20×500 ÷ 10×200 = {svg[(20, 500)] / svg[(10, 200)]:.2f} (cells: 5.00)")


if __name__ == "__main__":
    main()
