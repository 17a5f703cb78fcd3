"""The report's figures, drawn with matplotlib (Agg) and written as PNG and SVG under plots/.

Each plot is a small function ``(ReportData) -> Figure | None`` (None: nothing to draw, e.g.
no calibration was run); ``PLOTS`` lists them in report order, so a new card family adds a
function and a line. Text in the figures is drawn as glyph paths, with math parsing off, and
the SVG files are written without comments or metadata: no label (language names come from
corpora and manifests) can become markup in the SVG or in the page that inlines it.
matplotlib is imported on first use: the CLI's other commands never pay for it.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from pathlib import Path

import msgspec

from ..score import Card
from .data import ReportData
from .recommend import THRESHOLDS
from .safe import label

METRICS = ("accuracy", "|Δ|", "v", "κ_ord", "R", "invalid")
RADAR_AXES = ("accuracy", "κ_ord", "1 − |Δ|", "1 − |2v − 1|", "valid replies")
BANDS = ((0.70, 1.0, "#d9f2d9"), (0.60, 0.70, "#fff3c4"), (0.0, 0.60, "#f8d7d7"))  # green/yellow/red


class Plot(msgspec.Struct, frozen=True):
    name: str   # file stem under plots/
    title: str
    svg: str    # the SVG element, cleaned, for inlining in the HTML page


_plt = None


def _pyplot():
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


def _tight(fig, **kwargs) -> None:
    """tight_layout, quietly: when labels cannot all fit it keeps the default layout, which
    is still a readable figure."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        fig.tight_layout(**kwargs)


def _colors(n: int) -> list:
    cmap = _pyplot().get_cmap("tab10")
    return [cmap(i % 10) for i in range(n)]


def _judges(data: ReportData):
    return [jc for _, jc in data.judges()]


def _languages(data: ReportData) -> list[str]:
    return sorted({lc.lang for jc in _judges(data) for lc in jc.languages})


def _by_lang(jc) -> dict[str, Card]:
    return {lc.lang: lc.card for lc in jc.languages}


def reliability_vs_accuracy(data: ReportData):
    judges = _judges(data)
    if not judges:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 5))
    for lo, hi, color in BANDS:
        ax.axhspan(lo, hi, color=color, zorder=0)
    ax.axhline(THRESHOLDS.reliability, color="#333", linestyle="--", linewidth=1,
               label=f"deployment threshold R = {THRESHOLDS.reliability}")
    for jc, color in zip(judges, _colors(len(judges)), strict=True):
        pts = [(lc.lang, lc.card.accuracy.value, lc.card.reliability) for lc in jc.languages
               if lc.card.accuracy.value is not None and lc.card.reliability.value is not None]
        if not pts:
            continue
        xs = [p[1] for p in pts]
        ys = [p[2].value for p in pts]
        err = [[max(0.0, p[2].value - (p[2].lo if p[2].lo is not None else p[2].value)) for p in pts],
               [max(0.0, (p[2].hi if p[2].hi is not None else p[2].value) - p[2].value) for p in pts]]
        ax.errorbar(xs, ys, yerr=err, fmt="o", color=color, markersize=4, elinewidth=0.6, alpha=0.85,
                    label=label(jc.judge))
        for lang, x, r in pts:
            ax.annotate(label(lang, 12), (x, r.value), xytext=(3, 2), textcoords="offset points",
                        fontsize=6, color=color)
    ax.set(xlabel="accuracy", ylabel="reliability R", xlim=(0, 1.02), ylim=(0, 1.02),
           title="Reliability vs accuracy per language (bars: R interval)")
    ax.legend(loc="upper left", fontsize=7)
    return fig


def _goodness(card: Card) -> list[float | None]:
    """Each metric of the heatmap mapped to [0, 1], 1 best: colours mean the same everywhere."""
    def v(iv):
        return iv.value
    acc, d, verb, k, r, inv = (v(card.accuracy), v(card.position_bias), v(card.verbosity),
                               v(card.order_consistency), v(card.reliability), v(card.invalid_rate))
    return [acc, None if d is None else 1 - abs(d), None if verb is None else 1 - abs(2 * verb - 1),
            k, r, None if inv is None else 1 - inv]


def _heat(card: Card) -> list[float | None]:
    """The heatmap's colour of each metric, 1 green to 0 red: accuracy, κ_ord and R as they
    are; the biases scaled so that the recommendation thresholds sit at yellow (0.5):
    |Δ| 0.10 of 0.20, |2v − 1| 0.20 of 0.40, invalid replies 5 % of 10 %."""
    def scaled(x, full):
        return None if x is None else max(0.0, 1 - x / full)
    d, v = card.position_bias.value, card.verbosity.value
    return [card.accuracy.value, scaled(None if d is None else abs(d), 2 * THRESHOLDS.position),
            scaled(None if v is None else abs(2 * v - 1), 4 * (THRESHOLDS.verbosity - 0.5)),
            card.order_consistency.value, card.reliability.value, scaled(card.invalid_rate.value, 0.10)]


def _shown(card: Card) -> list[float | None]:
    d = card.position_bias.value
    return [card.accuracy.value, None if d is None else abs(d), card.verbosity.value,
            card.order_consistency.value, card.reliability.value, card.invalid_rate.value]


def metric_heatmap(data: ReportData):
    judges, langs = _judges(data), _languages(data)
    if not judges:
        return None
    import numpy as np

    plt = _pyplot()
    height = 1.2 + 0.2 * len(langs)
    fig, axes = plt.subplots(1, len(judges), figsize=(3.2 * len(judges) + 1, height), squeeze=False)
    for ax, jc in zip(axes[0], judges, strict=True):
        cards = _by_lang(jc)
        good = np.array([[np.nan if x is None else x for x in _heat(cards[lang])] if lang in cards
                         else [np.nan] * len(METRICS) for lang in langs], dtype=float)
        ax.imshow(good, cmap="RdYlGn", vmin=0, vmax=1, aspect="auto")
        for i, lang in enumerate(langs):
            for j, value in enumerate(_shown(cards[lang]) if lang in cards else [None] * len(METRICS)):
                ax.text(j, i, "–" if value is None else f"{value:.2f}", ha="center", va="center", fontsize=6)
        ax.set_xticks(range(len(METRICS)), METRICS)
        ax.set_yticks(range(len(langs)), [label(x, 12) for x in langs])
        ax.tick_params(axis="x", top=True, labeltop=True, bottom=False, labelbottom=False)
        ax.set_title(label(jc.judge))
    fig.suptitle("Metrics per language. Colour: green good, red bad; yellow at the recommendation "
                 "thresholds for |Δ| (0.10), v (0.60) and invalid (5 %)", fontsize=8)
    _tight(fig)
    return fig


def radar(data: ReportData):
    """Small multiples: one radar per language, drawn as polygons on one plain axes (45
    polar axes take seconds to lay out and draw; this takes a fraction of one)."""
    judges, langs = _judges(data), _languages(data)
    if not judges or not langs:
        return None
    import numpy as np
    from matplotlib.collections import LineCollection, PolyCollection

    plt = _pyplot()
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
    colors = _colors(len(judges))
    for jc, color in zip(judges, colors, strict=True):
        cards = _by_lang(jc)
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
    ax.axis("off")
    handles = [plt.Line2D([], [], color=c, label=label(jc.judge)) for jc, c in zip(judges, colors, strict=True)]
    ax.legend(handles=handles, loc="lower right", bbox_to_anchor=(1, 1), fontsize=7, ncol=min(4, len(judges)))
    ax.set_title("Per language, clockwise from the top: " + ", ".join(RADAR_AXES) + ";\nrings at 0.5 and 1 "
                 "(outer is better; an undefined metric is drawn at the centre)", fontsize=8, loc="left", pad=14)
    _tight(fig)
    return fig


def _perturbation_accuracy(jc) -> dict[str, float]:
    """Accuracy per perturbation over all languages, weighted by presentations."""
    hits: dict[str, float] = {}
    n: dict[str, int] = {}
    for lc in jc.languages:
        for pc in lc.perturbations:
            if pc.card.accuracy.value is None:
                continue
            hits[pc.perturbation] = hits.get(pc.perturbation, 0.0) + pc.card.accuracy.value * pc.card.presentations
            n[pc.perturbation] = n.get(pc.perturbation, 0) + pc.card.presentations
    return {p: hits[p] / n[p] for p in hits if n[p]}


def perturbation_accuracy(data: ReportData):
    judges = _judges(data)
    per = [_perturbation_accuracy(jc) for jc in judges]
    perts = sorted({p for d in per for p in d})
    if not perts:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(5, 1.1 * len(perts) + 2), 3.8))
    width = 0.8 / len(judges)
    for i, (jc, acc, color) in enumerate(zip(judges, per, _colors(len(judges)), strict=True)):
        xs = [k + (i - (len(judges) - 1) / 2) * width for k in range(len(perts))]
        ax.bar(xs, [acc.get(p, 0.0) for p in perts], width, color=color, label=label(jc.judge))
    ax.set_xticks(range(len(perts)), [label(p, 20) for p in perts], rotation=20, ha="right")
    ax.set(ylim=(0, 1), ylabel="accuracy (all languages)", title="Accuracy per perturbation")
    ax.axhline(0.5, color="#999", linewidth=0.8, linestyle=":")
    ax.legend(fontsize=7)
    _tight(fig)
    return fig


def cbc_ranks(data: ReportData):
    c = data.calibration
    if c is None:
        return None
    import numpy as np

    plt = _pyplot()
    fig, axes = plt.subplots(2, 1, figsize=(min(14, max(6, 0.26 * len(c.langs) + 2)), 2 * (0.3 * len(c.judges) + 1.2)),
                             squeeze=False)
    for ax, ranks, title in zip(axes[:, 0], (c.ranks_raw, c.ranks_calibrated), ("raw", "calibrated (CBC)"),
                                strict=True):
        m = np.array(ranks, dtype=float)
        ax.imshow(m, cmap="RdYlGn_r", vmin=1, vmax=max(2, len(c.judges)), aspect="auto")
        for (j, li), value in np.ndenumerate(m):
            ax.text(li, j, f"{int(value)}", ha="center", va="center", fontsize=6)
        ax.set_xticks(range(len(c.langs)), [label(x, 10) for x in c.langs], rotation=90, fontsize=6)
        ax.set_yticks(range(len(c.judges)), [label(x, 20) for x in c.judges])
        ax.set_title(f"rank per language, {title}")
    fig.suptitle("CBC: judges' rank in each language before and after calibration (1 = best)")
    _tight(fig)
    return fig


def language_switch(data: ReportData):
    rows = [r for inv in data.invariance for r in inv.rows if r.correctness_flip.value is not None]
    if not rows:
        return None
    plt = _pyplot()
    judges = sorted({r.judge for r in rows})
    langs = sorted({r.lang for r in rows})
    fig, ax = plt.subplots(figsize=(min(14, max(6, 0.12 * len(langs) * len(judges) + 2)), 3.8))
    width = 0.8 / len(judges)
    for i, (judge, color) in enumerate(zip(judges, _colors(len(judges)), strict=True)):
        mine = {r.lang: r for r in rows if r.judge == judge}
        xs = [k + (i - (len(judges) - 1) / 2) * width for k, lang in enumerate(langs) if lang in mine]
        ivs = [mine[lang].correctness_flip for lang in langs if lang in mine]
        ax.bar(xs, [iv.value for iv in ivs], width, color=color, label=f"{label(judge)}: correctness flips",
               yerr=[[iv.value - iv.lo for iv in ivs], [iv.hi - iv.value for iv in ivs]], error_kw={"elinewidth": 0.6})
        ax.plot(xs, [mine[lang].judgment_flip.value for lang in langs if lang in mine], "_", color="black",
                markersize=6)
    pivots = ", ".join(sorted({inv.pivot for inv in data.invariance}))
    ax.set_xticks(range(len(langs)), [label(x, 10) for x in langs], rotation=90, fontsize=6)
    ax.set(ylabel="flip rate", ylim=(0, 1), xlim=(-0.6, len(langs) - 0.4),
           title=f"Language switch against {label(pivots)}: correctness flips (bars, Wilson interval); "
                 "verdict flips (black ticks)")
    ax.legend(fontsize=7)
    _tight(fig)
    return fig


PLOTS: list[tuple[str, str, Callable]] = [
    ("reliability_vs_accuracy", "Reliability vs accuracy", reliability_vs_accuracy),
    ("metrics_heatmap", "Metrics per language", metric_heatmap),
    ("radar", "Language profiles", radar),
    ("perturbation_accuracy", "Accuracy per perturbation", perturbation_accuracy),
    ("cbc_ranks", "CBC ranks before and after", cbc_ranks),
    ("language_switch", "Language-switch flip rates", language_switch),
]

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


def render(data: ReportData, out_dir: Path) -> list[Plot]:
    """Draw every plot that has data; write plots/NAME.png and plots/NAME.svg under
    ``out_dir``; remove stale files of plots that no longer apply."""
    plt = _pyplot()
    folder = Path(out_dir) / "plots"
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name, title, draw in PLOTS:
        fig = draw(data)
        if fig is None:
            for ext in ("png", "svg"):
                (folder / f"{name}.{ext}").unlink(missing_ok=True)
            continue
        try:
            fig.savefig(folder / f"{name}.png", format="png", dpi=110, metadata={"Software": None})
            buf = io.StringIO()
            fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
        finally:
            plt.close(fig)
        svg = clean_svg(buf.getvalue())
        (folder / f"{name}.svg").write_text('<?xml version="1.0" encoding="utf-8"?>\n' + svg + "\n")
        out.append(Plot(name, title, scoped(svg, name)))
    return out


def render_apart(data: ReportData, out_dir: Path) -> list[Plot]:
    """``render`` in a child process: matplotlib (about 40 MB once imported) and its figures
    never enter the caller's memory, so an audit's peak stays that of judging and scoring
    (bench/full_plan.py). The report data goes in and the plots come back as msgpack."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", __name__, str(out_dir)], input=msgspec.msgpack.encode(data),
                          capture_output=True, check=False)
    if proc.returncode != 0:
        stderr = proc.stderr.decode(errors="replace").strip()
        system = re.match(r"\w*Error: \[Errno (\d+)\] (.*)$", stderr.splitlines()[-1] if stderr else "")
        if system:  # a full disk, a read-only folder: the caller reports it as the OSError it is
            raise OSError(int(system.group(1)), system.group(2), str(out_dir / "plots"))
        raise RuntimeError(f"drawing the plots failed: {stderr}")
    return msgspec.msgpack.decode(proc.stdout, type=list[Plot])


if __name__ == "__main__":  # the child of render_apart
    import sys

    plots = render(msgspec.msgpack.decode(sys.stdin.buffer.read(), type=ReportData), Path(sys.argv[1]))
    sys.stdout.buffer.write(msgspec.msgpack.encode(plots))
