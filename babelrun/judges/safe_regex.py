"""Every regular expression a user writes (a ``verdict:`` pattern, a ``rule: {kind: regex}``)
is compiled and run here, so none can hang a run.

The engine is the ``regex`` module (already a dependency): its syntax is Python's ``re``
(named groups, ``\\d``, classes, flags) plus Unicode properties (``\\p{L}``), and each search
takes a ``timeout``. A search that runs past ``TIMEOUT_S`` (catastrophic backtracking:
``(a|aa)+$`` against forty ``a`` and a ``!``) raises ``PatternTimeout``; the engine records
that reply as read ``invalid`` with ``error_kind: pattern_timeout`` and goes on, so the event
loop is held at most ``TIMEOUT_S`` per reply and SIGTERM still works. Patterns that nest a
quantifier inside a quantified group (``(a+)+``, ``(\\w*)*``) are warned of at validate.
"""

from __future__ import annotations

from typing import Literal

import regex

TIMEOUT_S = 0.25  # one search of one reply (or one answer, for a rule)
MAX_TEXT = 1_000_000  # characters searched: a longer text is cut first

Pattern = regex.Pattern
error = regex.error


class PatternTimeout(Exception):
    """A user pattern ran past ``TIMEOUT_S`` on one text."""

    kind = "pattern_timeout"

    def __init__(self, pattern: str):
        super().__init__(f"pattern {pattern[:80]!r} ran past {TIMEOUT_S:g} s on this text (catastrophic "
                         "backtracking?): recorded invalid")


def compile(pattern: str) -> regex.Pattern[str]:  # noqa: A001 (the module's one verb, as re.compile)
    """The compiled pattern; ``regex.error`` (``safe_regex.error``) when it is not one."""
    return regex.compile(pattern, regex.VERSION0)


def search(pattern: regex.Pattern[str], text: str,
           match: Literal["first", "last"] = "first") -> regex.Match[str] | None:
    """The first (or last) match of ``pattern`` in ``text`` (cut to ``MAX_TEXT``), within
    ``TIMEOUT_S`` in all; ``PatternTimeout`` past it."""
    text = text[:MAX_TEXT]
    try:
        if match == "first":
            return pattern.search(text, timeout=TIMEOUT_S)
        found = None
        for found in pattern.finditer(text, timeout=TIMEOUT_S):  # noqa: B007 (the last one is wanted)
            pass
        return found
    except TimeoutError:
        raise PatternTimeout(pattern.pattern) from None


# A group holding a quantifier, itself quantified: (a+)+, (\w*)*, (x+x+)+, (?:a|a)+ ...
_NESTED = regex.compile(r"\((?:\?:)?(?:[^()\\]|\\.)*(?:[+*]|\{\d*,\d*\})(?:[^()\\]|\\.)*\)(?:[+*]|\{\d*,\d*\})")
_ALTERNATION = regex.compile(r"\((?:\?:)?([^()|\\]+)\|\1\)(?:[+*]|\{\d*,\d*\})")


def risky(pattern: str) -> bool:
    """Whether ``pattern`` nests quantifiers (or repeats an ambiguous alternation): the shapes
    that backtrack exponentially. A heuristic for a warning, never a refusal."""
    return bool(_NESTED.search(pattern) or _ALTERNATION.search(pattern))


__all__ = ["MAX_TEXT", "TIMEOUT_S", "PatternTimeout", "compile", "error", "risky", "search"]
