"""Judge prompt templates and the strict verdict parser.

A template has a name and a version; both go into ``judge_id``, so editing a template's
wording (bump its version) never mixes its verdicts with the old ones.

Accepted replies (the whole reply, nothing else): ``A``, ``B`` or ``tie``, case-insensitive,
after Unicode NFKC normalisation (full-width ``Ａ`` is ``A``) and trimming of whitespace,
surrounding quotes, brackets, Markdown emphasis and trailing punctuation, with an optional
English prefix ``Answer:``, ``Verdict:``, ``Final answer:``, ``Winner:``, ``Better:`` or
``Answer`` / ``Response`` / ``Assistant`` before the letter (``Answer A``). Anything else, in
any language or script, is ``invalid``: it is kept verbatim and never guessed.
"""

from __future__ import annotations

import math
import re
import unicodedata
from pathlib import Path

import msgspec

from ..core.records import Slot


class Template(msgspec.Struct, frozen=True):
    name: str
    version: int
    system: str
    user: str
    # The same prompt written in other languages (BCP-47 language -> (system, user)); used
    # with a judge's ``prompt_language: item``. Editing any of them means a new version.
    translations: dict[str, tuple[str, str]] = {}
    # A user's template: its syntax ("format", or "jinja2": rendered in judges/jinja.py's
    # sandbox), its own names for babelrun's fields, and (Jinja2) the vars' text of its names.
    syntax: str = "format"
    fields: dict[str, str] = {}
    vars: dict[str, str] = {}

    def texts(self, lang: str | None) -> tuple[str, str]:
        """(system, user) in ``lang``'s base language if written, else in English."""
        if lang:
            base = lang.split("-")[0]
            if base in self.translations:
                return self.translations[base]
        return self.system, self.user


PAIRWISE = Template(
    name="pairwise",
    version=1,
    system=(
        "You are an impartial judge. You compare two answers to the same question and decide "
        "which one is better: more correct, complete and coherent. Do not let the order of the "
        "answers or their length influence you."
    ),
    user=(
        "[Question]\n{prompt}\n\n"
        "[Answer A]\n{answer_a}\n[End of Answer A]\n\n"
        "[Answer B]\n{answer_b}\n[End of Answer B]\n\n"
        "Which answer is better? Reply with exactly one word: A, B, or tie."
    ),
    translations={
        lang: (texts["system"], texts["user"])
        for lang, texts in msgspec.json.decode(
            (Path(__file__).parent / "pairwise_prompts.json").read_bytes()
        ).items()
        if lang != "en"
    },
)

# A prompt variant (a mitigation to audit): the same task, told plainly to disregard length,
# in every language the base prompt is written in (length_neutral.json: the added sentence).
_LENGTH_NEUTRAL = msgspec.json.decode((Path(__file__).parent / "length_neutral.json").read_bytes())
PAIRWISE_LENGTH_NEUTRAL = Template(
    name="pairwise_length_neutral",
    version=1,
    system=f"{PAIRWISE.system} {_LENGTH_NEUTRAL['en']}",
    user=PAIRWISE.user,
    translations={lang: (f"{system}{'' if lang in ('zh', 'ja') else ' '}{_LENGTH_NEUTRAL[lang]}", user)
                  for lang, (system, user) in PAIRWISE.translations.items()},  # no space between CJK sentences
)

# The built-in pointwise prompt (``protocol: pointwise``): one answer, a 1–10 rating after a
# short explanation, read by the default pointwise verdict (``Rating: [[n]]``; protocol.py).
POINTWISE = Template(
    name="pointwise",
    version=1,
    system=(
        "You are an impartial judge. You rate the quality of one answer to a question: how "
        "correct, complete and coherent it is. Do not let the answer's length influence you."
    ),
    user=(
        "[Question]\n{prompt}\n\n"
        "[Answer]\n{answer}\n[End of Answer]\n\n"
        "Rate the answer on a scale of 1 to 10. Explain briefly, then give your rating in "
        "exactly this format: Rating: [[n]]"
    ),
)

TEMPLATES: dict[str, Template] = {t.name: t for t in (PAIRWISE, PAIRWISE_LENGTH_NEUTRAL, POINTWISE)}


_PREFIX = re.compile(
    r"^(?:final\s+answer|answer|verdict|winner|better(?:\s+answer)?|response|assistant)\s*[:：\-]?\s*",
    re.IGNORECASE,
)
_TRIM = " \t\r\n\"'`*_.!,;:()[]{}<>«»“”‘’「」"


def parse(reply: str) -> Slot:
    text = unicodedata.normalize("NFKC", reply).strip(_TRIM)
    text = _PREFIX.sub("", text, count=1).strip(_TRIM)
    lowered = text.lower()
    if lowered == "a":
        return "A"
    if lowered == "b":
        return "B"
    if lowered == "tie":
        return "tie"
    return "invalid"


def slot_probabilities(top: list[tuple[str, float]],
                       labels: dict[str, str] | None = None) -> tuple[float, float, float] | None:
    """P(A), P(B), P(tie) from the first generated token's top log-probabilities.

    A token counts for a slot when, NFKC-normalised, stripped of spaces and punctuation and
    lower-cased, it is ``a``, ``b`` or ``tie`` (the parser's own forms); tokens of one slot
    add up. A log-probability is clamped to <= 0 (a provider's ``1000`` is ``0``, probability 1;
    NaN counts for nothing). The three are renormalised over what they hold. None when no top
    token names a slot: that reply is invalid, like an off-format generated one.

    ``labels``: the user's own label tokens (``{m: A, M: B}``, AlpacaEval 2.0's weighted
    annotator): a token counts for a slot when, stripped of surrounding whitespace, it is
    exactly one of them (case matters: ``m`` and ``M`` are different answers); nothing else.
    """
    mass = {"A": 0.0, "B": 0.0, "tie": 0.0}
    for token, logprob in top:
        slot = parse(token) if labels is None else labels.get(token.strip(), "invalid")
        if slot != "invalid" and logprob == logprob:  # a NaN counts for nothing
            mass[slot] += math.exp(min(float(logprob), 0.0))  # a log-probability is <= 0: 1000 is clamped
    total = sum(mass.values())
    if total <= 0:
        return None
    return (mass["A"] / total, mass["B"] / total, mass["tie"] / total)
