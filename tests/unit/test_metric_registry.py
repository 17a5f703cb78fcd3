"""The card metrics registry (score/metrics.REGISTRY) is the one list every reader uses:
scoring's intervals, both reports' metric tables, the mitigations' table and the tidy export."""

from __future__ import annotations

import importlib

import msgspec
import numpy as np

from babelrun.report import summary
from babelrun.score import Card, metrics, paired, tidy
from babelrun.score.stats import Interval

markdown = importlib.import_module("babelrun.report.markdown")
html = importlib.import_module("babelrun.report.html")


def _card(**over) -> Card:
    iv = Interval(0.5, 0.4, 0.6, 10)
    base = {m.name: iv for m in metrics.REGISTRY}
    return Card(items=10, presentations=20, **{**base, **over})


def test_registry_names_every_interval_field_of_a_card() -> None:
    fields = {f.name for f in msgspec.structs.fields(Card) if "Interval" in str(f.type)}
    assert {m.name for m in metrics.REGISTRY} == fields - {"soft_margin"}
    # a comparison computes every compared metric, in the order cards.json keeps its changes
    assert paired.METRICS == ("accuracy", "position_bias", "order_consistency", "verbosity", "reliability")
    assert set(metrics.from_sums(np.zeros(len(metrics.STATS)))) == {m.name for m in metrics.REGISTRY}


def test_interval_counts_follow_the_registry() -> None:
    sums = np.arange(1, len(metrics.STATS) + 1)
    n = metrics.interval_n(sums, items=99)
    col = dict(zip(metrics.STATS, sums.tolist(), strict=True))
    assert n == {"reliability": 99, "accuracy": col["n"], "position_bias": col["paired_slots"],
                 "verbosity": col["lw_n"] + col["lb_n"], "order_consistency": col["pairs"],
                 "verdict_consistency": col["pairs"], "tie_rate": col["n"], "invalid_rate": col["n"],
                 "self_consistency": col["sample_pairs_rf"] + col["sample_pairs_pf"],
                 "self_consistency_ref_first": col["sample_pairs_rf"],
                 "self_consistency_pert_first": col["sample_pairs_pf"]}


def test_a_registry_line_reaches_both_reports_summary_and_tidy(monkeypatch) -> None:
    extra = metrics.Metric("tie_rate", "extra", ("n",), compared=6)
    monkeypatch.setattr(summary, "REGISTRY", (*metrics.REGISTRY, extra))
    monkeypatch.setattr(tidy, "REGISTRY", (*metrics.REGISTRY, extra))
    card = _card(tie_rate=Interval(0.25, 0.125, 0.375, 8))
    cells = summary.metric_cells(card, {})
    assert cells[0] == "10" and cells[-1] == "0.25 [0.12, 0.38]"  # round half to even: 0.125 -> 0.12
    assert len(markdown._row("all", card).split("|")) == len(summary.TABLE_METRICS) + 5
    assert len(html._metric_row("all", card)) == len(summary.TABLE_METRICS) + 3
    names = [name for name, _ in tidy._metrics(card, "text")]
    assert names[:2] == ["items", "presentations"] and names[-1] == "tie_rate"  # the new line, last


def test_reports_print_the_registry_columns_in_order() -> None:
    header = markdown._HEADER.split("\n")[0]
    assert header == "| {what} | items | R | accuracy | Δ (slot A) | v (longer) | κ_ord | κ_same | ties | invalid |"
    assert summary.COMPARED == (("reliability", "R"), ("accuracy", "accuracy"), ("position_bias", "Δ (slot A)"),
                                ("verbosity", "v (longer)"), ("order_consistency", "κ_ord"))
    row = markdown._row("x", _card(invalid_rate=Interval(None, None, None, 0),
                                   position_bias=Interval(-0.0004, -0.01, 0.01, 10)))
    assert row == ("| x | 10 | 0.50 [0.40, 0.60] | 0.50 [0.40, 0.60] | +0.00 [-0.01, +0.01] | 0.50 [0.40, 0.60] "
                   "| 0.50 [0.40, 0.60] | 0.50 [0.40, 0.60] | 0.50 | 0.00 |")
