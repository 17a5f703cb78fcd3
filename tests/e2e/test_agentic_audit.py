"""Agentic trajectories through whole audits: a mixed text + agentic audit recovers the agentic
biases and leaves the text cards alone; the agentic example runs offline and resumes. (The
loaders, perturbations and focus modes are unit/test_agentic.py.)"""

from __future__ import annotations

import msgspec
import pytest

from babelrun import agentic
from babelrun.agentic.perturb import AGENTIC_PERTURBATIONS
from helpers import quiet_audit, simulated, write_manifest

BUNDLED = list(agentic.bundled())
LANGS = sorted({t.lang for t in BUNDLED})
TEXT = {"sources": [{"kind": "bundled"}], "languages": LANGS, "references_per_language": 8}
MIXED = {**TEXT, "sources": [{"kind": "bundled"}, {"kind": "trajectories"}]}
JUDGES = [simulated("blind", default_accuracy=0.9, accuracy_by_perturbation={"hallucinated_tool": 0.5}),
          simulated("long", default_accuracy=0.9, verbosity_bias=0.4)]


_N_SEV = max(2, 200 // len(BUNDLED))  # the 40 bundled: 5 severities, 1,800 agentic items
DENSE = [round((k + 1) / _N_SEV, 4) for k in range(_N_SEV)]


def test_mixed_audit_recovers_the_agentic_biases_and_leaves_text_cards_alone(tmp_path, seed=1):
    agentic_spec = {"focus": "full_trace", "perturbations": [{"name": n, "severities": DENSE}
                                                              for n in AGENTIC_PERTURBATIONS]}
    (tmp_path / "text").mkdir()
    scoring = {"bootstrap": 500, "confidence": 0.99}
    text_only = quiet_audit(write_manifest(tmp_path / "text", JUDGES, corpus=TEXT, scoring=scoring,
                                           seed=seed)).cards
    mixed = quiet_audit(write_manifest(tmp_path, JUDGES, corpus=MIXED, agentic=agentic_spec,
                                       scoring=scoring, seed=seed)).cards
    # The text cards are those of the same audit without trajectories, number for number.
    assert mixed.judges == text_only.judges and text_only.agentic == []
    assert not any(p.perturbation.startswith("agent:") for j in mixed.judges for lc in j.languages
                   for p in lc.perturbations)

    blind, long = (next(j.overall for j in mixed.agentic if j.judge == name) for name in ("blind", "long"))
    # Blind to hallucinated tools: ~0.5 there, ~0.9 on the families it sees.
    h = blind.hallucination_detection
    assert h.lo <= 0.5 <= h.hi and h.hi < 0.75, h
    assert blind.tool_accuracy.lo > 0.8 and blind.argument_accuracy.lo > 0.75
    assert blind.length_bias.lo <= 0.5 <= blind.length_bias.hi
    # Prefers longer traces: 2v - 1 on the length probe estimates verbosity_bias = 0.4.
    v = long.length_bias
    assert 2 * v.lo - 1 <= 0.4 <= 2 * v.hi - 1 and v.lo > 0.55, v
    assert long.reliability.value < blind.reliability.value
    assert blind.not_measured == [] and long.not_measured == []
    # A family's accuracy pools its perturbations' presentations.
    single = {p.perturbation: p.accuracy for p in blind.by_perturbation}
    assert sorted(single) == sorted("agent:" + n for n in AGENTIC_PERTURBATIONS)
    parts = [single["agent:argument_corrupt"], single["agent:missing_required_arg"]]
    assert blind.argument_accuracy.value == pytest.approx(sum(a.value * a.n for a in parts) / sum(a.n for a in parts),
                                                          abs=1e-3)
    h_alone = single["agent:hallucinated_tool"]
    assert (blind.hallucination_detection.value, blind.hallucination_detection.n) == (h_alone.value, h_alone.n)
    for card in (blind, long):  # R_agent by its formula, from the card's own numbers
        acc = (card.tool_accuracy.value + card.argument_accuracy.value + card.hallucination_detection.value) / 3
        r = ((0.6 * acc + 0.4 * card.order_consistency.value) * (1 - 0.8 * abs(card.position_bias.value))
             * (1 - 0.7 * max(0.0, 2 * card.length_bias.value - 1)))
        assert card.reliability.value == pytest.approx(r, abs=2e-3)
        assert card.reliability.lo < card.reliability.value < card.reliability.hi
    # Per language too, and the Markdown report shows the agentic section.
    assert {lc.lang for lc in mixed.agentic[0].languages} == {t.lang for t in BUNDLED}
    assert "## Agentic: judge `long`" in (tmp_path / "run" / "report.md").read_text()


def test_a_family_absent_from_the_run_is_not_measured_and_does_not_scale_the_score(tmp_path):
    spec = {"perturbations": [{"name": "argument_corrupt", "severities": DENSE},
                              {"name": "tool_name_swap", "severities": DENSE}]}
    corpus = {"sources": [{"kind": "trajectories"}], "references_per_language": 10}
    cards = quiet_audit(write_manifest(tmp_path, [simulated(default_accuracy=1.0)], corpus=corpus,
                                       agentic=spec, scoring={"bootstrap": 50})).cards
    card = cards.agentic[0].overall
    assert card.not_measured == ["hallucination", "length"]
    assert card.hallucination_detection is None and card.length_bias is None
    assert card.tool_accuracy.value == 1.0 and card.argument_accuracy.value == 1.0
    assert card.reliability.value == 1.0  # renormalised over what was measured, no length gate
    assert (card.reliability.lo, card.reliability.hi) == (1.0, 1.0)
    assert "renormalised over tool, argument" in card.note
    assert cards.judges == []  # no text items, no text cards


def test_the_agentic_example_runs_offline_and_resumes(tmp_path):
    from helpers import ROOT

    body = msgspec.yaml.decode((ROOT / "examples" / "agentic.yaml").read_bytes())
    body["output_dir"] = str(tmp_path / "run")
    path = tmp_path / "agentic.yaml"
    path.write_bytes(msgspec.yaml.encode(body))
    first = quiet_audit(path)
    assert first.exit_code == 0 and first.new_records == first.planned_calls
    cards = {j.judge: j.overall for j in first.cards.agentic}
    assert cards["tool-blind"].hallucination_detection.hi < cards["tool-blind"].tool_accuracy.lo
    assert cards["long-lover"].length_bias.lo > 0.5 > cards["tool-blind"].length_bias.lo
    again = quiet_audit(path)
    assert again.new_records == 0 and again.already_done == first.planned_calls
    assert again.cards == first.cards
