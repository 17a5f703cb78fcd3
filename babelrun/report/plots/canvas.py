"""What every figure shares: matplotlib on the Agg backend (imported on first use, configured
once: glyphs as paths, no TeX, stable ids), layout that keeps titles clear of the panels, the
judges' colours, and the judges and languages of the report data in figure order."""

from __future__ import annotations

from collections.abc import Iterable

from ...score.cards import Card
from ..data import ReportData

_plt = None


def pyplot():
    """matplotlib.pyplot on the Agg backend, configured once per process."""
    global _plt
    if _plt is None:
        import matplotlib

        matplotlib.use("Agg", force=True)
        import matplotlib.pyplot as plt

        matplotlib.rcParams.update({
            "svg.fonttype": "path",      # glyphs as paths: no text nodes in the SVG
            "svg.hashsalt": "babelrun",  # stable element ids: same data, same file
            "text.parse_math": False,    # a "$" in a label is a dollar sign, not TeX
            "font.size": 8, "axes.titlesize": 9, "figure.dpi": 100,
        })
        _plt = plt
    return _plt


def tight(fig, **kwargs) -> None:
    """tight_layout, quietly: when labels cannot all fit it keeps the default layout, which
    is still a readable figure."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        fig.tight_layout(**kwargs)
    # tight_layout leaves a placeholder layout engine on the figure, and savefig draws a
    # figure that has one a first time (for the engine) before the time it writes: each
    # figure was drawn twice per file. The layout is done; the figure keeps none.
    fig.set_layout_engine(None)


def suptitle(fig, text: str) -> None:
    """A figure title wrapped to the figure's width, with room kept for it above the axes
    (tight_layout ignores suptitles: unreserved, they clip and overlap the panels' titles)."""
    import textwrap

    width_in, height_in = fig.get_size_inches()
    lines = textwrap.wrap(text, max(40, int(width_in * 12)))
    fig.suptitle("\n".join(lines), fontsize=8)
    tight(fig, rect=(0, 0, 1, 1 - (0.16 * len(lines) + 0.1) / height_in))


def cell_labels(ax, cells: Iterable[tuple[float, float, str]], fontsize: float) -> None:
    """Short labels (a heatmap's numbers) centred on data points ``(x, y, text)``, drawn as
    their glyphs' outlines, one collection per distinct label, as the text of every figure is
    drawn as paths (``svg.fonttype``): matplotlib lays out and renders a text artist one by
    one for each output, and a heatmap's 180 numbers were half of its drawing."""
    from matplotlib.collections import PathCollection
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextPath, text_to_path
    from matplotlib.transforms import Affine2D

    prop = FontProperties(size=fontsize)
    where: dict[str, list[tuple[float, float]]] = {}
    for x, y, text in cells:
        where.setdefault(text, []).append((x, y))
    points = Affine2D().scale(1 / 72) + ax.get_figure().dpi_scale_trans  # outlines in points, at the output's dpi
    for text, offsets in where.items():
        width, height, descent = text_to_path.get_text_width_height_descent(text, prop, ismath=False)
        outline = TextPath((-width / 2, descent - height / 2), text, prop=prop)  # centred on its ink
        ax.add_collection(PathCollection([outline], offsets=offsets, offset_transform=ax.transData, transform=points,
                                         facecolors=pyplot().rcParams["text.color"], edgecolors="none",
                                         in_layout=False), autolim=False)


def blank(ax) -> None:
    """An axes drawn without its frame, ticks and labels (``axis("off")``), its x and y axes
    hidden too: matplotlib still lays out the tick labels of an axes turned off (to place
    its title), ~0.09 CPU-s of the radar's drawing, for nothing drawn."""
    ax.axis("off")
    ax.xaxis.set_visible(False)
    ax.yaxis.set_visible(False)


def colors(n: int) -> list:
    cmap = pyplot().get_cmap("tab10")
    return [cmap(i % 10) for i in range(n)]


def judges(data: ReportData):
    return [jc for _, jc in data.judges()]


def languages(data: ReportData) -> list[str]:
    return sorted({lc.lang for jc in judges(data) for lc in jc.languages})


def by_lang(jc) -> dict[str, Card]:
    return {lc.lang: lc.card for lc in jc.languages}


def worst(data: ReportData, k: int) -> tuple[list[str], str]:
    """Every language, or the ``k`` with the lowest R of any judge (worst first) when there
    are more; and a note saying which for the figure's title."""
    langs = languages(data)
    if len(langs) <= k:
        return langs, ""
    low: dict[str, float] = {}
    for jc in judges(data):
        for lc in jc.languages:
            r = lc.card.reliability.value
            low[lc.lang] = min(low.get(lc.lang, 2.0), 2.0 if r is None else r)
    return sorted(langs, key=lambda x: (low.get(x, 2.0), x))[:k], f" — the {k} worst of {len(langs)} languages"
