"""A JSON Lines, CSV or Parquet file of references, with a column map for files that use
other names.

Fields: ``prompt``, ``reference``, ``language``, ``id`` (optional; the row number is used
when absent) and ``reference_answer`` (optional: a separate reference answer for
reference-guided judge templates, ``{reference}``; never the answer under judgement).
``columns: {prompt: question, reference: answer}`` maps them to the file's
columns; ``language: sw`` names the language of a file that has no language column. Language
values may be BCP-47 or ISO 639-3 codes. A CSV file's ``delimiter`` (one character; ``,``
unless set) is a source option.

A column may be a path into nested rows (chat exports, ShareGPT): keys and list indices
joined by dots or in brackets, negative indices from the end — ``messages.0.content``,
``conversations[-1].value``. A key that exists as written (``a.b`` with the dot) wins over
the path. Multi-turn conversations: when the prompt's value is a list of turns (objects
with ``role``/``from`` and ``content``/``value``), the trailing answer turns are dropped
and the others become the prompt, one ``role: text`` line each — the earlier turns are the
context, the last turn is the one judged (``reference: messages[-1].content``).
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator
from pathlib import Path

import msgspec

from ..core import languages
from ..errors import ManifestError

_FIELDS = ("prompt", "reference", "language", "id", "reference_answer")


def _column(spec, field: str) -> str:
    return spec.columns.get(field, field)


_STEP = re.compile(r"\[(-?\d+)\]|([^.\[\]]+)")
_MISSING = object()


def get(row: dict, path: str):
    """The value at ``path`` in ``row`` (see the module docstring), or None."""
    if path in row:
        return row[path]
    value = row
    for index, key in _STEP.findall(path):
        step = index or key
        if isinstance(value, list) and re.fullmatch(r"-?\d+", step):
            i = int(step)
            value = value[i] if -len(value) <= i < len(value) else _MISSING
        elif isinstance(value, dict):
            value = value.get(step, _MISSING)
        else:
            value = _MISSING
        if value is _MISSING:
            return None
    return value


_ANSWER_ROLES = ("assistant", "gpt", "model", "bot")


def _turn(turn) -> tuple[str, str] | None:
    if not isinstance(turn, dict):
        return None
    role, text = turn.get("role", turn.get("from")), turn.get("content", turn.get("value"))
    return (role, text) if isinstance(role, str) and isinstance(text, str) else None


def _text(value):
    """A column's text: a string as it is; a list of turns as the conversation before its
    last answer (``role: text`` lines); anything else None."""
    if isinstance(value, str) or not isinstance(value, list):
        return value if isinstance(value, str) else None
    turns = [_turn(t) for t in value]
    if not turns or any(t is None for t in turns):
        return None
    while turns and turns[-1][0] in _ANSWER_ROLES:
        turns.pop()
    return "\n".join(f"{role}: {text}" for role, text in turns) or None


def rows(path: Path, kind: str, delimiter: str | None = None) -> Iterator[tuple[int, dict]]:
    """(row number, row as a dict) of a JSONL, CSV or Parquet file; row numbers from 1. A
    CSV's delimiter is ``delimiter``, or sniffed from its header line (``,`` ``;`` tab ``|``)."""
    if kind == "jsonl":
        decoder = msgspec.json.Decoder(dict)
        with path.open("rb") as f:
            for number, line in enumerate(f, 1):
                if line.strip():
                    try:
                        yield number, decoder.decode(line)
                    except msgspec.DecodeError as e:
                        raise ManifestError("", f"{path}:{number}: not valid JSON ({e})") from None
                    except RecursionError:  # the decoder's depth bound (about 1,000 levels)
                        raise ManifestError("", f"{path}:{number}: not valid JSON (nested too deeply)") from None
    elif kind == "csv":
        with path.open(newline="", encoding="utf-8-sig") as f:
            yield from enumerate(csv.DictReader(f, delimiter=delimiter or _sniff(f)), 1)
    elif kind == "parquet":
        import pyarrow.parquet as pq

        number = 0
        for batch in pq.ParquetFile(path).iter_batches(batch_size=4096):
            for row in batch.to_pylist():
                number += 1
                yield number, row
    else:
        raise ValueError(f"unknown table kind {kind!r}")


def _sniff(f) -> str:
    """The delimiter of a CSV's header line: the most frequent of , ; tab | (a comma when none)."""
    header = f.readline()
    f.seek(0)
    counts = {d: header.count(d) for d in (",", ";", "\t", "|")}
    best = max(counts, key=counts.get)
    return best if counts[best] else ","


def _kind(spec) -> str:
    return type(spec).__struct_config__.tag


def _rows(spec) -> Iterator[tuple[int, dict]]:
    return rows(Path(spec.path), _kind(spec), getattr(spec, "delimiter", None))


def check(spec, where: str) -> None:
    for key in spec.columns:
        if key not in _FIELDS:
            raise ManifestError(f"{where}.columns.{key}", f"unknown field (known: {', '.join(_FIELDS)})")
    path = Path(spec.path)
    if not path.is_file():
        raise ManifestError(f"{where}.path", f"file not found: {path}")
    if spec.language is not None:
        languages.checked(spec.language, f"{where}.language")
    try:
        if getattr(spec, "delimiter", None) is not None and len(spec.delimiter) != 1:
            raise ManifestError(f"{where}.delimiter", "one character, e.g. ';'")
        for number, row in _rows(spec):
            _check_row(spec, where, path, number, row)
    except ManifestError as e:
        if not e.path:
            raise ManifestError(f"{where}.path", e.problem) from None
        raise
    except (OSError, UnicodeDecodeError, csv.Error, ValueError) as e:
        raise ManifestError(f"{where}.path", f"cannot read {path}: {e}") from None


def _check_row(spec, where: str, path: Path, number: int, row: dict) -> None:
    for field in ("prompt", "reference"):
        if not isinstance(_text(get(row, _column(spec, field))), str):
            have = ", ".join(repr(k) for k in list(row)[:20])
            raise ManifestError(f"{where}.path", f"{path}:{number}: no text column {_column(spec, field)!r} "
                                f"(the row has: {have}; map yours with columns: {{{field}: NAME}})")
    lang = spec.language or get(row, _column(spec, "language"))
    if not isinstance(lang, str):
        raise ManifestError(f"{where}.path", f"{path}:{number}: no language (set `language:`)")
    try:
        languages.normalize(lang)
    except ValueError as e:
        raise ManifestError(f"{where}.path", f"{path}:{number}: {e}") from None


def read(spec) -> Iterator:
    from ..core.items import Reference

    for number, row in _rows(spec):
        lang = languages.normalize(spec.language or get(row, _column(spec, "language")))
        ref_id = get(row, _column(spec, "id"))
        yield Reference(lang=lang, ref_id=str(number if ref_id in (None, "") else ref_id),
                        prompt=_text(get(row, _column(spec, "prompt"))),
                        response=_text(get(row, _column(spec, "reference"))),
                        reference_answer=_guide(get(row, _column(spec, "reference_answer"))))


def _guide(value) -> str:
    """A reference answer for reference-guided templates: text, or nothing."""
    return value if isinstance(value, str) else ""


def has_reference_answers(spec) -> bool:
    """Whether every row of the file has a text ``reference_answer`` (mapped) column."""
    column = _column(spec, "reference_answer")
    return all(_guide(get(row, column)).strip() for _, row in _rows(spec))
