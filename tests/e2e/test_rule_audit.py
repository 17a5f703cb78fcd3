"""``backend: rule`` as a cascade's cheap stage through a whole audit on the bundled corpus (the
rules themselves are unit/test_rule.py)."""

from __future__ import annotations

import pytest

import babelrun
from babelrun.plan import Plan
from helpers import quiet_audit, simulated, write_manifest


def test_a_length_rule_as_a_cascades_cheap_stage_on_the_bundled_corpus(tmp_path):
    min_ratio = 1.3
    judges = [{"name": "length-rule", "backend": "rule", "rule": {"kind": "length", "min_ratio": min_ratio}},
              {**simulated("strong", default_accuracy=0.92), "calls": "all"}]
    composites = [{"kind": "cascade", "name": "triage", "cheap": "length-rule", "strong": "strong",
                   "base": "strong"}]
    path = write_manifest(tmp_path, judges, composites=composites,
                          corpus={"sources": [{"kind": "bundled"}], "references_per_language": 12},
                          perturbations=[{"name": n, "severities": [0.3, 0.6]} for n in ("truncate", "repeat_pad")])
    cards = quiet_audit(path).cards
    comp = {c.name: c for c in cards.composites}["triage"]
    # escalated: exactly the items whose longer answer is under min_ratio times the shorter
    items = list(Plan.from_manifest(babelrun.load_manifest(path)).items())
    close = sum(max(i.ref_len, i.pert_len) < min_ratio * min(i.ref_len, i.pert_len) for i in items)
    assert comp.escalation_rate.value == pytest.approx(close / len(items), abs=1e-4)
    # the rule makes no model call: the strong judge is asked on the escalations alone
    assert comp.calls_per_decision == pytest.approx(comp.escalation_rate.value, abs=1e-4)
    # what the triage costs: against the strong judge alone, accuracy falls (repeat_pad items
    # are longer than their reference, and the rule prefers them), by a paired interval
    overall = next(c for c in comp.change if c.lang == "all")
    accuracy = next(m for m in overall.changes if m.metric == "accuracy")
    assert accuracy.hi < 0
    assert overall.mcnemar.b > overall.mcnemar.c
