"""Radar profiles: one small polygon per language and judge over the five goodness axes,
drawn on one plain axes."""

from __future__ import annotations

from ...score.cards import Card
from ..data import ReportData
from ..safe import label
from . import canvas

RADAR_AXES = ("accuracy", "κ_ord", "1 − |Δ|", "1 − |2v − 1|", "valid replies")
# Scale limits (chosen as heatmaps.HEATMAP_LANGS was): beyond them the profiles blur.
RADAR_LANGS = 16     # languages in the radar small multiples
RADAR_JUDGES = 4     # above this many overlaid polygons a radar is a blur: not drawn


def _goodness(card: Card) -> list[float | None]:
    """Each radar axis's metric mapped to [0, 1], 1 best."""
    def v(iv):
        return iv.value
    acc, d, verb, k, r, inv = (v(card.accuracy), v(card.position_bias), v(card.verbosity),
                               v(card.order_consistency), v(card.reliability), v(card.invalid_rate))
    return [acc, None if d is None else 1 - abs(d), None if verb is None else 1 - abs(2 * verb - 1),
            k, r, None if inv is None else 1 - inv]


def radar(data: ReportData):
    """Small multiples: one radar per language, drawn as polygons on one plain axes (45
    polar axes take seconds to lay out and draw; this takes a fraction of one)."""
    judges = canvas.judges(data)
    langs, note = canvas.worst(data, RADAR_LANGS)
    if not judges or not langs or len(judges) > RADAR_JUDGES:  # overlaid polygons blur: the heatmap shows them
        return None
    import numpy as np
    from matplotlib.collections import LineCollection, PolyCollection

    plt = canvas.pyplot()
    cols = min(8, len(langs))
    rows = -(-len(langs) // cols)
    fig, ax = plt.subplots(figsize=(max(5.5, 1.5 * cols + 0.4), 1.5 * rows + 1.1))
    angles = np.pi / 2 - np.linspace(0, 2 * np.pi, len(RADAR_AXES), endpoint=False)  # clockwise from the top
    unit = np.column_stack([np.cos(angles), np.sin(angles)]) * 0.4
    centres = [(i % cols, -(i // cols)) for i in range(len(langs))]
    web = []
    for cx, cy in centres:
        for scale in (0.5, 1.0):
            ring = unit * scale + (cx, cy)
            web.append(np.vstack([ring, ring[:1]]))
        web += [np.array([(cx, cy), (cx + x, cy + y)]) for x, y in unit]
    ax.add_collection(LineCollection(web, colors="#bbb", linewidths=0.5))
    colors = canvas.colors(len(judges))
    for jc, color in zip(judges, colors, strict=True):
        cards = canvas.by_lang(jc)
        polys = []
        for lang, (cx, cy) in zip(langs, centres, strict=True):
            if lang in cards:
                acc, d, v, k, _, inv = _goodness(cards[lang])
                values = np.array([0.0 if x is None else x for x in (acc, k, d, v, inv)])
                polys.append(unit * values[:, None] + (cx, cy))
        ax.add_collection(PolyCollection(polys, facecolors=[(*color[:3], 0.12)], edgecolors=[color], linewidths=1))
    for lang, (cx, cy) in zip(langs, centres, strict=True):
        ax.text(cx, cy + 0.47, label(lang, 12), ha="center", va="bottom", fontsize=7)
    ax.set_xlim(-0.55, cols - 0.45)
    ax.set_ylim(-(rows - 1) - 0.5, 0.62)
    ax.set_aspect("equal")
    canvas.blank(ax)
    handles = [plt.Line2D([], [], color=c, label=label(jc.judge)) for jc, c in zip(judges, colors, strict=True)]
    ax.legend(handles=handles, loc="lower right", bbox_to_anchor=(1, 1), fontsize=7, ncol=min(4, len(judges)))
    ax.set_title(f"Per language{note}, clockwise from the top: " + ", ".join(RADAR_AXES) + ";\nrings at 0.5 and 1 "
                 "(outer is better; an undefined metric is drawn at the centre)", fontsize=8, loc="left", pad=14)
    canvas.tight(fig)
    return fig
