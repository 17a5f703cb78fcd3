"""The report's figures in report order, and how a Painter's children share them."""

from __future__ import annotations

from collections.abc import Callable

from .bars import language_switch, perturbation_accuracy
from .heatmaps import cbc_ranks, metric_heatmap
from .radars import radar
from .scatters import reliability_vs_accuracy

PLOTS: list[tuple[str, str, Callable]] = [
    ("reliability_vs_accuracy", "Reliability vs accuracy", reliability_vs_accuracy),
    ("metrics_heatmap", "Metrics per language", metric_heatmap),
    ("radar", "Language profiles", radar),
    ("perturbation_accuracy", "Accuracy per perturbation", perturbation_accuracy),
    ("cbc_ranks", "CBC ranks before and after", cbc_ranks),
    ("language_switch", "Language-switch flip rates", language_switch),
]


# The plots as the children of a Painter share them: the metric heatmap (text in every cell)
# takes about as long as the others together.
GROUPS: tuple[tuple[str, ...], ...] = (
    ("metrics_heatmap", "language_switch"),
    tuple(name for name, _, _ in PLOTS if name not in ("metrics_heatmap", "language_switch")),
)
