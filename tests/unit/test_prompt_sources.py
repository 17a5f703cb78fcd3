"""Reading other tools' prompts and verdicts: chat markup, braces, nunjucks, two scores,
soft label tokens (the e2e audits are tests/e2e/test_prompt_formats.py)."""

from __future__ import annotations

import math

import pytest

from babelrun import judges
from babelrun.judges import jinja, judge_spec
from babelrun.judges.prompt import slot_probabilities
from babelrun.judges.protocol import TemplateError, check_verdict, identity, slot_reader
from babelrun.judges.templates import inline, read_text, substitute, to_format
from babelrun.spec import VerdictSpec

SCORES = VerdictSpec(scores=r"^\s*(\d+(?:\.\d+)?)\s+(\d+(?:\.\d+)?)", match="first")
BRACKETS = VerdictSpec(scores=r"\[\[(\d+\.?\d*),\s?(\d+\.?\d*)\]\]")


def test_two_scores_compare_and_mirror():
    read = slot_reader(SCORES)
    assert [read(r) for r in ("8 6\nwhy", "6 8", "7 7", "7.5 7.50", "eight six", "")] == \
        ["A", "B", "tie", "tie", "invalid", "invalid"]
    fastchat = slot_reader(BRACKETS)
    assert fastchat("first [[3, 9]] then [[9, 3]]") == "A"  # the last match by default
    for a in range(0, 11):  # swapping the two scores swaps the slot: no slot is favoured
        for b in range(0, 11):
            mirrored = {"A": "B", "B": "A", "tie": "tie"}[read(f"{a} {b}")]
            assert read(f"{b} {a}") == mirrored


@pytest.mark.parametrize(("verdict", "field"), [
    (VerdictSpec(scores=r"(\d+)"), "verdict.scores"),
    (VerdictSpec(scores=r"(\d+) (\d+)", labels={"1": "A", "2": "B"}), "verdict.labels"),
    (VerdictSpec(scores=r"(\d+) (\d+", ), "verdict.scores"),
    (VerdictSpec(), "verdict.pattern"),
    (VerdictSpec(labels={"m": "A"}), "verdict.labels"),
])
def test_bad_two_score_and_label_verdicts_name_their_field(verdict, field):
    with pytest.raises(TemplateError) as info:
        check_verdict(verdict, "pairwise")
    assert info.value.field == field


def test_soft_label_tokens_are_exact_and_case_sensitive():
    labels = {"m": "A", "M": "B"}
    top = [("m", math.log(0.6)), (" M", math.log(0.3)), ("A", math.log(0.1))]
    p_a, p_b, p_tie = slot_probabilities(top, labels)
    assert (p_a, p_b, p_tie) == pytest.approx((0.6 / 0.9, 0.3 / 0.9, 0.0))
    assert slot_probabilities([("A", 0.0), ("B", -1.0)], labels) is None  # A/B are not the user's tokens
    assert slot_probabilities(top) == pytest.approx((1.0, 0.0, 0.0))  # built-in tokens: only "A" counts


def test_new_verdict_fields_enter_judge_id_only_when_set():
    base = judge_spec(name="j", backend="simulated", verdict=VerdictSpec(pattern=r"\[\[([AB])\]\]"))
    assert identity(base)["verdict"] == {"pattern": r"\[\[([AB])\]\]"}  # as before: no scores key
    two = judge_spec(name="j", backend="simulated", verdict=SCORES)
    assert identity(two)["verdict"]["scores"] == SCORES.scores
    assert judges.judge_id(base) != judges.judge_id(two)


def test_chat_markup_and_braces():
    system, user = read_text("<|im_start|>system\n  Be fair.\n<|im_end|>\n<|im_start|>user\nQ {question}\n<|im_end|>")
    assert (system, user) == ("Be fair.", "Q {question}")
    assert read_text("plain {question}") == ("", "plain {question}")
    assert to_format("Q {question} {{x}}") == "Q {question} {{x}}"  # already a template: unchanged
    assert to_format('{\n "instruction": """{instruction}""",\n}') == '{{\n "instruction": """{instruction}""",\n}}'
    # Jinja2 text that is only {{ name }} fields is the same str.format text (promptfoo's rubric prompt)
    assert jinja.is_jinja(["<O>{{ output }}</O> {reason: string}"])
    assert jinja.as_format("<O>{{ output }}</O> {reason: string}{# a note #}") == "<O>{output}</O> {{reason: string}}"
    assert jinja.as_format("{% if x %}{{ output }}{% endif %}") is None  # needs Jinja2: rendered in the sandbox
    assert not jinja.is_jinja(["Q {question}", 'JSON: {{"w": 1}}'])  # a str.format template with a field
    with pytest.raises(TemplateError, match="plain name"):
        to_format('{"a": 1} {answer_a!r}')


def test_vars_fill_a_field_with_text_that_may_use_fields():
    assert substitute("R: {rubric} A: {answer}", {"rubric": "answers {question} {x}"}) == \
        "R: answers {question} {x} A: {answer}"
    assert substitute("{{lit}} {rubric}", {"rubric": "r"}) == "{{lit}} r"


def test_inline_prompt_rule():
    assert inline("Q: {question}") and inline("two\nlines") and inline("Q: {{ question }} A: {{ answer_a }}")
    assert not inline("pairwise") and not inline("prompts/my judge.txt")
