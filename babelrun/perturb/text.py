"""The five text perturbations of the BabelJudge paper, as pure functions.

Each is ``(text, severity, rng, lang) -> text``: deterministic given the ``random.Random``
it is handed (the item builder seeds one per item from the item id). They may return the
text unchanged when there is nothing to act on; the item builder's no-op guard then skips
the item and counts it. Only ``repeat_pad`` makes the worse answer longer.
"""

from __future__ import annotations

import math
import random

from . import script


def share(fraction: float, n: int) -> int:
    """round(fraction * n), halves up, at least 1."""
    return max(1, math.floor(fraction * n + 0.5))


def truncate(text: str, severity: float, rng: random.Random, lang: str) -> str:
    """Drop the trailing fraction ``severity`` of sentences (at least one; keep at least one)."""
    parts = script.sentences(text, lang)
    keep = max(1, len(parts) - share(severity, len(parts)))
    return script.join(parts[:keep])


def shuffle(text: str, severity: float, rng: random.Random, lang: str) -> str:
    """Each sentence joins the reorder with probability ``severity``; at least two move.

    The chosen sentences are permuted among their own positions (never the identity), the
    others stay where they are, and the whitespace between sentences keeps its place (but a
    sentence that ends at a paragraph's line break, with no mark, keeps a line break after
    it: ``script.ends_at_line``). Only
    whole sentences move (``script.is_whole``): an unterminated last fragment stays last,
    since anywhere else it would run into the sentence after it.
    """
    parts = script.sentences(text, lang)
    movable = [i for i, p in enumerate(parts) if script.is_whole(p.text)]
    if len(movable) < 2:
        return text
    chosen = [i for i in movable if rng.random() < severity]
    if len(chosen) < 2:
        chosen = sorted(rng.sample(movable, 2))
    order = chosen[:]
    rng.shuffle(order)
    if order == chosen:
        order = order[1:] + order[:1]
    moved = list(parts)
    for dst, src in zip(chosen, order, strict=True):
        # a sentence that ends at its paragraph's line break (no mark; the text's last one too)
        # takes a line break along: after a space it would run into the next
        gap = parts[dst].gap
        if script.ends_at_line(parts[src].text):
            gap = parts[src].gap if "\n" in parts[src].gap else "\n"
        moved[dst] = script.Sentence(parts[src].text, gap)
    return script.join(moved)


def number_corrupt(text: str, severity: float, rng: random.Random, lang: str) -> str:
    """Change numeric tokens by a random nonzero delta, in the digit system they were written in.

    Each number is changed with probability ``severity`` (at least one). The first digit
    group of a number is the one changed (``45,000`` -> ``52,000``; ``3.5`` -> ``4.5``); the
    delta is up to half the value (at least 1) and never makes it negative.
    """
    tokens = list(script.NUMBER.finditer(text))
    if not tokens:
        return text
    chosen = {i for i in range(len(tokens)) if rng.random() < severity}
    if not chosen:
        chosen = {rng.randrange(len(tokens))}
    out, last = [], 0
    for i, token in enumerate(tokens):
        if i not in chosen:
            continue
        group = script.DIGIT_GROUP.match(token.group()).group()
        out.append(text[last : token.start()])
        out.append(script.digits_like(_nudge(script.digit_value(group), rng), group))
        last = token.start() + len(group)
    out.append(text[last:])
    return "".join(out)


def _nudge(value: int, rng: random.Random) -> int:
    span = max(1, value // 2)
    delta = rng.randint(1, span)
    if value - delta < 0 or rng.random() < 0.5:
        return value + delta
    return value - delta


def drop_entities(text: str, severity: float, rng: random.Random, lang: str) -> str:
    """Remove a fraction ``severity`` (at least one) of the entity-like tokens.

    What counts as entity-like in each script is documented in ``perturb/script.py``.
    """
    spans = script.entity_spans(text, lang)
    if not spans:
        return text
    k = min(len(spans), share(severity, len(spans)))
    drop = sorted(rng.sample(spans, k))
    out, last = [], 0
    for start, end in drop:
        out.append(text[last:start])
        last = end
    out.append(text[last:])
    return script.tidy("".join(out))


def repeat_pad(text: str, severity: float, rng: random.Random, lang: str) -> str:
    """Append ceil(n * (0.5 + severity)) sentences drawn (with replacement) from the text.

    Only whole sentences are repeated (``script.is_whole``): an unterminated fragment would
    run into the sentence after it. A text with none (one unterminated fragment) is left
    unchanged, and the item builder skips and counts it.
    """
    parts = script.sentences(text, lang)
    whole = [p for p in parts if script.is_whole(p.text)]
    if not whole:
        return text
    extra = math.ceil(len(parts) * (0.5 + severity))
    gap = script.sentence_gap(parts)
    padding = [rng.choice(whole).text for _ in range(extra)]
    out, last = script.join(parts), parts[-1].text
    for sentence in padding:  # after a sentence that ends at a line break (no mark), a line break
        out += ("\n" if script.ends_at_line(last) else gap) + sentence
        last = sentence
    return out
