"""Reports from run directories: Markdown (terminals, pull requests), a self-contained HTML
page and plots (SVG, and PNG when asked).

``write`` gathers a ``ReportData`` once (``data.gather``) and renders it: ``report.md`` always,
``report.html`` and ``plots/`` unless ``html=False``. It is the one writer of report.md (``audit``,
``score``, ``merge`` and ``report`` all call it), so report.md is the same whichever ran last.
Both formats show the sections of ``sections.SECTIONS``, in its order. ``markdown`` renders
cards alone, for a caller holding only Cards. matplotlib is imported only where plots are drawn: in a child
processes (``plots.Painter``), so it never adds to an audit's memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..store.files import check_not_link, write_atomic
from .markdown import leaderboard as markdown_leaderboard
from .markdown import render as markdown
from .markdown import render_report as markdown_report

__all__ = ["REPORT_HTML", "REPORT_MD", "WRITTEN", "markdown", "markdown_leaderboard", "markdown_report", "write"]

REPORT_MD = "report.md"
REPORT_HTML = "report.html"
WRITTEN = (REPORT_MD, REPORT_HTML)  # the files this layer writes at a run directory's top (and plots/)


def write(run_dirs: Sequence[Path], out_dir: Path, *, html: bool = True, cards: dict | None = None,
          painter=None, logged: dict | None = None, png: bool = False):
    """Write the report of ``run_dirs`` into ``out_dir``; returns the ReportData. ``cards``
    (run dir -> Cards) skips re-scoring runs just scored; the others are rebuilt from their logs.
    ``logged`` (run dir -> ``data.LogPass`` shown its whole log) skips reading those logs again.
    ``painter``: a ``plots.Painter`` for ``out_dir`` started earlier (its children have
    imported matplotlib already), which may have been given the plots' data already
    (``Painter.start`` on ``data.plotted``: the same figures); the caller closes it. ``png``:
    plots/*.png beside the SVG files (a Painter given is made with its own ``png``)."""
    from . import data as report_data

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    check_not_link(out_dir / "plots")  # refused before anything is written (plots.render_apart)
    gathered = report_data.gather([Path(d) for d in run_dirs], cards, logged=logged)
    write_atomic(out_dir / REPORT_MD, markdown_report(gathered).encode())
    if html:
        from . import html as report_html
        from . import plots

        if painter is None:
            drawn = plots.render_apart(gathered, out_dir, png=png)
        else:  # its children may be drawing already (the caller started them on ``data.plotted``)
            drawn = painter.collect() if painter.started else painter.draw(gathered)
        write_atomic(out_dir / REPORT_HTML, report_html.render(gathered, drawn).encode())
    return gathered
