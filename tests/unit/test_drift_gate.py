"""``babelrun diff --fail-if-worse [METRICS]`` gates on what the user names: a
metric named trips when its paired change is significantly for the worse; the bare flag is
``accuracy,reliability`` (docs/analyses.md, *Drift gate*)."""

from __future__ import annotations

import pytest

from babelrun.analyses import drift
from babelrun.app.cli import main
from babelrun.errors import UsageError
from babelrun.score import Change, Interval, LanguageDrift
from babelrun.score.cards import McNemar
from babelrun.score.paired import Drift, JudgeDrift, Served


def _iv(v: float) -> Interval:
    return Interval(v, v - 0.05, v + 0.05, 100)


def _change(metric: str, a: float, b: float, lo: float, hi: float) -> Change:
    return Change(metric, _iv(a), _iv(b), b - a, lo, hi)


NOT_SIGNIFICANT = McNemar(9, 5, 0.42)


def _drift(*changes: Change, mcnemar: McNemar = NOT_SIGNIFICANT) -> Drift:
    overall = LanguageDrift("all", "all languages", 50, 100, list(changes), mcnemar)
    judge = JudgeDrift("j", "a" * 16, "j", "b" * 16, 100, 0, 0, Served([], [], [], [], False), overall, [])
    return Drift("A", "B", [judge], [], 1000, 0.95, 0)


# The case: accuracy fell by 0.040 [−0.076, −0.003] while R rose, McNemar not significant.
ACCURACY_DOWN_R_UP = _drift(_change("accuracy", 0.80, 0.76, -0.076, -0.003),
                            _change("reliability", 0.60, 0.64, 0.01, 0.07))


def test_a_significant_accuracy_drop_trips_when_accuracy_is_named_even_with_r_up():
    assert drift.worse(ACCURACY_DOWN_R_UP, metrics=("reliability",)) == []  # R alone: nothing worse
    reasons = drift.worse(ACCURACY_DOWN_R_UP, metrics=("accuracy",))
    assert reasons == ["j: accuracy changed -0.040 [-0.076, -0.003]"]


def test_the_bare_flag_gates_on_accuracy_and_reliability():
    assert drift.gate_metrics(None) == drift.DEFAULT_GATE == ("accuracy", "reliability")
    assert drift.worse(ACCURACY_DOWN_R_UP) == drift.worse(ACCURACY_DOWN_R_UP, metrics=("accuracy",))
    r_down = _drift(_change("accuracy", 0.8, 0.8, -0.02, 0.02), _change("reliability", 0.6, 0.5, -0.15, -0.05))
    assert drift.worse(r_down) == ["j: R changed -0.100 [-0.150, -0.050]"]
    # McNemar belongs to accuracy: right less often in B, significantly
    fewer = _drift(_change("accuracy", 0.8, 0.78, -0.05, 0.01), mcnemar=McNemar(12, 2, 0.013))
    assert len(drift.worse(fewer)) == 1 and drift.worse(fewer, metrics=("reliability",)) == []


def test_names_headers_and_biases_without_a_better_direction():
    assert drift.gate_metrics("accuracy, R") == ("accuracy", "reliability")
    # Δ moved away from 0 (significantly): worse; toward 0: better, even though it changed
    away = _drift(_change("position_bias", 0.05, 0.25, 0.1, 0.3))
    toward = _drift(_change("position_bias", -0.30, -0.05, 0.15, 0.35))
    assert drift.worse(away, metrics=("position_bias",)) and not drift.worse(toward, metrics=("position_bias",))
    longer = _drift(_change("verbosity", 0.55, 0.75, 0.1, 0.3))  # v away from 0.5
    assert drift.worse(longer, metrics=("verbosity",)) and not drift.worse(longer)  # not in the default
    undefined = _drift(Change("accuracy", _iv(0.8), _iv(0.7), -0.1, None, None))
    assert drift.worse(undefined) == []


@pytest.mark.parametrize("names", ["accuracy,nope", "tie_rate", ","])
def test_a_metric_diff_does_not_compare_is_refused(names):
    with pytest.raises(UsageError, match="not a metric diff compares"):
        drift.gate_metrics(names)


def test_the_cli_refuses_an_unknown_metric_in_one_line(tmp_path, capsys):
    assert main(["diff", str(tmp_path), str(tmp_path), "--fail-if-worse", "acuracy"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "acuracy is not a metric diff compares" in err
