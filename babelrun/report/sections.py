"""The report's sections, in the one order both formats show them.

Each ``Section`` names its anchor, its title (the HTML contents) and the part of a
``ReportData`` it reads. Each format renders every section with one function, registered
with ``@renders(format, name)`` beside the format's other code (``html.py``, ``markdown.py``);
``rendered(format)`` gives the sections in order with that format's renderers, and fails on a
section a format has no renderer for. The first section (the judge × language matrix) opens
the HTML page, above the contents. A section whose renderer returns nothing is left out
(and out of the contents).

Adding a section: one line in ``SECTIONS`` and a renderer in each format.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple


class Section(NamedTuple):
    name: str  # the HTML anchor, and the key of each format's renderer
    title: str  # the HTML contents' entry
    needs: str  # what of ReportData it reads


SECTIONS: tuple[Section, ...] = (
    Section("matrix", "Judge × language", "every run's cards (R per judge × language), thresholds"),
    Section("diagnosis", "Diagnosis", "every run's misconfigured judges (score/diagnose.py)"),
    Section("leaderboard", "Leaderboard", "every run's cards, by item family"),
    Section("recommendations", "Recommendations", "recommendations, thresholds"),
    Section("cards", "Reliability cards per language", "every run's text and labelled-pair cards"),
    Section("pointwise", "Pointwise judges", "every run's pointwise cards"),
    Section("mitigations", "Mitigations", "every run's composite cards"),
    Section("agentic", "Agent trajectories", "every run's agentic cards"),
    Section("robustness", "Robustness probes", "every run's probe cards (judge × probe, worst languages)"),
    Section("plots", "Plots", "the drawn plots (HTML only; Markdown renders nothing)"),
    Section("audit", "Perturbation audit", "every run's perturbation audit, segmentation, filters"),
    Section("analyses", "Analyses", "the analyses' results (calibration, invariance, agreement) and staleness"),
    Section("stats", "Run statistics", "every run's log statistics and stats.json"),
    Section("spend", "Spend", "every run's cost ledger (stats.json spend): judge, language, call kind"),
    Section("identities", "Judge identities", "every run's judge identities (run.yaml, records)"),
    Section("examples", "Example failures", "every run's example failures and their texts"),
)
FORMATS = ("html", "markdown")

_RENDERERS: dict[tuple[str, str], Callable[..., Any]] = {}


def renders(fmt: str, name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``fn`` as ``fmt``'s renderer of the section ``name``."""
    if fmt not in FORMATS or name not in {s.name for s in SECTIONS}:
        raise ValueError(f"no report format {fmt!r} or section {name!r}")

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        _RENDERERS[(fmt, name)] = fn
        return fn

    return register


def rendered(fmt: str) -> list[tuple[Section, Callable[..., Any]]]:
    """Every section in order with ``fmt``'s renderer."""
    missing = [s.name for s in SECTIONS if (fmt, s.name) not in _RENDERERS]
    if missing:
        raise LookupError(f"the {fmt} report has no renderer for section(s) {', '.join(missing)}")
    return [(s, _RENDERERS[(fmt, s.name)]) for s in SECTIONS]
