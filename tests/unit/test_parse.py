import pytest

from babelrun.core.records import verdict_of as _verdict
from babelrun.judges import judge_spec
from babelrun.judges.prompt import PAIRWISE, parse
from helpers import messages

TABLE = [
    ("A", "A"), ("B", "B"), ("tie", "tie"), ("a", "A"), ("b", "B"), ("TIE", "tie"), ("Tie", "tie"),
    ("  A\n", "A"), ("A.", "A"), ("**B**", "B"), ("`A`", "A"), ('"B"', "B"), ("(A)", "A"),
    ("[B]", "B"), ("Answer: A", "A"), ("answer: b", "B"), ("Answer A", "A"), ("Verdict: tie", "tie"),
    ("Final answer: B", "B"), ("Winner - A", "A"), ("Ａ", "A"), ("Ｂ", "B"), ("ｔｉｅ", "tie"),
    # Everything else is invalid: never guessed.
    ("", "invalid"), ("AB", "invalid"), ("A or B", "invalid"), ("I prefer A", "invalid"),
    ("A because it is longer", "invalid"), ("Both are equally good", "invalid"), ("draw", "invalid"),
    ("equal", "invalid"), ("C", "invalid"), ("1", "invalid"),
    ("答案是A", "invalid"), ("平局", "invalid"), ("ए", "invalid"), ("بي", "invalid"),
    ("Ответ: А", "invalid"),  # Cyrillic А, not Latin A
    ("Α", "invalid"),  # Greek capital alpha
    ("उत्तर: B", "invalid"), ("Jibu: A", "invalid"), ("回答：B", "invalid"),
]


@pytest.mark.parametrize(("reply", "slot"), TABLE)
def test_parser_table(reply, slot):
    assert parse(reply) == slot


def test_slot_maps_to_verdict_by_order():
    assert _verdict("A", "ref_first") == "reference"
    assert _verdict("B", "ref_first") == "perturbed"
    assert _verdict("A", "pert_first") == "perturbed"
    assert _verdict("B", "pert_first") == "reference"
    assert _verdict("invalid", "pert_first") == "invalid"


def test_render_treats_corpus_text_as_data():
    shown = messages("What is {prompt}?", "{answer_b}", "x")
    assert "What is {prompt}?" in shown[1]["content"]
    assert "[Answer A]\n{answer_b}\n[End of Answer A]" in shown[1]["content"]


def test_the_prompt_in_twelve_languages():
    from babelrun.corpus import bundled
    from babelrun.testing import choose

    langs = {r.lang for r in bundled.read(None)}
    assert langs <= {"en"} | set(PAIRWISE.translations)
    for lang in sorted(langs):
        system, user = messages("Q", "first answer", "second answer", lang)
        assert (system["content"], user["content"].split("\n")[0]) != ("", "")
        text = user["content"]
        for line in ("[Answer A]", "[End of Answer A]", "[Answer B]", "[End of Answer B]"):
            assert f"\n{line}\n" in f"\n{text}\n", (lang, line)
        assert "first answer" in text and "second answer" in text and "tie" in text
        assert choose(text) in ("A", "B")  # the loopback judge still finds the answers
        if lang != "en":
            assert system["content"] != PAIRWISE.system  # really translated
    # A language without a translation falls back to English.
    assert messages("Q", "a", "b", "cy")[0]["content"] == PAIRWISE.system
    assert messages("Q", "a", "b", "zh-Hans")[0]["content"] == PAIRWISE.translations["zh"][0]


def test_prompt_language_is_part_of_the_judge_id():
    from babelrun.judges import judge_id

    english = judge_spec(name="j", backend="openai", model="m")
    native = judge_spec(name="j", backend="openai", model="m", prompt_language="item")
    assert judge_id(english) != judge_id(native)
