"""The fake judge's verdicts: the answer it names (by content hash, so the same in either
order and in every run), the prompts a server with ``flip_rate`` answers the other way, and
its soft verdict (the top log-probabilities an OpenAI reply carries when asked)."""

from __future__ import annotations

import hashlib
import math
import re

_ANSWER = re.compile(r"\[Answer (A|B)\]\n(.*?)\n\[End of Answer \1\]", re.S)


def choose(prompt: str) -> str:
    """The fake judge's verdict: the answer with the smaller blake2b digest (order-free)."""
    answers = dict(_ANSWER.findall(prompt))
    if set(answers) != {"A", "B"}:
        return "I see no answers to compare."

    def digest(text: str) -> bytes:
        return hashlib.blake2b(text.encode(), digest_size=8).digest()

    return "A" if digest(answers["A"]) <= digest(answers["B"]) else "B"


def flipped(prompt: str, rate: float) -> bool:
    """Whether a server with ``flip_rate`` = rate answers this prompt the other way: a fixed
    share of prompts, chosen by their hash (the same prompt flips every time, in every run)."""
    h = int.from_bytes(hashlib.blake2b(b"flip\x1f" + prompt.encode(), digest_size=8).digest(), "big")
    return h < rate * 2**64


# The fake judge's soft verdict: its choice 0.7, the other slot 0.2, tie 0.06, a stray token 0.04.
SOFT = (0.7, 0.2, 0.06, 0.04)


def top_logprobs(verdict: str) -> list[dict]:
    """The alternatives of a soft verdict, with ``SOFT``'s probabilities: the choice, the other
    slot (after a space, as a tokenizer gives it), tie and a stray token."""
    other = "B" if verdict == "A" else "A"
    return [{"token": t, "logprob": math.log(p)} for t, p in zip((verdict, f" {other}", "tie", "The"), SOFT,
                                                                  strict=True)]
