"""The metrics recover the simulated judge's knobs, and the extremes score where they must."""

import pytest

from helpers import quiet_audit, simulated

ALL_LANGS = {"sources": [{"kind": "bundled"}], "languages": "all", "references_per_language": 12}


def _overall(folder, knobs, bootstrap=1000):
    """The overall card of one simulated judge with these knobs, audited on every bundled language."""
    manifest = {"judges": [simulated(**knobs)], "corpus": ALL_LANGS, "scoring": {"bootstrap": bootstrap}}
    return quiet_audit(manifest, folder=folder, expect_exit=0).cards.judges[0].overall


def test_recovers_position_and_verbosity_bias(tmp_path):
    card = _overall(tmp_path, {"default_accuracy": 0.8, "position_bias": 0.3, "verbosity_bias": 0.4})
    assert card.presentations >= 2000  # "a few thousand calls"
    delta, v = card.position_bias, card.verbosity
    assert delta.lo <= 0.3 <= delta.hi, delta
    # v = 1/2 + verbosity_bias / 2 under the simulated model: 2v - 1 estimates the knob.
    assert 2 * v.lo - 1 <= 0.4 <= 2 * v.hi - 1, v
    # And the intervals are tight enough to mean something.
    assert delta.hi - delta.lo < 0.1 and v.hi - v.lo < 0.1


def test_unbiased_judge_is_not_flagged(tmp_path):
    card = _overall(tmp_path, {"default_accuracy": 0.8})
    assert card.position_bias.lo <= 0 <= card.position_bias.hi
    assert card.verbosity.lo <= 0.5 <= card.verbosity.hi
    assert card.accuracy.lo <= 0.8 <= card.accuracy.hi


def test_perfect_judge_scores_one(tmp_path):
    card = _overall(tmp_path, {"default_accuracy": 1.0}, bootstrap=50)
    assert card.accuracy.value == 1.0
    assert card.order_consistency.value == 1.0
    assert card.position_bias.value == 0.0
    assert card.verbosity.value == 0.5
    assert card.reliability.value == 1.0


def test_all_invalid_judge_scores_zero(tmp_path):
    card = _overall(tmp_path, {"invalid_rate": 1.0}, bootstrap=50)
    assert card.invalid_rate.value == 1.0
    assert card.accuracy.value == 0.0
    assert card.order_consistency.value == 0.0
    assert card.reliability.value == 0.0


def test_always_tie_and_always_a_judges_score_low(tmp_path):
    tie = _overall(tmp_path / "tie", {"tie_rate": 1.0}, bootstrap=50)
    assert tie.reliability.value == 0.0
    slot_a = _overall(tmp_path / "a", {"position_bias": 1.0}, bootstrap=50)
    assert slot_a.position_bias.value == 1.0 and slot_a.accuracy.value == 0.5
    assert slot_a.reliability.value == pytest.approx(0.6 * 0.5 * 0.2)
