"""Self-preference: a simulated judge's self_preference knob is recovered by the
self-preference card, and reads 0 when off."""

from __future__ import annotations

import json
import random

import pytest

from babelrun.analyses import selfpref
from babelrun.app.cli import main
from babelrun.judges import judge_spec
from babelrun.score import stats as stats_
from helpers import quiet_audit, simulated, write_manifest

# (better family, worse family): the worse output alpha's, beside beta's or gamma's; neither
# output alpha's; and alpha's the better one
KINDS = [("beta", "alpha"), ("gamma", "alpha"), ("beta", "gamma"), ("gamma", "beta"), ("alpha", "beta")]


def _pairs(path, n=1500, seed=5):
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        better_family, worse_family = KINDS[i % len(KINDS)]
        better, worse = (f"a good answer to {i}" + " and more" * rng.randrange(3),
                         f"a poor answer {i}" + "!" * rng.randrange(30))
        first = rng.random() < 0.5
        rows.append({"input": f"question {i}", "label": 1 if first else 2,
                     "output_1": better if first else worse, "output_2": worse if first else better,
                     "family_1": better_family if first else worse_family,
                     "family_2": worse_family if first else better_family})
    path.write_text(json.dumps(rows))


@pytest.fixture(scope="module")
def preference(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("selfpref")
    _pairs(tmp / "pairs.json")
    judges = [{**simulated("alpha-on", default_accuracy=0.8, self_preference=0.3), "family": "alpha"},
              {**simulated("alpha-off", default_accuracy=0.8), "family": "alpha"},
              {**simulated("rival", default_accuracy=0.8), "family": "delta", "model": "rival"},
              {**simulated("no-family", default_accuracy=0.8), "model": "other"}]
    path = write_manifest(tmp, judges, corpus={"sources": [{"kind": "labelled_pairs", "path": "pairs.json"}]},
                          scoring={"bootstrap": 20})
    quiet_audit(path)
    return tmp / "run", selfpref.run(tmp / "run", confidence=0.99)


def test_a_self_preference_of_0_3_is_recovered_within_its_interval(preference):
    _, result = preference
    card = {c.judge: c for c in result.cards}["alpha-on"]
    for part in (card.all_pairs, card.length_neutral):
        s = part.self_preference
        assert s.lo <= 0.3 <= s.hi and s.lo > 0, s
        # under the knob: own-worse = s + (1 − s)(1 − accuracy); neutral = 1 − accuracy
        assert part.own_worse.lo <= 0.3 + 0.7 * 0.2 <= part.own_worse.hi
        assert part.neutral.lo <= 0.2 <= part.neutral.hi
        assert part.difference.lo > 0 and part.fisher_p < 1e-6
        assert part.paired_b > part.paired_c and part.paired_p < 1e-6  # against the delta judge
    assert card.length_neutral.own_worse.n < card.all_pairs.own_worse.n  # a real restriction
    assert card.other_judges == ["rival"]


def test_without_the_knob_self_preference_reads_zero(preference):
    _, result = preference
    card = {c.judge: c for c in result.cards}["alpha-off"]
    for part in (card.all_pairs, card.length_neutral):
        assert part.self_preference.lo <= 0 <= part.self_preference.hi
        assert part.difference.lo <= 0 <= part.difference.hi
        assert part.paired_p > 0.01
    assert result.skipped == ["no-family"]


def test_the_command_writes_the_cards(preference, capsys):
    run_dir, result = preference
    assert main(["self-preference", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert "alpha-on (family alpha)" in out and "self-preference s" in out
    assert (run_dir / "self_preference.json").is_file()


@pytest.mark.parametrize("table", [(3, 10, 9, 12), (0, 5, 5, 5), (40, 100, 20, 100), (7, 7, 0, 9)])
def test_fisher_exact_matches_scipy(table):
    stats = pytest.importorskip("scipy.stats")
    k1, n1, k2, n2 = table
    expected = stats.fisher_exact([[k1, n1 - k1], [k2, n2 - k2]]).pvalue
    assert stats_.fisher_exact(k1, n1, k2, n2) == pytest.approx(expected, rel=1e-9)


def test_the_knob_changes_no_existing_judge_id():
    from babelrun.judges import judge_id
    from babelrun.spec import SimulatedKnobs

    plain = judge_spec(name="s", backend="simulated", simulated=SimulatedKnobs(default_accuracy=0.8))
    off = judge_spec(name="s", backend="simulated", simulated=SimulatedKnobs(default_accuracy=0.8, self_preference=0.0))
    on = judge_spec(name="s", backend="simulated", simulated=SimulatedKnobs(default_accuracy=0.8, self_preference=0.3))
    assert judge_id(plain) == judge_id(off) != judge_id(on)
