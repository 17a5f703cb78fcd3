"""The general prompt readers (judges/templates.py, jinja.py, python_source.py): which syntax a
text is, a ``.py`` constant's value, ``fields:`` and placeholders written out, prompt parts,
label scores, and errors that name a tool only in that tool's file."""

from __future__ import annotations

import json

import pytest

from babelrun import judges, manifest
from babelrun.errors import ManifestError
from babelrun.judges import jinja, python_source
from babelrun.judges.protocol import Judging, TemplateError, check_verdict, slot_reader
from babelrun.spec import VerdictSpec
from helpers import ROOT, write_manifest

PROMPTFOO = ROOT / "tests" / "fixtures" / "prompt_formats" / "promptfoo" / "rubric_prompt.json"


@pytest.mark.parametrize(("texts", "expected"), [
    (["{{ instruction }}"], True),
    (["{% if x %}a{% endif %}"], True),
    (["{# note #} {answer_a}"], True),
    (["Q: {question}", 'JSON: {{"w": 1}}'], False),  # str.format with a field: {{ is a literal brace
    (["{{reason: string}}", "{{ output }}"], True),
    (["Plain text [[A]]"], False),
    (['{"winner": "A"} {answer_a}'], False),
])
def test_which_texts_are_jinja2(texts, expected):
    assert jinja.is_jinja(texts) is expected


SOURCE = '''
import os
BASE = ("Judge fairly. "
        "Reply [[A]] or [[B]].")
FULL = BASE + " Be brief."
ENTRY = {"name": "x", "type": "pairwise", "system_prompt": BASE, "prompt_template": "{answer_a} {answer_b}",
         "weight": 2}
TYPED: str = "typed"
LATER = f"{os.environ['X']} and {model}"
CALLED = "{q}".format(q=1)
'''


def test_python_constants_are_read_by_parsing():
    assert python_source.constant(SOURCE, "BASE") == "Judge fairly. Reply [[A]] or [[B]]."
    assert python_source.constant(SOURCE, "FULL").endswith("[[B]]. Be brief.")
    assert python_source.constant(SOURCE, "ENTRY") == {"name": "x", "type": "pairwise",
                                                       "system_prompt": "Judge fairly. Reply [[A]] or [[B]].",
                                                       "prompt_template": "{answer_a} {answer_b}"}
    assert python_source.constant(SOURCE, "TYPED") == "typed"
    with pytest.raises(python_source.PythonSourceError, match=r"an f-string.*need os.environ\['X'\], model"):
        python_source.constant(SOURCE, "LATER")
    with pytest.raises(python_source.PythonSourceError, match="a call"):
        python_source.constant(SOURCE, "CALLED")
    with pytest.raises(python_source.PythonSourceError, match="no module-level constant"):
        python_source.constant(SOURCE, "MISSING")
    assert set(python_source.text_constants(SOURCE)) == {"BASE", "FULL", "TYPED"}


def _load(tmp_path, **judge):
    return manifest.load(write_manifest(tmp_path, [{"name": "j", "backend": "simulated", **judge}]))


def _error(tmp_path, **judge) -> ManifestError:
    with pytest.raises(ManifestError) as info:
        _load(tmp_path, **judge)
    assert "\n" not in info.value.problem
    return info.value


def test_a_py_file_needs_a_name_and_lists_its_text_constants(tmp_path):
    (tmp_path / "p.py").write_text(SOURCE)
    assert "BASE" in _error(tmp_path, prompt={"file": "p.py"}).problem
    assert "did you mean 'BASE'" in _error(tmp_path, prompt={"file": "p.py", "name": "BASF"}).problem
    judge = _load(tmp_path, prompt={"file": "p.py", "name": "ENTRY"}).judges[0]
    assert judge.prompt.system.startswith("Judge fairly") and judge.prompt.source == "p.py#ENTRY"


def test_fields_must_name_a_name_of_the_template_and_a_babelrun_field(tmp_path):
    text = "Q {instruction}\nA {resp1}\nB {resp2}"
    ok = _load(tmp_path, prompt={"user": text, "fields": {"resp1": "answer_a", "resp2": "answer_b"}}).judges[0]
    messages = Judging.of(ok).render(_item(), "ref_first")
    assert messages[-1]["content"] == "Q Q?\nA REF\nB PERT"
    extra = _error(tmp_path, prompt={"user": text, "fields": {"resp1": "answer_a", "resp2": "answer_b",
                                                              "resp3": "answer_b"}})
    assert extra.path == "judges[0].prompt.fields.resp3"
    wrong = _error(tmp_path, prompt={"user": text, "fields": {"resp1": "answer_a", "resp2": "answer_c"}})
    assert wrong.path == "judges[0].prompt.fields.resp2" and "answer_b" in wrong.problem
    # the map is part of the judge: the same text with other bindings is another judge
    swapped = _load(tmp_path, prompt={"user": text, "fields": {"resp1": "answer_b", "resp2": "answer_a"}}).judges[0]
    assert judges.judge_id(swapped) != judges.judge_id(ok)


def test_placeholders_written_out_are_replaced_as_plain_text(tmp_path):
    text = 'Query: {$q}\n{"json": [1]}\nA: {$a}\nB: {$b}\n{$extra}'
    fields = {"{$q}": "question", "{$a}": "answer_a", "{$b}": "answer_b"}
    extra = {"{$extra}": "About {question}."}
    judge = _load(tmp_path, prompt={"user": text, "fields": fields, "vars": extra}).judges[0]
    assert judge.prompt.user == 'Query: {question}\n{{"json": [1]}}\nA: {answer_a}\nB: {answer_b}\nAbout {question}.'
    missing = _error(tmp_path, prompt={"user": text, "fields": {**fields, "{$z}": "question"},
                                       "vars": {"{$extra}": ""}})
    assert missing.path == "judges[0].prompt.fields.{$z}" and "not in the template's text" in missing.problem


def test_prompt_parts_take_text_or_a_file_and_name(tmp_path):
    (tmp_path / "cfg.yaml").write_text("prompt_template: 'Q {question} A {answer_a} B {answer_b}'\nother: [1]\n")
    judge = _load(tmp_path, prompt={"system": {"text": "Be fair."},
                                    "user": {"file": "cfg.yaml", "name": "prompt_template"}}).judges[0]
    assert (judge.prompt.system, judge.prompt.user) == ("Be fair.", "Q {question} A {answer_a} B {answer_b}")
    assert _error(tmp_path, prompt={"user": {"file": "cfg.yaml", "name": "other"}}).path == "judges[0].prompt.user.name"
    assert _error(tmp_path, prompt={"user": {"file": "cfg.yaml", "text": "x"}}).path == "judges[0].prompt.user"
    assert "did you mean" in _error(tmp_path, prompt={"user": {"file": "cfg.yaml", "name": "prompt_templat"}}).problem


def test_an_unknown_field_names_a_tool_only_in_that_tools_file(tmp_path):
    inline = _error(tmp_path, protocol="pointwise", prompt={"user": "{rubric} {answer}"})
    assert "promptfoo" not in inline.problem and "vars: {rubric:" in inline.problem
    assert "fields: {rubric:" in inline.problem
    tool = _error(tmp_path, protocol="pointwise", prompt={"file": str(PROMPTFOO)},
                  verdict={"pattern": r'"score"\s*:\s*([0-9.]+)', "scale": [0, 1]})
    assert "promptfoo's {{ rubric }}" in tool.problem
    (tmp_path / "more.jsonl").write_text(json.dumps({"name": "x", "prompt_template": "{answer_a} {answer_b} "
                                                     "{answer_more}"}) + "\n")
    assert "JudgeLM" not in _error(tmp_path, prompt={"file": "more.jsonl"}).problem


def test_pointwise_labels_map_to_scores_and_pairwise_ones_to_slots():
    graded = VerdictSpec(pattern=r"GRADE: ([CPI])", labels={"C": 1, "P": 0.5, "I": 0}, scale=(0, 1))
    spec = judges.judge_spec(name="g", backend="simulated", protocol="pointwise", verdict=graded,
                            prompt=manifest.PromptSpec(user="{question} {answer}"))
    judging = Judging.of(spec)
    assert judging.verdict.values == {"C": 1.0, "P": 0.5, "I": 0.0} and judging.verdict.labels == {}
    assert [judging.read_score(r) for r in ("x GRADE: C", "GRADE: P", "GRADE: I", "GRADE: X")] == [1.0, 0.5, 0.0, None]
    with pytest.raises(TemplateError) as info:
        check_verdict(VerdictSpec(pattern="(.)", labels={"A": "A"}, scale=(0, 1)), "pointwise")
    assert info.value.field == "verdict.labels.A"
    with pytest.raises(TemplateError) as info:
        check_verdict(VerdictSpec(pattern="(.)", labels={"A": "A", "B": 1}), "pairwise")
    assert info.value.field == "verdict.labels.B"
    arena = VerdictSpec(pattern=r"\[\[([AB<>=]+)\]\]",
                        labels={"A>>B": "A", "A>B": "A", "A=B": "tie", "B>A": "B", "B>>A": "B"})
    read = slot_reader(arena)
    assert [read(f"verdict: [[{x}]]") for x in ("A>>B", "A>B", "A=B", "B>A", "B>>A", "A>>>B")] == \
        ["A", "A", "tie", "B", "B", "invalid"]


def _item():
    from babelrun.core.items import Item

    return Item(item_id="0" * 20, kind="text", lang="en", ref_id="r", prompt="Q?", reference="REF", perturbed="PERT",
                perturbation="truncate", severity=0.3, ref_len=3, pert_len=4)


def test_fields_map_the_turns_of_a_two_turn_item_in_jinja2():
    from babelrun.core.items import Item

    text = ("{% for q, a, b in [(first_q, first_a, first_b), (last_q, last_a, last_b)] %}"
            "User: {{ q }}\nA: {{ a }}\nB: {{ b }}\n{% endfor %}")
    fields = {"first_q": "question_1", "first_a": "answer_a_1", "first_b": "answer_b_1",
              "last_q": "question_2", "last_a": "answer_a_2", "last_b": "answer_b_2"}
    spec = judges.judge_spec(name="t", backend="simulated", verdict=VerdictSpec(pattern=r"\[\[([AB])\]\]"),
                            prompt=manifest.PromptSpec(user=text, fields=fields, syntax="jinja2"))
    item = Item(item_id="1" * 20, kind="text", lang="en", ref_id="r", prompt="Why?", reference="REF",
                perturbed="PERT", perturbation="truncate", severity=0.3, ref_len=3, pert_len=4,
                turns=(("Hi?", "ref hi", "pert hi"),))
    content = Judging.of(spec).render(item, "pert_first")[-1]["content"]
    assert content == "User: Hi?\nA: pert hi\nB: ref hi\nUser: Why?\nA: PERT\nB: REF\n"


def test_syntax_says_which_where_the_detection_would_guess_wrong(tmp_path):
    text = "Literal {{ braces }} stay.\nA: {answer_a}\nB: {answer_b}"
    kept = _load(tmp_path, prompt={"user": text, "syntax": "format"}).judges[0]
    assert Judging.of(kept).render(_item(), "ref_first")[-1]["content"] == "Literal { braces } stay.\nA: REF\nB: PERT"
    wrong = _error(tmp_path, prompt={"user": "{{ answer_a }} {{ answer_b }} {% if x %}{% endif %}", "syntax": "jinja2"})
    assert "unknown field {x}" in wrong.problem


def test_an_entry_whose_prompt_is_a_role_content_list(tmp_path):
    """OpenAI evals' model-graded specs may give ``prompt`` as chat messages (its
    ``OpenAICreateChatPrompt``); Phoenix's configs give ``messages``."""
    (tmp_path / "graded.yaml").write_text(
        "mine:\n  prompt:\n    - role: system\n      content: You grade answers.\n"
        "    - role: user\n      content: \"Q {input}\\nA {completion}\\nY or N?\"\n  choice_strings: YN\n")
    judge = _load(tmp_path, protocol="pointwise", prompt={"file": "graded.yaml", "fields": {"completion": "answer"}},
                  verdict={"pattern": r"\b([YN])\b", "labels": {"Y": 1, "N": 0}, "scale": [0, 1]}).judges[0]
    assert (judge.prompt.system, judge.prompt.user) == ("You grade answers.", "Q {input}\nA {completion}\nY or N?")
    assert judge.verdict.values == {"Y": 1.0, "N": 0.0} and judge.verdict.labels == {}
    (tmp_path / "three.yaml").write_text("x:\n  messages:\n    - {role: system, content: a}\n"
                                         "    - {role: user, content: b}\n    - {role: assistant, content: c}\n")
    assert "one system and one" in _error(tmp_path, prompt={"file": "three.yaml"}).problem
