"""Bar charts: accuracy per perturbation, and the language-switch flip rates against the pivot."""

from __future__ import annotations

from ..data import ReportData
from ..safe import label
from . import canvas


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
    judges = canvas.judges(data)
    per = [_perturbation_accuracy(jc) for jc in judges]
    perts = sorted({p for d in per for p in d})
    if not perts:
        return None
    plt = canvas.pyplot()
    fig, ax = plt.subplots(figsize=(min(14, max(6, 0.25 * len(perts) * len(judges) + 3)), 4.2))
    width = 0.8 / len(judges)
    for i, (jc, acc, color) in enumerate(zip(judges, per, canvas.colors(len(judges)), strict=True)):
        xs = [k + (i - (len(judges) - 1) / 2) * width for k in range(len(perts))]
        ax.bar(xs, [acc.get(p, 0.0) for p in perts], width, color=color, label=label(jc.judge))
    ax.set_xticks(range(len(perts)), [label(p, 28) for p in perts], rotation=20, ha="right")
    ax.set(ylim=(0, 1), ylabel="accuracy (all languages)", title="Accuracy per perturbation")
    ax.axhline(0.5, color="#999", linewidth=0.8, linestyle=":")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0)  # never over the bars
    canvas.tight(fig)
    return fig


def language_switch(data: ReportData):
    rows = [r for inv in data.invariance for r in inv.rows if r.correctness_flip.value is not None]
    if not rows:
        return None
    plt = canvas.pyplot()
    judges = sorted({r.judge for r in rows})
    langs = sorted({r.lang for r in rows})
    fig, ax = plt.subplots(figsize=(min(14, max(6, 0.12 * len(langs) * len(judges) + 2)), 3.8))
    width = 0.8 / len(judges)
    for i, (judge, color) in enumerate(zip(judges, canvas.colors(len(judges)), strict=True)):
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
    canvas.tight(fig)
    return fig
