"""The scatter of reliability against accuracy, one point per judge and language, on R's
colour bands: overlaid for a few judges, one panel per judge beyond."""

from __future__ import annotations

from ..data import ReportData
from ..recommend import THRESHOLDS
from ..safe import label
from ..summary import BAND_COLOURS, BAND_WIDTH
from . import canvas
from .heatmaps import HEATMAP_COLS

# R's colour bands, the report's one scale (summary.band): the same in the cards and the matrix.
_T = THRESHOLDS.reliability
BANDS = ((_T + BAND_WIDTH, 1.0, BAND_COLOURS["good"]), (_T, _T + BAND_WIDTH, BAND_COLOURS["near"]),
         (0.0, _T, BAND_COLOURS["bad"]))
# Scale limits (chosen as heatmaps.HEATMAP_LANGS was): beyond them the labels collide.
SCATTER_LABELS = 3   # languages named per judge in the scatter (its lowest R)
SCATTER_OVERLAID = 4  # judges drawn in one scatter; more: one panel each
SCATTER_ERRORBARS = 200  # points up to which the scatter draws R's intervals


def _scatter(ax, jc, color, errorbars: bool) -> None:
    """One judge's languages on ``ax``: accuracy against R, its lowest-R languages named."""
    pts = [(lc.lang, lc.card.accuracy.value, lc.card.reliability) for lc in jc.languages
           if lc.card.accuracy.value is not None and lc.card.reliability.value is not None]
    if not pts:
        return
    xs = [p[1] for p in pts]
    ys = [p[2].value for p in pts]
    if errorbars:
        err = [[max(0.0, p[2].value - (p[2].lo if p[2].lo is not None else p[2].value)) for p in pts],
               [max(0.0, (p[2].hi if p[2].hi is not None else p[2].value) - p[2].value) for p in pts]]
        ax.errorbar(xs, ys, yerr=err, fmt="o", color=color, markersize=4, elinewidth=0.6, alpha=0.85,
                    label=label(jc.judge))
    else:
        ax.scatter(xs, ys, s=6, color=color, alpha=0.6, label=label(jc.judge))
    # Only the judge's lowest-R languages are named: every name collides beyond a few.
    for lang, x, r in sorted(pts, key=lambda p: (p[2].value, p[0]))[:SCATTER_LABELS]:
        ax.annotate(label(lang, 12), (x, r.value), xytext=(3, 2), textcoords="offset points", fontsize=6,
                    color=color)


def _scatter_frame(ax) -> None:
    for lo, hi, color in BANDS:
        ax.axhspan(lo, hi, color=color, zorder=0)
    ax.axhline(THRESHOLDS.reliability, color="#333", linestyle="--", linewidth=1,
               label=f"deployment threshold R = {THRESHOLDS.reliability}")
    ax.set(xlim=(0, 1.02), ylim=(0, 1.02))


def reliability_vs_accuracy(data: ReportData):
    """One scatter for up to ``SCATTER_OVERLAID`` judges; small multiples (a panel a judge,
    ``HEATMAP_COLS`` to a row) beyond, where overlaid colours stop being told apart."""
    judges = canvas.judges(data)
    if not judges:
        return None
    plt = canvas.pyplot()
    points = sum(len(jc.languages) for jc in judges)
    errorbars = points <= SCATTER_ERRORBARS
    bars = "bars: R interval; " if errorbars else ""
    title = f"Reliability vs accuracy per language ({bars}named: each judge's {SCATTER_LABELS} lowest R)"
    colors = canvas.colors(len(judges))
    if len(judges) <= SCATTER_OVERLAID:
        fig, ax = plt.subplots(figsize=(8.5, 5))
        _scatter_frame(ax)
        for jc, color in zip(judges, colors, strict=True):
            _scatter(ax, jc, color, errorbars)
        ax.set(xlabel="accuracy", ylabel="reliability R", title=title)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=7, borderaxespad=0)
    else:
        cols = min(HEATMAP_COLS, len(judges))
        rows = -(-len(judges) // cols)
        fig, axes = plt.subplots(rows, cols, figsize=(2.4 * cols + 0.6, 2.3 * rows + 0.7), sharex=True,
                                 sharey=True, squeeze=False)
        for ax in axes.flat[len(judges):]:
            canvas.blank(ax)
        for ax, jc, color in zip(axes.flat, judges, colors, strict=False):
            _scatter_frame(ax)
            _scatter(ax, jc, color, errorbars)
            ax.set_title(label(jc.judge, 28), fontsize=8)
        for ax in axes[:, 0]:
            ax.set_ylabel("R")
        for ax in axes[-1, :]:
            ax.set_xlabel("accuracy")
        canvas.suptitle(fig, title + f"; dashed: R = {THRESHOLDS.reliability}")
        return fig
    canvas.tight(fig)
    return fig
