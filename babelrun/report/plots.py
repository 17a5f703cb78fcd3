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
from collections.abc import Callable, Sequence
from pathlib import Path

import msgspec

from ..score.cards import Card
from ..store.files import UnsafePath, safe_dir, write_atomic
from .data import ReportData
from .recommend import THRESHOLDS
from .safe import label
from .summary import BAND_COLOURS, BAND_WIDTH, band

METRICS = ("accuracy", "|Δ|", "v", "κ_ord", "R", "invalid")
RADAR_AXES = ("accuracy", "κ_ord", "1 − |Δ|", "1 − |2v − 1|", "valid replies")
# R's colour bands, the report's one scale (summary.band): the same in the cards and the matrix.
_T = THRESHOLDS.reliability
BANDS = ((_T + BAND_WIDTH, 1.0, BAND_COLOURS["good"]), (_T, _T + BAND_WIDTH, BAND_COLOURS["near"]),
         (0.0, _T, BAND_COLOURS["bad"]))
# Scale limits, chosen by drawing the synthetic 10 judges × 200 languages report
# (tests/unit/test_report_scale.py): beyond them a figure's labels overlap and its SVG grows past
# megabytes, so a figure shows the worst languages (lowest R of any judge) instead of all.
HEATMAP_LANGS = 30   # languages in the metric heatmap
HEATMAP_COLS = 5     # judge panels per row of the heatmap
HEATMAP_TEXT = 150   # judge × language cells up to which the heatmap prints its numbers
RADAR_LANGS = 16     # languages in the radar small multiples
RADAR_JUDGES = 4     # above this many overlaid polygons a radar is a blur: not drawn
SCATTER_LABELS = 3   # languages named per judge in the scatter (its lowest R)
SCATTER_OVERLAID = 4  # judges drawn in one scatter; more: one panel each
SCATTER_ERRORBARS = 200  # points up to which the scatter draws R's intervals


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


def _suptitle(fig, text: str) -> None:
    """A figure title wrapped to the figure's width, with room kept for it above the axes
    (tight_layout ignores suptitles: unreserved, they clip and overlap the panels' titles)."""
    import textwrap

    width_in, height_in = fig.get_size_inches()
    lines = textwrap.wrap(text, max(40, int(width_in * 12)))
    fig.suptitle("\n".join(lines), fontsize=8)
    _tight(fig, rect=(0, 0, 1, 1 - (0.16 * len(lines) + 0.1) / height_in))


def _colors(n: int) -> list:
    cmap = _pyplot().get_cmap("tab10")
    return [cmap(i % 10) for i in range(n)]


def _judges(data: ReportData):
    return [jc for _, jc in data.judges()]


def _languages(data: ReportData) -> list[str]:
    return sorted({lc.lang for jc in _judges(data) for lc in jc.languages})


def _by_lang(jc) -> dict[str, Card]:
    return {lc.lang: lc.card for lc in jc.languages}


def _worst(data: ReportData, k: int) -> tuple[list[str], str]:
    """Every language, or the ``k`` with the lowest R of any judge (worst first) when there
    are more; and a note saying which for the figure's title."""
    langs = _languages(data)
    if len(langs) <= k:
        return langs, ""
    low: dict[str, float] = {}
    for jc in _judges(data):
        for lc in jc.languages:
            r = lc.card.reliability.value
            low[lc.lang] = min(low.get(lc.lang, 2.0), 2.0 if r is None else r)
    return sorted(langs, key=lambda x: (low.get(x, 2.0), x))[:k], f" — the {k} worst of {len(langs)} languages"


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
    judges = _judges(data)
    if not judges:
        return None
    plt = _pyplot()
    points = sum(len(jc.languages) for jc in judges)
    errorbars = points <= SCATTER_ERRORBARS
    bars = "bars: R interval; " if errorbars else ""
    title = f"Reliability vs accuracy per language ({bars}named: each judge's {SCATTER_LABELS} lowest R)"
    colors = _colors(len(judges))
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
            ax.axis("off")
        for ax, jc, color in zip(axes.flat, judges, colors, strict=False):
            _scatter_frame(ax)
            _scatter(ax, jc, color, errorbars)
            ax.set_title(label(jc.judge, 28), fontsize=8)
        for ax in axes[:, 0]:
            ax.set_ylabel("R")
        for ax in axes[-1, :]:
            ax.set_xlabel("accuracy")
        _suptitle(fig, title + f"; dashed: R = {THRESHOLDS.reliability}")
        return fig
    _tight(fig)
    return fig


def _goodness(card: Card) -> list[float | None]:
    """Each radar axis's metric mapped to [0, 1], 1 best."""
    def v(iv):
        return iv.value
    acc, d, verb, k, r, inv = (v(card.accuracy), v(card.position_bias), v(card.verbosity),
                               v(card.order_consistency), v(card.reliability), v(card.invalid_rate))
    return [acc, None if d is None else 1 - abs(d), None if verb is None else 1 - abs(2 * verb - 1),
            k, r, None if inv is None else 1 - inv]


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
    judges = _judges(data)
    langs, note = _worst(data, HEATMAP_LANGS)
    if not judges or not langs:
        return None
    import numpy as np
    from matplotlib.colors import to_rgb

    plt = _pyplot()
    cols = min(HEATMAP_COLS, len(judges))
    rows = -(-len(judges) // cols)
    numbers = len(judges) * len(langs) <= HEATMAP_TEXT
    fig, axes = plt.subplots(rows, cols, figsize=(2.3 * cols + 1.2, rows * (0.9 + 0.17 * len(langs)) + 0.6),
                             squeeze=False)
    rgb = {name: to_rgb(c) for name, c in BAND_COLOURS.items()}
    for ax in axes.flat[len(judges):]:
        ax.axis("off")
    for ax, jc in zip(axes.flat, judges, strict=False):
        cards = _by_lang(jc)
        image = np.array([[rgb[b] for b in (_heat_bands(cards[lang]) if lang in cards else ["none"] * len(METRICS))]
                          for lang in langs])
        ax.imshow(image, aspect="auto", interpolation="nearest")
        if numbers:
            for i, lang in enumerate(langs):
                for j, value in enumerate(_shown(cards[lang]) if lang in cards else [None] * len(METRICS)):
                    ax.text(j, i, "–" if value is None else f"{value:.2f}", ha="center", va="center", fontsize=6)
        ax.set_xticks(range(len(METRICS)), METRICS, fontsize=7)
        ax.set_yticks(range(len(langs)), [label(x, 12) for x in langs], fontsize=6)
        ax.tick_params(axis="x", top=True, labeltop=True, bottom=False, labelbottom=False)
        ax.set_title(label(jc.judge, 28), fontsize=8)
    title = (f"Metrics per language{note}. Colours as the cards: red where the recommendation rule trips "
             f"(R, accuracy < {THRESHOLDS.reliability}; |Δ| ≥ {THRESHOLDS.position}; |v − 0.5| ≥ "
             f"{THRESHOLDS.verbosity - 0.5:.2f}; κ_ord < {THRESHOLDS.consistency}; invalid ≥ 5 %), yellow "
             "close to it, green clear of it")
    _suptitle(fig, title)
    return fig


def radar(data: ReportData):
    """Small multiples: one radar per language, drawn as polygons on one plain axes (45
    polar axes take seconds to lay out and draw; this takes a fraction of one)."""
    judges = _judges(data)
    langs, note = _worst(data, RADAR_LANGS)
    if not judges or not langs or len(judges) > RADAR_JUDGES:  # overlaid polygons blur: the heatmap shows them
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
    ax.set_title(f"Per language{note}, clockwise from the top: " + ", ".join(RADAR_AXES) + ";\nrings at 0.5 and 1 "
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
    fig, ax = plt.subplots(figsize=(min(14, max(6, 0.25 * len(perts) * len(judges) + 3)), 4.2))
    width = 0.8 / len(judges)
    for i, (jc, acc, color) in enumerate(zip(judges, per, _colors(len(judges)), strict=True)):
        xs = [k + (i - (len(judges) - 1) / 2) * width for k in range(len(perts))]
        ax.bar(xs, [acc.get(p, 0.0) for p in perts], width, color=color, label=label(jc.judge))
    ax.set_xticks(range(len(perts)), [label(p, 28) for p in perts], rotation=20, ha="right")
    ax.set(ylim=(0, 1), ylabel="accuracy (all languages)", title="Accuracy per perturbation")
    ax.axhline(0.5, color="#999", linewidth=0.8, linestyle=":")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0)  # never over the bars
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


def render(data: ReportData, out_dir: Path, names: Sequence[str] | None = None) -> list[Plot]:
    """Draw every plot that has data (of ``names``, when given); write plots/NAME.png and
    plots/NAME.svg under ``out_dir``; remove stale files of plots that no longer apply."""
    plt = _pyplot()
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
        try:
            png = io.BytesIO()
            fig.savefig(png, format="png", dpi=110, metadata={"Software": None})
            buf = io.StringIO()
            fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
        finally:
            plt.close(fig)
        svg = clean_svg(buf.getvalue())
        write_atomic(folder / f"{name}.png", png.getvalue())  # renamed over a link, never through it
        write_atomic(folder / f"{name}.svg", ('<?xml version="1.0" encoding="utf-8"?>\n' + svg + "\n").encode())
        out.append(Plot(name, title, scoped(svg, name)))
    return out


# The plots as the children of a Painter share them: the metric heatmap (text in every cell)
# takes about as long as the others together.
GROUPS: tuple[tuple[str, ...], ...] = (
    ("metrics_heatmap", "language_switch"),
    tuple(name for name, _, _ in PLOTS if name not in ("metrics_heatmap", "language_switch")),
)


class Painter:
    """``render`` in child processes: matplotlib (about 40 MB once imported) and its figures
    never enter the caller's memory, so an audit's peak stays that of judging and scoring
    (bench/full_plan.py). The report data goes in and the plots come back as msgpack.

    The children start when the Painter is made and import matplotlib (and load its font)
    while the caller works: ``audit`` makes one before it plans and judges, so the report
    does not wait for those imports. With two or more CPUs the plots are shared between two
    children (``GROUPS``), drawn side by side; on Linux the second is forked by the first once
    the data is in, so matplotlib is imported once (~0.7 CPU-s, which an audit's judging
    would otherwise share its cores with). ``draw`` once, then ``close`` (always: a Painter
    never drawn ends its children)."""

    def __init__(self, out_dir: Path, *, parts: int | None = None):
        import subprocess
        import sys

        self.out_dir = Path(out_dir)
        if parts is None:
            parts = 2 if _cpus() >= 2 else 1
        groups = GROUPS if parts >= 2 else (tuple(name for name, _, _ in PLOTS),)
        # each child's argument: its groups, one argument each (names joined by commas)
        children = [groups] if len(groups) > 1 and _forks() else [(group,) for group in groups]
        self._procs = [subprocess.Popen([sys.executable, "-m", __name__, str(self.out_dir),
                                         *(",".join(group) for group in child)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        start_new_session=True)  # a Ctrl-C drains the audit, not them
                       for child in children]

    def draw(self, data: ReportData) -> list[Plot]:
        safe_dir(self.out_dir, "plots")  # a link at plots/ refused here, in one line
        payload = msgspec.msgpack.encode(data)
        for proc in self._procs:  # every child reads all its input before it draws
            assert proc.stdin is not None
            try:
                proc.stdin.write(payload)
                proc.stdin.close()
            except BrokenPipeError:
                pass  # it failed early: its stderr says why
            proc.stdin = None
        drawn: dict[str, Plot] = {}
        for proc in self._procs:
            stdout, stderr = proc.communicate()
            if proc.returncode != 0:
                self._failed(proc.returncode, stderr)
            drawn.update((p.name, p) for p in msgspec.msgpack.decode(stdout, type=list[Plot]))
        return [drawn[name] for name, _, _ in PLOTS if name in drawn]  # report order

    def _failed(self, returncode: int, err: bytes):
        stderr = err.decode(errors="replace").strip()
        system = re.match(r"\w*Error: \[Errno (\d+)\] (.*)$", stderr.splitlines()[-1] if stderr else "")
        if returncode == 2 and stderr.startswith("UnsafePath: "):
            raise UnsafePath(stderr.removeprefix("UnsafePath: "))
        if system:  # a full disk, a read-only folder: the caller reports it as the OSError it is
            raise OSError(int(system.group(1)), system.group(2), str(self.out_dir / "plots"))
        raise RuntimeError(f"drawing the plots failed: {stderr}")

    def close(self) -> None:
        """End the children that are still running (a Painter never drawn, or a failed draw)."""
        import os
        import signal

        for proc in self._procs:
            if proc.returncode is None:
                try:  # the child leads its own process group: a forked drawer goes with it
                    os.killpg(proc.pid, signal.SIGKILL)
                except OSError:
                    proc.kill()
                proc.communicate()

    def __enter__(self) -> Painter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _cpus() -> int:
    import os

    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _forks() -> bool:
    """Whether a child may fork its sibling after importing matplotlib (Linux: fork is
    safe with the Agg backend; elsewhere each child imports its own)."""
    import os
    import sys

    return sys.platform.startswith("linux") and hasattr(os, "fork")


def _render_groups(data: ReportData, out_dir: Path, groups: list[list[str] | None]) -> list[Plot]:
    """``render`` of each group; every group after the first in a forked process, side by
    side (they share the imported matplotlib). A forked drawer that fails exits as this
    process would (its stderr is this one's), and this process exits with its code."""
    import os
    import signal
    import sys

    forked = []
    for group in groups[1:]:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the forked drawer
            os.close(read)
            code = 0
            try:
                with os.fdopen(write, "wb") as out:
                    out.write(msgspec.msgpack.encode(render(data, out_dir, group)))
            except UnsafePath as e:
                print(f"UnsafePath: {e}", file=sys.stderr)
                code = 2
            except BaseException:
                import traceback

                traceback.print_exc()
                code = 1
            sys.stderr.flush()
            os._exit(code)
        os.close(write)
        forked.append((pid, read))
    try:
        plots = render(data, out_dir, groups[0])
    except BaseException:  # the drawers forked are ended, not left writing to a pipe no one reads
        for pid, read in forked:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(read)
        raise
    for pid, read in forked:
        with os.fdopen(read, "rb") as f:
            given = f.read()
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            sys.exit(code if code > 0 else 1)
        plots += msgspec.msgpack.decode(given, type=list[Plot])
    return plots


def render_apart(data: ReportData, out_dir: Path) -> list[Plot]:
    """``render`` in child processes, started now (``Painter``)."""
    with Painter(out_dir) as painter:
        return painter.draw(data)


def _warm() -> None:
    """Load what the first figure would: the font and the Agg and SVG writers."""
    plt = _pyplot()
    fig = plt.figure(figsize=(1, 1))
    try:
        fig.text(0.5, 0.5, "babelrun 0.5")
        fig.savefig(io.BytesIO(), format="png", dpi=20)
        fig.savefig(io.StringIO(), format="svg")
    finally:
        plt.close(fig)


if __name__ == "__main__":  # a child of a Painter
    import sys

    _warm()
    given = sys.stdin.buffer.read()
    if not given:  # the Painter was closed without drawing
        sys.exit(0)
    try:
        plots = _render_groups(msgspec.msgpack.decode(given, type=ReportData), Path(sys.argv[1]),
                               [arg.split(",") for arg in sys.argv[2:]] or [None])
    except UnsafePath as e:
        print(f"UnsafePath: {e}", file=sys.stderr)  # one line, re-raised as such by the parent
        sys.exit(2)
    sys.stdout.buffer.write(msgspec.msgpack.encode(plots))
