"""The text perturbations' invariants, checked on every emitted item: shared by the UDHR
tests (unit/test_udhr.py, the 45 translations) and the survey of every declaration
(e2e/test_udhr_all.py); imported as ``invariants``, like ``helpers``."""

from __future__ import annotations

import unicodedata
from collections import Counter

import regex

from babelrun.core.items import _same_text
from babelrun.perturb import script

SEVERITIES = [0.3, 0.6]  # the severities the invariants are checked at


def _words(text: str) -> Counter:
    """Runs of word characters (letters with their marks, digits): a deletion next to
    punctuation with no space after it (``sahiptir,Buna ek``) leaves ``sahiptir`` and ``ek``,
    no new word."""
    return Counter(regex.findall(r"\w+", text))


def _orphan_marks(text: str) -> Counter:
    """Words that start with a combining mark (a few translations have some already)."""
    return Counter(w for w in text.split() if unicodedata.category(w[0]).startswith("M"))


def _zero(ch: str) -> int:
    """The code point of the zero of ``ch``'s decimal digit block."""
    return ord(ch) - unicodedata.decimal(ch)


def _check(name: str, ref: str, out: str) -> None:
    before = [s.text for s in script.sentences(ref)]
    after = [s.text for s in script.sentences(out)]
    if name == "truncate":
        assert len(after) < len(before) and after == before[: len(after)]
    elif name == "shuffle":
        assert sorted(after) == sorted(before)
    elif name == "number_corrupt":
        assert script.NUMBER.sub("#", out) == script.NUMBER.sub("#", ref)
        olds, news = script.NUMBER.findall(ref), script.NUMBER.findall(out)
        changed = [(o, n) for o, n in zip(olds, news, strict=True) if o != n]
        assert changed
        for old, new in changed:
            zero = _zero(next(ch for ch in old if ch.isdecimal()))
            assert all(_zero(ch) == zero for ch in new if ch.isdecimal()), (old, new)
    elif name == "repeat_pad":
        assert len(out) > len(ref) and out.startswith(ref)
        # The added part, read on its own, is whole sentences of the reference. (Read with
        # the reference in front, a reference ending in an unterminated fragment, e.g. Irish
        # article 13, runs into the first added sentence: the reference itself is kept
        # verbatim, so that junction cannot be helped.)
        added = [s.text for s in script.sentences(out[len(ref):])]
        assert added and set(added) <= set(before)
    elif name == "drop_entities":
        assert not _words(out) - _words(ref)
        assert not _orphan_marks(out) - _orphan_marks(ref)
    else:
        raise AssertionError(f"no invariant for {name}")


def invariant_failures(results) -> tuple[list, Counter]:
    """Every emitted item checked against its perturbation's invariant: the failures, and
    the (cell, outcome) counts the perturbation audit must report."""
    failures = []
    outcomes: Counter = Counter()
    for cell, item, outcome in results:
        outcomes[(cell, outcome)] += 1
        if item is None:
            continue
        assert not _same_text(item.perturbed, item.reference)
        assert (item.lang, item.perturbation, item.severity) == cell and outcome == "emitted"
        try:
            _check(item.perturbation, item.reference, item.perturbed)
        except AssertionError as e:
            failures.append((item.lang, item.ref_id, item.perturbation, item.severity, str(e)))
    return failures, outcomes
