"""Reply language (score/replylang.py): loopback judges (a real aiohttp server on 127.0.0.1
speaking the OpenAI chat API) that explain their verdict before ``[[A]]`` — one always in
English, one in the item's language — on the bundled corpus's Hindi and Swahili items; and
the classification of short, verdict-only and mixed replies."""

from __future__ import annotations

import json

from babelrun.score import replylang
from helpers import LoopbackServer, quiet_audit, write_manifest

HINDI = ("पहला उत्तर अधिक पूर्ण है और प्रश्न के सभी तथ्यों को सही ढंग से बताता है। "
         "दूसरा उत्तर अधूरा है, इसलिए पहला बेहतर है।")
SWAHILI = ("Jibu la kwanza ni kamili zaidi na linaeleza ukweli wote wa swali kwa usahihi. "
           "Jibu la pili halijakamilika, kwa hiyo la kwanza ni bora zaidi.")
ENGLISH = ("The first answer is more complete and states every fact the question asks for. "
           "The second one stops early, so the first is better.")


class _Explainer(LoopbackServer):
    """Names the longer answer, after an explanation in English or in the item's language
    (told from the question's script: Devanagari is the Hindi item's)."""

    def __init__(self, own_language: bool | None):
        self.own_language = own_language  # None: in the item's language when it names A, else in English

    def add_routes(self, app) -> None:
        from aiohttp import web

        async def chat(request):
            body = await request.json()
            text = body["messages"][-1]["content"]
            a = text.split("A<<<", 1)[1].split(">>>", 1)[0]
            b = text.split("B<<<", 1)[1].split(">>>", 1)[0]
            hindi = any("\u0900" <= ch <= "\u097f" for ch in text.split("A<<<", 1)[0])
            slot = "A" if len(a) >= len(b) else "B"
            own = self.own_language if self.own_language is not None else slot == "A"
            content = f"{(HINDI if hindi else SWAHILI) if own else ENGLISH}\n\n[[{slot}]]"
            return web.json_response({
                "id": "x", "object": "chat.completion", "model": "explainer",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                             "finish_reason": "stop"}], "usage": {"prompt_tokens": 10, "completion_tokens": 40}})

        app.router.add_post("/v1/chat/completions", chat)


def test_a_judge_reasoning_in_english_is_caught_and_one_in_the_items_language_is_not(tmp_path):
    template = {"user": "Which answer is better? Explain, then end with [[A]], [[B]] or [[C]] for a tie.\n"
                        "Q<<<{question}>>>\nA<<<{answer_a}>>>\nB<<<{answer_b}>>>"}
    verdict = {"pattern": r"\[\[(A|B|C)\]\]", "labels": {"A": "A", "B": "B", "C": "tie"}}
    with _Explainer(False) as english, _Explainer(True) as native, _Explainer(None) as both:
        judges = [{"name": name, "backend": "openai", "model": "m", "endpoint": server.url + "/v1",
                   "retries": 0, "prompt": template, "verdict": verdict}
                  for name, server in (("english", english), ("native", native), ("both", both))]
        path = write_manifest(tmp_path, judges, corpus={"languages": ["hi", "sw"], "references_per_language": 10})
        assert quiet_audit(path).exit_code == 0
    doc = json.loads((tmp_path / "run" / "cards.json").read_text())
    by = {jc["judge"]: {lc["lang"]: lc["card"] for lc in jc["languages"]} for jc in doc["judges"]}
    for lang in ("hi", "sw"):
        e, n = by["english"][lang]["reply_language"], by["native"][lang]["reply_language"]
        assert e["replies"] == by["english"][lang]["presentations"] > 0  # every reply holds prose
        assert e["not_in_item_language"]["value"] >= 0.9, (lang, e)
        assert n["not_in_item_language"]["value"] <= 0.1, (lang, n)
        assert e["identifier"] == "py3langid"
    # one group only: no split of accuracy; two large groups: split (the same verdicts, by slot)
    assert by["english"]["hi"]["reply_language"]["accuracy_other"] is None
    split = next(jc for jc in doc["judges"] if jc["judge"] == "both")["overall"]["reply_language"]
    assert split["accuracy_in_language"]["n"] + split["accuracy_other"]["n"] == split["replies"]
    assert 0.3 <= split["not_in_item_language"]["value"] <= 0.7
    md = (tmp_path / "run" / "report.md").read_text()
    assert "not in the item's language" in md and "| english | hi" in md


def test_short_verdict_only_and_mixed_replies():
    assert replylang.classify("[[A]]", "hi") == -1  # no prose: not counted
    assert replylang.classify("Answer: **B**", "sw") == -1
    assert replylang.classify("A is better.", "en") == -1  # too short to tell
    assert replylang.classify(ENGLISH + " [[A]]", "hi") == 1
    assert replylang.classify(HINDI + " [[A]]", "hi") == 0
    assert replylang.classify(SWAHILI, "sw") == 0 and replylang.classify(SWAHILI, "hi") == 1
    # mixed: what most of the prose is written in
    assert replylang.classify(HINDI + " Overall, A wins.", "hi") == 0
    assert replylang.classify(ENGLISH + " उत्तर अच्छा है।", "hi") == 1
    assert replylang.classify(ENGLISH, "xx-unknown") == -1  # a language the identifier does not know


def test_accuracy_is_split_only_where_both_groups_are_large():
    import numpy as np

    cls = np.array([0] * 30 + [1] * 25 + [-1] * 5)
    correct = np.array([True] * 27 + [False] * 3 + [True] * 10 + [False] * 15 + [True] * 5)
    s = replylang.summary(cls, correct)
    assert s.replies == 55 and abs(s.not_in_item_language.value - 25 / 55) < 1e-3
    assert s.accuracy_in_language.value == 0.9 and s.accuracy_other.value == 0.4
    small = replylang.summary(cls[:40], correct[:40])  # 10 replies not in the language: too few
    assert small.accuracy_in_language is None and small.accuracy_other is None
    assert replylang.summary(np.array([-1, -1]), np.array([True, False])) is None
