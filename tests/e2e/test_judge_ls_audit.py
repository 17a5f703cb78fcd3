"""Judge-LS through whole audits: a known flip rate recovered on all pairs and on the audit-
passing ones, tie-half accuracy, and FLORES with a target pivot found by invariance. (The
variants, conditions and transformation audit are unit/test_judge_ls.py.)"""

from __future__ import annotations

import json

import msgspec
import pytest

from babelrun.analyses import invariance, judge_ls
from babelrun.app.cli import main
from babelrun.core.items import LabelledPair
from babelrun.corpus import labelled
from helpers import SHARED_DATA, quiet_audit, simulated, tiny_flores, write_manifest

LLMBAR = SHARED_DATA / "llmbar"

needs_llmbar = pytest.mark.skipif(not LLMBAR.is_dir(), reason="shared LLMBar data absent")

SETS = ("LLMBar_Natural", "LLMBar_Adversarial_Neighbor", "LLMBar_Adversarial_GPTInst",
        "LLMBar_Adversarial_GPTOut", "LLMBar_Adversarial_Manual")


def _pair(cond, prompt, better, worse="worse answer", pid="p1"):
    lang, mix = labelled.condition(cond)
    return LabelledPair(lang, pid, "S", prompt, better, worse, condition=mix)


@needs_llmbar
def test_judge_ls_recovers_a_known_flip_rate_on_all_and_on_audit_passing_pairs(tmp_path, capsys):
    # Right with probability 0.95 in English and 0.6 in Chinese (the mix is Chinese too),
    # independently per presentation: P(correctness flips) = p(1-q) + q(1-p).
    judge = simulated(accuracy={"en": 0.95, "zh": 0.6})
    sources = [{"kind": "labelled_pairs", "path": str(LLMBAR / s)} for s in SETS] + [{"kind": "labelled_pairs"}]
    path = write_manifest(tmp_path, [judge],
                          corpus={"sources": sources, "parallel": {"pivot": "en", "tie_probes": True}},
                          scoring={"bootstrap": 20})
    quiet_audit(path)
    # a stricter length rule than the default, so that the audit flags some Chinese fields
    rules = judge_ls.AuditRules(min_length_ratio=0.3)
    result = invariance.run(tmp_path / "run", pivot="en", confidence=0.999, rules=rules).labelled
    assert 0 < len(result.flagged) < 40 and result.all_pairs.pairs == 419
    assert result.audit_passing.pairs == 419 - len(result.flagged)
    expected = 0.95 * 0.4 + 0.6 * 0.05
    for part, pairs in ((result.all_pairs, 40), (result.audit_passing, 40 - len(result.flagged))):
        rows = {(r.condition, r.subset): r for r in part.rows}
        assert {s for _, s in rows} == {"all", *SETS}  # the per-subset rows
        for cond in ("zh", "zh-en-switched"):
            row = rows[(cond, "all")]
            assert row.matched == 2 * pairs and row.pairs == pairs
            assert row.correctness_flip.lo <= expected <= row.correctness_flip.hi, (cond, row.correctness_flip)
            assert row.right_in_pivot_only > row.right_in_condition_only and row.mcnemar_p < 0.01
        pivot = rows[("en", "all")]
        assert pivot.judgment_flip is None and pivot.accuracy.lo <= 0.95 <= pivot.accuracy.hi
        # no ties: tie-half accuracy is strict accuracy
        assert pivot.accuracy_tie_half.value == pivot.accuracy.value
    ties = {t.condition: t for t in result.all_pairs.tie_probes}
    assert set(ties) == {"zh", "zh-en-switched"} and ties["zh"].probes == 80

    # the command: the default pivot is the manifest's, the audit's thresholds are options
    assert main(["invariance", str(tmp_path / "run"), "--audit-min-length-ratio", "0.3"]) == 0
    out = capsys.readouterr().out
    assert f"{len(result.flagged)} of 419 pairs flagged" in out and "Audit-passing pairs" in out
    saved = msgspec.json.decode((tmp_path / "run" / "invariance.json").read_bytes(), type=invariance.Invariance)
    assert saved.labelled.flagged == result.flagged and saved.labelled.rules.min_length_ratio == 0.3


def test_tie_half_accuracy_counts_a_tie_as_half(tmp_path):
    pairs = [{"id": f"q{i}", "input": f"q {i}", "output_1": "good answer", "output_2": "bad", "label": 1}
             for i in range(200)]
    (tmp_path / "en.json").write_text(json.dumps(pairs))
    path = write_manifest(tmp_path, [simulated(default_accuracy=1.0, tie_rate=0.5)],
                          corpus={"sources": [{"kind": "labelled_pairs", "path": "en.json"}]},
                          scoring={"bootstrap": 20})
    quiet_audit(path)
    (row,) = invariance.run(tmp_path / "run", pivot="en").labelled.all_pairs.rows[:1]
    ties = 1 - row.accuracy.value  # every decisive verdict is right
    assert row.accuracy_tie_half.value == pytest.approx(row.accuracy.value + ties / 2, abs=1e-4)
    assert 0.4 < ties < 0.6


def test_flores_with_a_target_pivot_makes_every_family_and_invariance_finds_it(tmp_path, capsys):
    path = write_manifest(tmp_path, [simulated()], corpus={
        "sources": [tiny_flores(tmp_path)], "parallel": {"pivot": "es", "code_switched": True, "tie_probes": True}},
        perturbations=[{"name": "truncate", "severities": [0.5]}], scoring={"bootstrap": 20})
    quiet_audit(path)
    # no --pivot: the manifest's pivot, not English
    assert main(["invariance", str(tmp_path / "run")]) == 0
    result = msgspec.json.decode((tmp_path / "run" / "invariance.json").read_bytes(), type=invariance.Invariance)
    assert result.pivot == "es"
    assert [r.lang for r in result.rows] == ["hi"] and result.rows[0].matched > 0
    assert result.code_switched and result.tie_probes[0].probes == 4
