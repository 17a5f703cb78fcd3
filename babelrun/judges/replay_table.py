"""``backend: replay`` on a verdict table in its own column names: ``replay: {path, columns,
join, label_map}`` read by the table reader (corpus/pairtable.py), so a judge's published
verdicts replay as its tool wrote them.

**Fields** (``columns: {field: column}``; a field not named is read from its own column):
``output_1``, ``output_2`` (the data's two outputs: texts, or conversations with ``turn``
picking the judged one), ``decision`` (the verdict with output_1 shown first),
``decision_swapped`` (with output_2 shown first), ``raw`` / ``raw_swapped`` (the judge's
reply texts, kept in the log), ``model_1`` / ``model_2`` (who wrote each output, for a
decision that names a model), ``turn`` and ``judge`` (``replay.judge`` picks one). Both orders
may sit in one column: a ``decision`` (or ``raw``) that is a list of two is the data order's
then the swapped one's.

**Decision words**, whitespace and case ignored:

- the slot shown first or second: ``A``, ``B``, ``tie``, ``[[A]]``/``[[B]]``/``[[C]]`` (MT-Bench's
  replies), ``A>B``, ``A>>B``, ``B>A``, ``B>>A``, ``A=B`` (Arena-Hard's scores);
- the data's output: ``1``, ``2`` (LLMBar), ``model_1``/``model_2``, ``model_a``/``model_b``
  (MT-Bench), the name in ``model_1`` / ``model_2``; ``0``, ``3``, ``tie (bothbad)``: a tie;
- a number strictly between 1 and 2 (alpaca_eval's ``preference``): a soft verdict,
  P(output 2) = x − 1, P(output 1) = 2 − x; the slot its larger side, 1.5 a tie (exact ties
  are ties);
- ``label_map`` maps any other word to one of ``A``, ``B``, ``tie``, ``1``, ``2``.

A decision none of these reads is recorded **invalid** (the judge answered, unreadably); an
empty one is no verdict (the presentation is ``not_in_replay``). Rows are keyed by the texts
they show, so they need ``output_1`` and ``output_2`` (from the table or a join).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from ..corpus import pairtable
from ..corpus.pairtable import TableError
from ..spec import ReplaySpec

_AMBIGUOUS = object()  # a key that names several different verdicts: not a key
Key = tuple[str, ...]


class Verdict(msgspec.Struct, frozen=True):
    slot: str | None
    score: float | None
    raw: str | None
    probs: tuple[float, float, float] | None = None  # a soft verdict: P(A), P(B), P(tie)


def text_key(a: Any, b: Any) -> Key:
    """The key of a presentation by the texts it shows (a digest: the file's texts are not kept)."""
    digest = hashlib.blake2b(f"{a}\x1f{b}".encode(), digest_size=16).digest()
    return ("text", digest.hex())

FIELDS = ("output_1", "output_2", "decision", "decision_swapped", "raw", "raw_swapped", "model_1", "model_2",
          "turn", "judge", "input", "id")
_SLOT_WORDS = {"a": "A", "b": "B", "tie": "tie", "[[a]]": "A", "[[b]]": "B", "[[c]]": "tie", "a>b": "A",
               "a>>b": "A", "b>a": "B", "b>>a": "B", "a=b": "tie", "b=a": "tie", "a<b": "B", "a<<b": "B"}
_DATA_WORDS = {"1": "1", "2": "2", "model_1": "1", "model_2": "2", "model_a": "1", "model_b": "2",
               "output_1": "1", "output_2": "2", "0": "tie", "3": "tie", "tie(bothbad)": "tie"}
_MAPPED = ("A", "B", "tie", "1", "2")


def _word(value: Any) -> str:
    return "".join(str(value).split()).lower()


def _soft(value: Any) -> float | None:
    """A preference strictly between 1 and 2, or None."""
    if isinstance(value, bool):
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) and 1 < x < 2 else None


def decide(value: Any, swapped: bool, models: tuple[str, str], label_map: dict[str, str] | None) -> Verdict:
    """One decision word as the verdict of the presentation it was given on (module docstring)."""
    if label_map and str(value).strip() in label_map:
        value = label_map[str(value).strip()]
    word = _word(value)
    data = _DATA_WORDS.get(word)
    if data is None and word and word in (_word(models[0]), _word(models[1])):
        data = "1" if word == _word(models[0]) else "2"
    if isinstance(value, float) and value.is_integer():
        data = _DATA_WORDS.get(str(int(value)), data)
    if data is not None:
        slot = "tie" if data == "tie" else "A" if (data == "1") != swapped else "B"
        return Verdict(slot, None, None)
    if word in _SLOT_WORDS:
        return Verdict(_SLOT_WORDS[word], None, None)
    x = _soft(value)
    if x is not None:
        p1, p2 = 2 - x, x - 1  # the data's outputs; slot A shows output 2 when swapped
        pa, pb = (p2, p1) if swapped else (p1, p2)
        return Verdict("A" if pa > pb else "B" if pb > pa else "tie", None, None, (pa, pb, 0.0))
    return Verdict("invalid", None, None)


def _pick(path: Path, number: int, value: Any, field: str, turn: Any) -> str:
    """The judged text of a field: a text, or a conversation's turn (``turn`` from 1; the last)."""
    got = pairtable.conversation(value, field)
    if isinstance(got, list):
        i = len(got) - 1 if turn in (None, "") else int(pairtable.key_text(turn)) - 1
        got = got[i] if 0 <= i < len(got) else None
    if not isinstance(got, str):
        raise TableError(f"{path}:{number}: no text for {field} (map the file's own with columns: or join:)")
    return got


def _two(path: Path, number: int, first: Any, second: Any, what: str) -> tuple[Any, Any]:
    if isinstance(first, list) and second in (None, ""):
        if len(first) != 2:
            raise TableError(f"{path}:{number}: {what} is a list of two (the data order's, the swapped one's)")
        return first[0], first[1]
    return first, second


def row_entries(path: Path, number: int, rec: dict[str, Any],
                label_map: dict[str, str] | None) -> Iterator[tuple[Key, Verdict]]:
    """A row's verdicts, keyed by the texts each presentation shows."""
    try:
        first = _pick(path, number, rec["output_1"], "output_1", rec.get("turn"))
        second = _pick(path, number, rec["output_2"], "output_2", rec.get("turn"))
    except ValueError as e:
        raise TableError(str(e) if isinstance(e, TableError) else f"{path}:{number}: turn: {e}") from None
    decisions = _two(path, number, rec["decision"], rec["decision_swapped"], "decision")
    raws = _two(path, number, rec["raw"], rec["raw_swapped"], "raw")
    models = (str(rec["model_1"] or ""), str(rec["model_2"] or ""))
    for value, raw, swapped in zip(decisions, raws, (False, True), strict=True):
        if value in (None, ""):
            continue  # no verdict for this order: not in the replay
        verdict = decide(value, swapped, models, label_map)
        shown = (second, first) if swapped else (first, second)
        yield text_key(*shown), Verdict(verdict.slot, None, None if raw is None else str(raw), verdict.probs)


def load(replay: ReplaySpec) -> dict[Key, Any]:
    """The table's verdicts by key; a presentation given two different verdicts is no key."""
    for word, target in (replay.label_map or {}).items():
        if target not in _MAPPED:
            raise ValueError(f"label_map: {word!r} maps to {target!r}, not one of {', '.join(_MAPPED)}")
    path = Path(replay.path)
    joins = [pairtable.load_join(j.path, j.by, j.columns) for j in replay.join]
    out: dict[Key, Any] = {}
    judges: set[str] = set()
    for number, rec in pairtable.records(path, replay.columns, joins, FIELDS):
        name = None if rec["judge"] in (None, "") else (
            "/".join(map(str, rec["judge"])) if isinstance(rec["judge"], list) else str(rec["judge"]))
        if replay.judge is not None and name is not None and name != replay.judge:
            continue
        if name is not None:
            judges.add(name)
        for key, verdict in row_entries(path, number, rec, replay.label_map):
            out[key] = _AMBIGUOUS if key in out and out[key] != verdict else verdict
    if replay.judge is None and len(judges) > 1:
        raise ValueError(f"the file holds verdicts of several judges ({', '.join(sorted(judges)[:5])}): "
                         "set replay.judge to one of them")
    return {k: v for k, v in out.items() if v is not _AMBIGUOUS}
