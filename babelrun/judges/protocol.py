"""A judge's protocol as the user declares it: their template, their verdict format,
pairwise or pointwise.

``Judging.of(spec)`` turns a judge spec into the three things the engine needs: the keys of
an item (both slot orders, or both answers), the request for a key (the template rendered
with the item), and the reading of a reply (a slot, or a score on the verdict's scale).

Templates are Python ``str.format`` text. Pairwise fields: ``{question}``, ``{answer_a}``,
``{answer_b}``; pointwise: ``{question}``, ``{answer}``; both: ``{reference}`` (the corpus's
separate ``reference_answer``, never the answer under judgement) and ``{language}`` (the
item's language name). Aliases: ``{prompt}`` (the built-in templates' name for the question)
MT-Bench's ``{ref_answer_1}``, alpaca_eval's ``{instruction}``/``{output_1}``/``{output_2}``
(pointwise ``{output}``) and inspect_ai's ``{criterion}`` (the reference answer). Corpus text is
substituted as data: ``str.format`` does
not re-read substituted values, and field names must be plain names (no ``{a.b}`` or
``{a[0]}``), so a template cannot reach into objects. A field takes no format spec or
conversion (``{answer_a:>299999999}``, ``{answer_b:{foo}}``, ``{answer_a!r}`` are refused at
validate): the rendered prompt is the template's text and the item's, nothing larger.

Verdicts: the built-in pairwise templates keep the strict parser (``prompt.parse``). A
``verdict:`` pattern is a regex (run by ``safe_regex``: a search past its time reads
``invalid``, ``pattern_timeout``) whose first group is the label, taken from the first or the
last match; pairwise labels map through ``labels``, pointwise ones must be a number inside
``scale``. Anything else is ``invalid`` with the raw reply kept: never guessed.
"""

from __future__ import annotations

import functools
import math
import re
import string
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, cast

import msgspec

from ..core.items import Item
from ..core.records import ANSWERS, ORDERS, Answer, Order
from ..spec import JudgeSpec, VerdictSpec
from . import safe_regex
from .base import JudgeReply, JudgeRequest
from .fields import (
    ALIASES,
    FIELDS,
    MULTI_TURN,
    REQUIRED,
    TOOL_FIELDS,
    TemplateError,
    aliases_of,
    builtin,
    check_source_fields,
    check_template,
    fields_of,
    multi_turn,
    plain_format,
    render_jinja,
    template_of,
)
from .labels import check_slot_labels, scored_labels, slot_labels
from .prompt import parse
from .registry import options_of

# Replies that reason first need room; the built-in pairwise prompt asks for one word.
ONE_WORD_TOKENS = 8
REASONING_TOKENS = 1024
# Thinking budgets (tokens) by reasoning_effort, for the backends that take a budget
# (anthropic's extended thinking, gemini's thinkingBudget); 1024 is Anthropic's minimum.
THINKING_BUDGET = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 24576}
DEFAULT_POINTWISE_VERDICT = VerdictSpec(pattern=r"\[\[\s*(\d+(?:\.\d+)?)\s*\]\]", scale=(1.0, 10.0),
                                        reply="Rating: [[{label}]]")


def verdict_of(spec: JudgeSpec) -> VerdictSpec | None:
    """The declared verdict (pointwise labels as scores, ``labels.scored_labels``); the
    pointwise default where none is; None: the strict parser."""
    if spec.verdict is not None:
        return scored_labels(spec.verdict, spec.protocol)
    return DEFAULT_POINTWISE_VERDICT if spec.protocol == "pointwise" else None


def check_verdict(verdict: VerdictSpec, protocol: str) -> safe_regex.Pattern[str]:
    if verdict.scores is not None or not verdict.pattern:  # two scores, or a soft judge's label tokens
        return check_other_verdict(verdict, protocol)
    try:
        pattern = safe_regex.compile(verdict.pattern)
    except safe_regex.error as e:
        raise TemplateError("verdict.pattern", f"not a valid regular expression: {e}") from None
    if pattern.groups < 1:
        raise TemplateError("verdict.pattern", "needs a group: (…) around the label")
    if protocol == "pointwise":
        if verdict.scale is None:
            raise TemplateError("verdict.scale", "a pointwise verdict needs scale: [lo, hi]")
        lo, hi = verdict.scale
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise TemplateError("verdict.scale", "needs two finite numbers, lo < hi")
        if verdict.labels:
            label = next(iter(verdict.labels))
            raise TemplateError(f"verdict.labels.{label}", "a pointwise label maps to a score ({C: 1, I: 0}); "
                                                           "A, B and tie are pairwise verdicts")
        for label, value in verdict.values.items():
            if not lo <= value <= hi:
                raise TemplateError(f"verdict.values.{label}", f"{value:g} is outside scale [{lo:g}, {hi:g}]")
    else:
        if verdict.scale is not None or verdict.values:
            raise TemplateError("verdict.scale" if verdict.scale is not None else "verdict.values",
                                "scale and values are for protocol: pointwise")
        check_slot_labels(verdict)
    if verdict.reply is not None:
        try:
            fields = fields_of(verdict.reply)
        except ValueError as e:
            raise TemplateError("verdict.reply", str(e)) from None
        if fields != ["label"]:
            raise TemplateError("verdict.reply", "needs exactly one field, {label}")
    return pattern


_IDENTITY = {"A": "A", "B": "B", "tie": "tie"}


def check_other_verdict(verdict: VerdictSpec, protocol: str) -> safe_regex.Pattern[str]:
    """The verdicts without a label ``pattern``: ``scores`` (a pairwise reply giving each
    answer a score: JudgeLM's ``8 6``, FastChat's ``[[8, 6]]``), or ``labels`` alone (the label
    tokens a soft judge reads the probabilities of: AlpacaEval 2.0's ``{m: A, M: B}``; whether
    the judge is soft is the manifest's check). Returns the pattern the reply is read with."""
    if verdict.scores is None:
        if not verdict.labels:
            raise TemplateError("verdict.pattern", "needs a pattern (a regex whose first group is the label), "
                                                   "scores (two groups: A's and B's scores), or, for a soft "
                                                   "judge, labels alone")
        if protocol != "pairwise" or verdict.scale is not None or verdict.values:
            raise TemplateError("verdict.labels", "label tokens alone are for a soft pairwise judge")
        check_slot_labels(verdict)
        return safe_regex.compile("")
    if protocol != "pairwise":
        raise TemplateError("verdict.scores", "two scores are a pairwise verdict; a pointwise one reads one "
                                              "number: pattern and scale")
    for name, set_ in (("pattern", bool(verdict.pattern)), ("labels", bool(verdict.labels)),
                       ("scale", verdict.scale is not None), ("values", bool(verdict.values))):
        if set_:
            raise TemplateError(f"verdict.{name}", "scores reads two numbers and compares them: "
                                                   f"{name} does not apply (drop it)")
    try:
        pattern = safe_regex.compile(verdict.scores)
    except safe_regex.error as e:
        raise TemplateError("verdict.scores", f"not a valid regular expression: {e}") from None
    if pattern.groups < 2:
        raise TemplateError("verdict.scores", "needs two groups: (A's score) … (B's score)")
    return pattern


def two_score_reader(verdict: VerdictSpec) -> Callable[[str], str]:
    """reply -> A, B or tie by comparing the two captured scores (exactly equal: tie), or
    invalid where the pattern does not match or a group is not a plain decimal. Symmetric by
    construction: swapping the two scores swaps A and B, never favours a slot."""
    assert verdict.scores is not None
    pattern, match = safe_regex.compile(verdict.scores), verdict.match

    def read(raw: str) -> str:
        found = safe_regex.search(pattern, raw, "first" if match == "first" else "last")
        if found is None:
            return "invalid"
        a, b = found.group(1), found.group(2)
        if not (isinstance(a, str) and isinstance(b, str) and _NUMBER.fullmatch(a.strip())
                and _NUMBER.fullmatch(b.strip())):
            return "invalid"
        x, y = float(a), float(b)
        return "tie" if x == y else "A" if x > y else "B"

    return read


def soft_labels(spec: JudgeSpec) -> dict[str, str] | None:
    """The label tokens a soft judge reads (``verdict: {labels: …}``), or None: the built-in
    A / B / tie tokens. What a backend passes to ``prompt.slot_probabilities``."""
    if spec.soft and spec.verdict is not None and spec.verdict.labels and not spec.verdict.pattern:
        return slot_labels(spec.verdict)
    return None


def _captured(pattern: safe_regex.Pattern[str], match: str, raw: str) -> str | None:
    """The first group of the first or last match; ``safe_regex.PatternTimeout`` when the
    search runs past its time (the engine records the reply invalid, ``pattern_timeout``)."""
    found = safe_regex.search(pattern, raw, "first" if match == "first" else "last")
    label = None if found is None else found.group(1)
    return label.strip() if isinstance(label, str) else None


_R = TypeVar("_R")
SHORT_REPLY = 64  # characters: a reply this short is a bare verdict ("[[A]]", "Rating: 7")
REMEMBERED = 1024  # distinct short replies remembered per reader


def _remembering(read: Callable[[str], _R]) -> Callable[[str], _R]:
    """``read`` with its readings of short replies remembered. A judge answers "[[A]]" or
    "7" thousands of times, and each regex search under its timeout costs ~1.3 µs (the user
    template's path through the engine read 0.94–0.95 of the built-in one). Longer replies
    are read every time, so memory stays bounded (``REMEMBERED`` × ``SHORT_REPLY``); a
    search that times out raises, and is not remembered. The reading is a function of the
    reply's text alone, as every verdict rule is (gold-blind)."""
    remembered = functools.lru_cache(maxsize=REMEMBERED)(read)

    def reading(raw: str) -> _R:
        return remembered(raw) if len(raw) <= SHORT_REPLY else read(raw)

    return reading


def slot_reader(verdict: VerdictSpec | None) -> Callable[[str], str]:
    """reply -> A, B, tie or invalid."""
    if verdict is None:
        return parse
    if verdict.scores is not None:
        return two_score_reader(verdict)
    pattern, labels, match = safe_regex.compile(verdict.pattern), slot_labels(verdict) or _IDENTITY, verdict.match

    def read(raw: str) -> str:
        label = _captured(pattern, match, raw)
        return labels.get(label, "invalid") if label is not None else "invalid"

    return _remembering(read)


def score_reader(verdict: VerdictSpec) -> Callable[[str], float | None]:
    """reply -> a score inside the scale, or None (invalid)."""
    assert verdict.scale is not None  # a pointwise verdict has one (check_verdict rejects it otherwise)
    pattern, (lo, hi), match, named = (safe_regex.compile(verdict.pattern), verdict.scale, verdict.match,
                                       verdict.values)

    def read(raw: str) -> float | None:
        label = _captured(pattern, match, raw)
        if named:  # graded labels (inspect_ai's C / P / I): their declared values, nothing else
            return named.get(label) if label is not None else None
        if label is None or not _NUMBER.fullmatch(label):  # plain decimals only: no 1_0, nan, 1e1
            return None
        value = float(label)
        return value if lo <= value <= hi else None

    return _remembering(read)


_REGEX_ESCAPE = re.compile(r"\\(.)")
_NUMBER = re.compile(r"[+-]?(?:\d{1,12}(?:\.\d{0,12})?|\.\d{1,12})")


def reply_format(verdict: VerdictSpec) -> str | None:
    """A ``{label}`` format the pattern reads back: ``verdict.reply``, else the pattern with
    its first group replaced and escapes undone, when that is plain text (``\\[\\[(\\d+)\\]\\]``
    -> ``[[{label}]]``); None when the pattern is not that simple."""
    if verdict.reply is not None:
        return verdict.reply
    depth, start = 0, None
    text = verdict.pattern
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "(":
            if depth == 0 and start is None:
                start = i
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0 and start is not None:
                head, tail = text[:start], text[i + 1:]
                if re.search(r"(?<!\\)[][()|*+?{}^$.]", head + tail):
                    return None
                return f"{_unescape(head)}{{label}}{_unescape(tail)}"
        i += 1
    return None


def _unescape(text: str) -> str:
    """Regex escapes undone, braces doubled for ``str.format``."""
    return _REGEX_ESCAPE.sub(r"\1", text).replace("{", "{{").replace("}", "}}")


# ---- one judge's protocol -----------------------------------------------------------------


class Judging:
    """A judge's protocol: its keys per item, the request for a key, and the reading of a
    reply. ``judges.build`` attaches one to every judge (``judge.protocol``); callers that
    need requests without a backend (``show``, validate's estimate, pin's canaries) build it
    with ``Judging.of(spec)``. Either way there is one way to render a request."""

    def __init__(self, spec: JudgeSpec):
        self.kind = spec.protocol
        self.keys = ANSWERS if spec.protocol == "pointwise" else ORDERS
        self.template = template_of(spec)
        self.fields = check_template(self.template, spec.protocol)
        self.verdict = verdict_of(spec)
        if self.verdict is not None:
            check_verdict(self.verdict, spec.protocol)
            if not spec.soft and not self.verdict.pattern and self.verdict.scores is None:
                raise TemplateError("verdict.pattern", "labels alone name a soft judge's tokens (soft: true); "
                                                       "a generated reply needs a pattern to find its label")
        self.read_slot = slot_reader(self.verdict) if spec.protocol == "pairwise" else None
        self.read_score: Callable[[str], float | None] | None = None
        if spec.protocol == "pointwise":
            assert self.verdict is not None  # verdict_of gives every pointwise judge one (the default)
            self.read_score = score_reader(self.verdict)
        self.localized = spec.prompt_language == "item"
        self.soft = spec.soft
        self._aliases = aliases_of(self.template)
        self._jinja = self.template.syntax == "jinja2"
        self.seed = spec.seed  # a request's seed is derived from it (``core.keys.sample_seed``)
        # Precomputed per template, so that a render does only the per-item work: which
        # placeholders each text fills (aliases resolved), and the texts by language with
        # a placeholder-free system text formatted once.
        self._texts: dict[str | None, tuple[str | None, _Names, str, _Names]] = {}

    @classmethod
    def of(cls, spec: JudgeSpec) -> Judging:
        return cls(spec)

    def request(self, item: Item, key: str, sample: int = 0) -> JudgeRequest:
        # ``key`` is one of ``self.keys`` (a slot order, or a pointwise answer); callers pass
        # it as ``str`` because a log record's ``order`` is one. Not checked here, as before.
        # ``sample``: which of the judge's ``samples`` asks of this presentation it is.
        seed = None
        if self.seed is not None:  # core.keys loads numpy and pyarrow: only for a judge that sets a seed
            from ..core.keys import sample_seed

            seed = sample_seed(self.seed, item.item_id, key, sample)
        return JudgeRequest(item, cast("Order | Answer", key), self.render(item, key), sample, seed)

    def render(self, item: Item, key: str) -> list[dict[str, str]]:
        """Chat messages for one key. Plain ``str.format_map`` over the template only: corpus
        text is substituted as data, never re-read as a template."""
        values = {"question": item.prompt}
        fields = self.fields
        if "reference" in fields:
            if not item.reference_answer:
                raise TemplateError("prompt", f"the template uses {{reference}} but item {item.item_id} "
                                              "has no reference_answer")
            values["reference"] = item.reference_answer
        if "language" in fields:
            from ..core import languages

            values["language"] = languages.name(item.lang)
        if self.kind == "pointwise":
            values["answer"] = item.reference if key == "reference" else item.perturbed
        elif key == "ref_first":  # pairwise: key is a slot order (JudgeRequest.answer_a/answer_b)
            values["answer_a"], values["answer_b"] = item.reference, item.perturbed
        else:
            values["answer_a"], values["answer_b"] = item.perturbed, item.reference
        if item.cue:  # a robustness probe: an injection names the cued answer's slot in this judge's syntax
            self._write_injection(values, key)
        if self.kind != "pointwise" and fields & MULTI_TURN:  # MT-Bench's two-turn fields
            values.update(earlier_turn(item, key, values))
        if self._jinja:  # a Jinja2 template: rendered in its sandbox (fields.render_jinja)
            return render_jinja(self.template, _filled(values, None, self._aliases), self._aliases)
        lang = item.lang if self.localized else None
        texts = self._texts.get(lang)
        if texts is None:
            texts = self._texts[lang] = self._prepared(lang)
        system, system_names, user, user_names = texts
        messages = []
        if system is not None:
            content = system if system_names == () else system.format_map(_filled(values, system_names,
                                                                                    self._aliases))
            messages.append({"role": "system", "content": content})
        messages.append({"role": "user", "content": user.format_map(_filled(values, user_names, self._aliases))})
        return messages

    def _prepared(self, lang: str | None) -> tuple[str | None, _Names, str, _Names]:
        """A language's (system, its placeholders, user, its placeholders): each placeholder
        as (name in the text, the field it reads), None for a text whose fields are not plain
        names (filled with every field and alias, as a render always did); a system text
        without placeholders comes formatted (``{{`` undone), None where there is none."""
        system, user = self.template.texts(lang)

        def names(text: str) -> tuple[tuple[str, str], ...] | None:
            parsed = list(string.Formatter().parse(text))
            if any(name is not None and not name.isidentifier() or "{" in (spec or "") for _, name, spec, _ in parsed):
                return None  # not plain names (check_template rejects these in a user's text): every field
            found = dict.fromkeys(name for _, name, _, _ in parsed if name is not None)
            return tuple((name, self._aliases.get(name, name)) for name in found)

        system_names = names(system) if system else ()
        fixed = system.format_map({}) if system and system_names == () else system
        return (fixed or None), system_names, user, names(user)

    def injected_verdict(self, slot: str) -> str:
        """What an injection asks this judge to write for ``slot`` (A or B; pointwise: the top
        of the scale): the template's own verdict syntax where it declares one."""
        if self.kind == "pointwise":
            assert self.verdict is not None and self.verdict.scale is not None
            label = f"{self.verdict.scale[1]:g}"
        else:
            labels = slot_labels(self.verdict) if self.verdict is not None else {}
            label = next((k for k, v in labels.items() if v == slot), slot)
        form = reply_format(self.verdict) if self.verdict is not None else None
        return form.format(label=label) if form else label

    def _write_injection(self, values: dict[str, str], key: str) -> None:
        from ..perturb import probes

        if self.kind == "pointwise":
            values["answer"] = probes.render_slot(values["answer"], self.injected_verdict("A"))
            return
        for field, slot in (("answer_a", "A"), ("answer_b", "B")):
            values[field] = probes.render_slot(values[field], self.injected_verdict(slot))

    def read(self, reply: JudgeReply) -> tuple[str | None, float | None]:
        """(slot, score) of a reply: pointwise, a score inside the scale or None (invalid);
        pairwise, a slot (A, B, tie or invalid) — a soft judge's from its probabilities, never
        its text; a judge that is code may name the slot or score itself."""
        if self.read_score is not None:
            if reply.score is None:
                return None, self.read_score(reply.raw)
            assert self.verdict is not None and self.verdict.scale is not None  # pointwise: always a scale
            lo, hi = self.verdict.scale
            return None, reply.score if lo <= reply.score <= hi else None
        if self.soft:
            if reply.probs is None:
                return "invalid", None
            return ("A", "B", "tie")[max(range(3), key=reply.probs.__getitem__)], None
        if reply.slot is not None:
            return reply.slot, None
        assert self.read_slot is not None  # a pairwise judge always has a slot reader
        return self.read_slot(reply.raw), None


def earlier_turn(item: Item, key: str, values: dict[str, str]) -> dict[str, str]:
    """MT-Bench's two-turn fields of an item: turn 1 from ``item.turns`` (its answers in the
    same slot order as the last turn's), turn 2 the item's own question and answers."""
    if len(item.turns) != 1:
        raise TemplateError("prompt", f"MT-Bench's multi-turn template needs one earlier turn; item {item.item_id} "
                                      f"has {len(item.turns)} (labelled pairs give them in a turns column)")
    question, ref, pert = item.turns[0]
    first, second = (ref, pert) if key == "ref_first" else (pert, ref)
    return {"question_1": question, "answer_a_1": first, "answer_b_1": second, "question_2": values["question"],
            "answer_a_2": values["answer_a"], "answer_b_2": values["answer_b"]}


# A text's placeholders as (name in the text, the field it reads); None: fill every field.
_Names = tuple[tuple[str, str], ...] | None


def _filled(values: dict[str, str], names: _Names, aliases: dict[str, str] = ALIASES) -> dict[str, str]:
    """The mapping a text is formatted with: its own placeholders only, or (``None``) every
    field under every alias."""
    if names is None:
        return {**values, **{alias: values[name] for alias, name in aliases.items() if name in values}}
    return {name: values[field] for name, field in names if field in values}


def identity(spec: JudgeSpec) -> dict[str, Any]:
    """What the protocol adds to ``judge_id``, only where set away from the defaults, so the
    ids of existing judges (built-in template, strict parser, pairwise) never change."""
    out: dict[str, Any] = {}
    if spec.protocol != "pairwise":
        out["protocol"] = spec.protocol
    if spec.verdict is not None:  # its fields set away from their defaults (a later field renames nothing)
        out["verdict"] = {k: msgspec.to_builtins(v) for k, v in msgspec.structs.asdict(spec.verdict).items()
                          if k == "pattern" or v != _VERDICT_DEFAULTS[k]}
    return out


_VERDICT_DEFAULTS = msgspec.structs.asdict(VerdictSpec(pattern=""))


def max_tokens(spec: JudgeSpec) -> int:
    """The judge's ``max_tokens``, or its default: one word for the built-in pairwise
    templates under the strict parser, room to reason everywhere else."""
    if spec.max_tokens is not None:
        return spec.max_tokens
    one_word = (builtin(spec) and spec.protocol == "pairwise" and spec.verdict is None
                and not options_of(spec).hidden_reasoning())  # hidden reasoning needs room
    return ONE_WORD_TOKENS if one_word else REASONING_TOKENS


class Judge(Protocol):
    """A judge under audit: a backend (``judge``, ``aclose``) and the protocol it carries,
    attached by ``judges.build`` (keys, requests, the reading of replies). A backend turns one
    request into one reply; it never parses verdicts and never retries."""

    spec: JudgeSpec
    judge_id: str
    protocol: Judging

    async def judge(self, request: JudgeRequest) -> JudgeReply: ...

    async def aclose(self) -> None: ...


__all__ = [
    "ALIASES", "builtin", "check_source_fields", "check_template", "check_verdict", "FIELDS", "fields_of",
    "identity", "Judge", "Judging", "max_tokens", "MULTI_TURN", "multi_turn", "plain_format", "reply_format",
    "REQUIRED", "TOOL_FIELDS", "template_of", "TemplateError",
]
