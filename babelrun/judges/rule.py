"""``backend: rule``: a deterministic judge with no model, for a cascade's cheap stage.

Each answer gets a score from the judge's ``rule`` (``spec.RuleSpec``): its length, whether a
regular expression matches it, whether it equals an expected string, whether it is valid
JSON, or a Python function the user registered. The higher score wins; scores within
``margin`` of each other (and a ``length`` ratio under ``min_ratio``) give ``tie``, which a
cascade escalates to its strong judge. So the card of the cascade shows how many calls the
triage saved and what it cost in accuracy against the strong judge alone.

A manifest never holds code: ``kind: python`` names a function that the user's own program
registered before the audit (``babelrun.judges.rule.register("mine", fn)``, where
``fn(prompt, answer) -> float``); an unregistered name is a manifest error.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from ..spec import JudgeSpec, RuleSpec
from . import safe_regex
from .base import JudgeReply, JudgeRequest, RejectedError
from .options import CodeOptions, set_fields
from .registry import options_of


class RuleOptions(CodeOptions, frozen=True):
    """A rule judge's options: its ``rule`` (``RuleSpec``), part of the judge_id, and for a
    ``kind: python`` rule the registered function's code (``CodeOptions``: a hash of the source
    file of the module defining it, or the declared ``version``)."""

    rule: RuleSpec | None = None

    def identity(self) -> dict[str, Any]:
        out = set_fields(self, ("rule",))
        if self.rule is not None and self.rule.kind == "python":
            function = FUNCTIONS.get(self.rule.function or "")
            out["code"] = self.code(getattr(function, "__module__", None))
        return out

Scorer = Callable[[str, str], float]
SERVED = "rule"  # the served model its records carry: how scoring knows no model was called
FUNCTIONS: dict[str, Scorer] = {}
_MAX_CHARS = 1_000_000  # answers longer than this are cut before a regex or JSON parse sees them


def register(name: str, function: Scorer) -> None:
    """Make ``function(prompt, answer) -> float`` available as ``rule: {kind: python, function: name}``."""
    FUNCTIONS[name] = function


def problem(rule: RuleSpec) -> tuple[str, str] | None:
    """(field, what is wrong) for a rule that cannot run, else None (the manifest's check)."""
    needs = {"regex": "pattern", "exact_match": "expected", "python": "function"}.get(rule.kind)
    if needs and getattr(rule, needs) is None:
        return needs, f"a {rule.kind} rule needs {needs}"
    if rule.kind == "regex" and rule.pattern is not None:  # (None: returned above)
        try:
            safe_regex.compile(rule.pattern)
        except safe_regex.error as e:
            return "pattern", f"not a regular expression: {e}"
    if rule.kind == "python" and rule.function not in FUNCTIONS:
        known = ", ".join(sorted(FUNCTIONS)) or "none"
        return "function", (f"no function registered as {rule.function!r} (registered: {known}); "
                            "register it with babelrun.judges.rule.register before the audit")
    return None


def _json_score(answer: str, required: list[str]) -> float:
    try:
        value = json.loads(answer)
    except (ValueError, RecursionError):  # not JSON, or nested past the decoder's limit
        return 0.0
    if required and not (isinstance(value, dict) and all(k in value for k in required)):
        return 0.0
    return 1.0


def scorer(rule: RuleSpec) -> Scorer:
    """The rule's score function; ``rule`` is one ``problem`` passed (the manifest's check)."""
    if rule.kind == "length":
        return lambda prompt, answer: float(len(answer))
    if rule.kind == "regex":
        assert rule.pattern is not None  # problem() rejects a regex rule without one
        pattern = safe_regex.compile(rule.pattern)  # a search past its time: PatternTimeout (RuleJudge)
        return lambda prompt, answer: float(safe_regex.search(pattern, answer[:_MAX_CHARS]) is not None)
    if rule.kind == "exact_match":
        assert rule.expected is not None  # problem() rejects an exact_match rule without one
        expected = rule.expected.strip().casefold()
        return lambda prompt, answer: float(answer.strip().casefold() == expected)
    if rule.kind == "json":
        return lambda prompt, answer: _json_score(answer[:_MAX_CHARS], rule.required)
    assert rule.function is not None  # problem() rejects a python rule without one
    return FUNCTIONS[rule.function]


def verdict(rule: RuleSpec, a: float, b: float) -> str:
    """A, B or tie from the two answers' scores."""
    if rule.kind == "length":
        small, large = sorted((a, b))
        if large < rule.min_ratio * max(small, 1.0):
            return "tie"
    if abs(a - b) <= rule.margin:
        return "tie"
    return "A" if a > b else "B"


class RuleJudge:
    def __init__(self, spec: JudgeSpec, judge_id: str, seed: int):
        self.spec = spec
        self.judge_id = judge_id
        rule = options_of(spec, RuleOptions).rule
        assert rule is not None  # check() rejects a rule judge without a rule before build
        self.rule = rule
        self._score = scorer(rule)

    async def judge(self, request: JudgeRequest) -> JudgeReply:
        prompt = request.item.prompt
        try:
            a, b = float(self._score(prompt, request.answer_a)), float(self._score(prompt, request.answer_b))
        except safe_regex.PatternTimeout:
            raise  # the engine records the pair invalid (pattern_timeout), not a failed call
        except Exception as e:  # the user's function failed on this pair: record it, go on
            raise RejectedError("rule_error", f"rule {self.rule.kind}: {type(e).__name__}: {e}"[:500]) from None
        if a != a or b != b:  # NaN: no score to compare
            raise RejectedError("rule_error", f"rule {self.rule.kind} gave no number (NaN)")
        return JudgeReply(raw=verdict(self.rule, a, b), served_model=SERVED,
                          tokens_in=0, tokens_out=0)

    async def aclose(self) -> None:
        pass


def check(spec: JudgeSpec, environ: Mapping[str, str]) -> tuple[str, str] | None:
    """The manifest's check of a rule judge: a rule that can run."""
    rule = options_of(spec, RuleOptions).rule
    if rule is None:
        return "rule", "the rule backend needs a rule (kind: length, regex, exact_match, json or python)"
    wrong = problem(rule)
    if wrong is None and rule.kind != "python" and options_of(spec, RuleOptions).version is not None:
        return "version", f"a {rule.kind} rule is no code: only a python rule's function has a version"
    return None if wrong is None else (f"rule.{wrong[0]}", wrong[1])
