"""What every figure shares: matplotlib on the Agg backend (imported on first use, configured
once: glyphs as paths, no TeX, stable ids), layout that keeps titles clear of the panels, the
judges' colours, and the judges and languages of the report data in figure order."""

from __future__ import annotations

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


def suptitle(fig, text: str) -> None:
    """A figure title wrapped to the figure's width, with room kept for it above the axes
    (tight_layout ignores suptitles: unreserved, they clip and overlap the panels' titles)."""
    import textwrap

    width_in, height_in = fig.get_size_inches()
    lines = textwrap.wrap(text, max(40, int(width_in * 12)))
    fig.suptitle("\n".join(lines), fontsize=8)
    tight(fig, rect=(0, 0, 1, 1 - (0.16 * len(lines) + 0.1) / height_in))


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
