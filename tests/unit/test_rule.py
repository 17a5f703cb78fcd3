"""`backend: rule`: a deterministic scorer as a judge, and as a cascade's cheap
triage stage whose card shows the calls it saves and the accuracy it costs."""

from __future__ import annotations

import anyio
import pytest

import babelrun
from babelrun.core.items import Item
from babelrun.errors import ManifestError
from babelrun.judges import build, judge_id, judge_spec
from babelrun.judges import rule as rules
from babelrun.spec import RuleSpec
from helpers import request, simulated, write_manifest


def _verdict(rule: dict, reference: str, perturbed: str, order: str = "ref_first") -> str:
    spec = judge_spec(name="r", backend="rule", rule=RuleSpec(**rule))
    item = Item("x", "text", "en", "r", "prompt", reference, perturbed, "truncate", 0.5, len(reference), len(perturbed))
    reply = anyio.run(build(spec, 0).judge, request(item, order))
    return reply.raw


@pytest.mark.parametrize(("rule", "reference", "perturbed", "expected"), [
    ({"kind": "length", "min_ratio": 1.5}, "a long and complete answer", "a long", "A"),
    ({"kind": "length", "min_ratio": 1.5}, "twelve chars", "ten chars!", "tie"),  # ratio under 1.5
    ({"kind": "regex", "pattern": r"\d{4}"}, "founded in 1871", "founded long ago", "A"),
    ({"kind": "regex", "pattern": r"\d{4}"}, "no year", "no year either", "tie"),
    ({"kind": "exact_match", "expected": "Paris"}, " paris ", "Lyon", "A"),
    ({"kind": "json", "required": ["name"]}, '{"name": 1}', '{"other": 1}', "A"),
    ({"kind": "json"}, "[1, 2]", "{broken", "A"),
])
def test_each_rule_names_the_better_answer_or_a_tie(rule, reference, perturbed, expected):
    assert _verdict(rule, reference, perturbed) == expected
    flipped = {"A": "B", "B": "A", "tie": "tie"}[expected]
    assert _verdict(rule, reference, perturbed, "pert_first") == flipped  # the same answer, in slot B


def test_a_registered_python_function_is_a_rule_and_its_failures_are_recorded():
    rules.register("test-count-e", lambda prompt, answer: answer.count("e"))
    assert _verdict({"kind": "python", "function": "test-count-e"}, "eeee", "e") == "A"
    rules.register("test-boom", lambda prompt, answer: 1 / 0)
    with pytest.raises(babelrun.errors.RejectedError, match="ZeroDivisionError"):
        _verdict({"kind": "python", "function": "test-boom"}, "a", "b")


@pytest.mark.parametrize(("judge", "field", "problem"), [
    ({"name": "r", "backend": "rule"}, "judges[0].rule", "needs a rule"),
    ({"name": "r", "backend": "rule", "rule": {"kind": "regex"}}, "judges[0].rule.pattern", "needs pattern"),
    ({"name": "r", "backend": "rule", "rule": {"kind": "regex", "pattern": "("}}, "judges[0].rule.pattern",
     "not a regular expression"),
    ({"name": "r", "backend": "rule", "rule": {"kind": "python", "function": "nobody"}},
     "judges[0].rule.function", "no function registered"),
    ({**simulated("s"), "rule": {"kind": "length"}}, "judges[0].rule", "does not apply to the simulated backend"),
])
def test_bad_rules_are_named_by_field(tmp_path, judge, field, problem):
    with pytest.raises(ManifestError) as e:
        babelrun.load_manifest(write_manifest(tmp_path, [judge]))
    assert e.value.path == field and problem in str(e.value)


def test_a_rule_judge_has_its_own_id_and_existing_ids_do_not_move():
    a = judge_spec(name="a", backend="rule", rule=RuleSpec(kind="length", min_ratio=1.5))
    b = judge_spec(name="b", backend="rule", rule=RuleSpec(kind="length", min_ratio=2.0))
    assert judge_id(a) != judge_id(b)
    # a simulated judge's id from before rules, families and self-preference existed
    assert judge_id(judge_spec(name="s", backend="simulated", family="gpt")) == judge_id(
        judge_spec(name="s", backend="simulated"))


def test_the_triage_example_is_a_valid_manifest():
    from helpers import ROOT

    manifest = babelrun.load_manifest(ROOT / "examples" / "triage.yaml")
    assert [j.backend for j in manifest.judges] == ["rule", "simulated"]
