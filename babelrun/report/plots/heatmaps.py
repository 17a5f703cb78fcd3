"""Heatmaps: every metric per judge and language on the cards' colour scale, and the judges'
rank per language before and after CBC calibration."""

from __future__ import annotations

from ...score.cards import Card
from ..data import ReportData
from ..recommend import THRESHOLDS
from ..safe import label
from ..summary import BAND_COLOURS, band
from . import canvas

METRICS = ("accuracy", "|Δ|", "v", "κ_ord", "R", "invalid")
# Scale limits, chosen by drawing the synthetic 10 judges × 200 languages report
# (tests/unit/test_report_scale.py): beyond them a figure's labels overlap and its SVG grows past
# megabytes, so a figure shows the worst languages (lowest R of any judge) instead of all.
HEATMAP_LANGS = 30   # languages in the metric heatmap
HEATMAP_COLS = 5     # judge panels per row of the heatmap (and of the scatter's small multiples)
HEATMAP_TEXT = 150   # judge × language cells up to which the heatmap prints its numbers


def _heat_bands(card: Card) -> list[str]:
    """Each heatmap metric's colour band, on the report's one scale (summary.band): R and
    accuracy as R; κ_ord, |Δ|, v and invalid replies ``bad`` where their recommendation rule
    trips, ``near`` within half that margin of it, ``good`` beyond."""
    t = THRESHOLDS
    d, v, k, inv = (card.position_bias.value, card.verbosity.value, card.order_consistency.value,
                    card.invalid_rate.value)

    def worse_above(x, limit, margin):  # larger is worse: bad at the limit, near within margin
        return "none" if x is None else "bad" if x >= limit else "near" if x >= limit - margin else "good"

    return [band(card.accuracy.value),
            worse_above(None if d is None else abs(d), t.position, t.position / 2),
            worse_above(None if v is None else abs(v - 0.5), t.verbosity - 0.5, (t.verbosity - 0.5) / 2),
            "none" if k is None else "bad" if k < t.consistency else "near" if k < t.consistency + 0.05 else "good",
            band(card.reliability.value), worse_above(inv, 0.05, 0.025)]


def _shown(card: Card) -> list[float | None]:
    d = card.position_bias.value
    return [card.accuracy.value, None if d is None else abs(d), card.verbosity.value,
            card.order_consistency.value, card.reliability.value, card.invalid_rate.value]


def metric_heatmap(data: ReportData):
    """Small multiples, one panel per judge (``HEATMAP_COLS`` to a row), over the worst
    ``HEATMAP_LANGS`` languages; numbers printed while they fit."""
    judges = canvas.judges(data)
    langs, note = canvas.worst(data, HEATMAP_LANGS)
    if not judges or not langs:
        return None
    import numpy as np
    from matplotlib.colors import to_rgb

    plt = canvas.pyplot()
    cols = min(HEATMAP_COLS, len(judges))
    rows = -(-len(judges) // cols)
    numbers = len(judges) * len(langs) <= HEATMAP_TEXT
    fig, axes = plt.subplots(rows, cols, figsize=(2.3 * cols + 1.2, rows * (0.9 + 0.17 * len(langs)) + 0.6),
                             squeeze=False)
    rgb = {name: to_rgb(c) for name, c in BAND_COLOURS.items()}
    for ax in axes.flat[len(judges):]:
        canvas.blank(ax)
    for ax, jc in zip(axes.flat, judges, strict=False):
        cards = canvas.by_lang(jc)
        image = np.array([[rgb[b] for b in (_heat_bands(cards[lang]) if lang in cards else ["none"] * len(METRICS))]
                          for lang in langs])
        ax.imshow(image, aspect="auto", interpolation="nearest")
        if numbers:
            canvas.cell_labels(ax, [(j, i, "–" if value is None else f"{value:.2f}") for i, lang in enumerate(langs)
                                    for j, value in enumerate(_shown(cards[lang]) if lang in cards
                                                              else [None] * len(METRICS))], fontsize=6)
        ax.set_xticks(range(len(METRICS)), METRICS, fontsize=7)
        ax.set_yticks(range(len(langs)), [label(x, 12) for x in langs], fontsize=6)
        ax.tick_params(axis="x", top=True, labeltop=True, bottom=False, labelbottom=False)
        ax.set_title(label(jc.judge, 28), fontsize=8)
    title = (f"Metrics per language{note}. Colours as the cards: red where the recommendation rule trips "
             f"(R, accuracy < {THRESHOLDS.reliability}; |Δ| ≥ {THRESHOLDS.position}; |v − 0.5| ≥ "
             f"{THRESHOLDS.verbosity - 0.5:.2f}; κ_ord < {THRESHOLDS.consistency}; invalid ≥ 5 %), yellow "
             "close to it, green clear of it")
    canvas.suptitle(fig, title)
    return fig


def cbc_ranks(data: ReportData):
    c = data.calibration
    if c is None:
        return None
    import numpy as np

    plt = canvas.pyplot()
    fig, axes = plt.subplots(2, 1, figsize=(min(14, max(6, 0.26 * len(c.langs) + 2)), 2 * (0.3 * len(c.judges) + 1.2)),
                             squeeze=False)
    for ax, ranks, title in zip(axes[:, 0], (c.ranks_raw, c.ranks_calibrated), ("raw", "calibrated (CBC)"),
                                strict=True):
        m = np.array(ranks, dtype=float)
        ax.imshow(m, cmap="RdYlGn_r", vmin=1, vmax=max(2, len(c.judges)), aspect="auto")
        canvas.cell_labels(ax, [(li, j, f"{int(value)}") for (j, li), value in np.ndenumerate(m)], fontsize=6)
        ax.set_xticks(range(len(c.langs)), [label(x, 10) for x in c.langs], rotation=90, fontsize=6)
        ax.set_yticks(range(len(c.judges)), [label(x, 20) for x in c.judges])
        ax.set_title(f"rank per language, {title}")
    fig.suptitle("CBC: judges' rank in each language before and after calibration (1 = best)")
    canvas.tight(fig)
    return fig
