"""The figures as files: each drawn, written as plots/NAME.svg (without prolog, comments or
metadata; the HTML page inlines the same drawing) and, when asked, plots/NAME.png, and
returned for the HTML page with its ids scoped."""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from pathlib import Path

import msgspec

from ...store.files import safe_dir, write_atomic
from ..data import ReportData
from . import canvas
from .figures import PLOTS


class Plot(msgspec.Struct, frozen=True):
    name: str   # file stem under plots/
    title: str
    svg: str    # the SVG element, cleaned, for inlining in the HTML page


_SVG_NOISE = re.compile(r"<\?xml.*?\?>|<!DOCTYPE.*?>|<!--.*?-->|<metadata>.*?</metadata>", re.S)


def clean_svg(svg: str) -> str:
    """The SVG without its XML prolog, DOCTYPE, comments and metadata: what is left is drawing."""
    return _SVG_NOISE.sub("", svg).strip()


_SVG_IDS = re.compile(r'(\bid="|href="#|url\(#)([^")]+)')


def scoped(svg: str, name: str) -> str:
    """The SVG with every id (and every reference to one) prefixed by the plot's name, so
    that several figures inlined in one page never share an id (matplotlib numbers them from
    1 in every figure: figure_1, axes_1, and names glyphs and clip paths by content)."""
    return _SVG_IDS.sub(lambda m: f"{m.group(1)}{name}-{m.group(2)}", svg)


def render(data: ReportData, out_dir: Path, names: Sequence[str] | None = None, *, png: bool = False) -> list[Plot]:
    """Draw every plot that has data (of ``names``, when given); write plots/NAME.svg under
    ``out_dir``, and plots/NAME.png with ``png`` (a raster copy for slides and chat: the page
    and the SVG files do not need it, and it costs as much again as the SVG); remove stale
    files of plots that no longer apply, and the PNG files of an earlier ``png`` report (they
    would show older numbers beside these)."""
    plt = canvas.pyplot()
    folder = safe_dir(Path(out_dir), "plots")  # a link at plots/: refused, never written through
    out = []
    for name, title, draw in PLOTS:
        if names is not None and name not in names:
            continue
        fig = draw(data)
        if fig is None:
            for ext in ("png", "svg"):
                (folder / f"{name}.{ext}").unlink(missing_ok=True)  # a link is removed, never followed
            continue
        raster = io.BytesIO() if png else None
        try:  # the SVG first: the same file whether a PNG follows or not
            buf = io.StringIO()
            fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
            if raster is not None:
                fig.savefig(raster, format="png", dpi=110, metadata={"Software": None})
        finally:
            plt.close(fig)
        svg = clean_svg(buf.getvalue())
        if raster is not None:
            write_atomic(folder / f"{name}.png", raster.getvalue())  # renamed over a link, never through it
        else:
            (folder / f"{name}.png").unlink(missing_ok=True)  # a link is removed, never followed
        write_atomic(folder / f"{name}.svg", ('<?xml version="1.0" encoding="utf-8"?>\n' + svg + "\n").encode())
        out.append(Plot(name, title, scoped(svg, name)))
    return out
