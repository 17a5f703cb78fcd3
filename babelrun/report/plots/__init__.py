"""The report's figures, drawn with matplotlib and written as SVG (and PNG when asked) under plots/.

Each plot is a small function ``(ReportData) -> Figure | None`` (None: nothing to draw, e.g.
no calibration was run) in the module of its kind (``scatters``, ``heatmaps``, ``radars``,
``bars``; what they share is in ``canvas``); ``figures.PLOTS`` lists them in report order, so
a new card family adds a function and a line. Text in the figures is drawn as glyph paths,
with math parsing off, and the SVG files are written without comments or metadata
(``files``): no label (language names come from corpora and manifests) can become markup in
the SVG or in the page that inlines it. matplotlib is imported on first use: the CLI's other
commands never pay for it, and an audit draws in child processes (``painter``, ``__main__``).
"""

from .figures import GROUPS, PLOTS
from .files import Plot, clean_svg, render, scoped
from .painter import Painter, render_apart

__all__ = ["GROUPS", "PLOTS", "Painter", "Plot", "clean_svg", "render", "render_apart", "scoped"]
