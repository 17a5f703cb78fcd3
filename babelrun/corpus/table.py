"""A JSON Lines, CSV or Parquet file of references, with a column map for files that use
other names.

Fields: ``prompt``, ``reference``, ``language`` and ``id`` (optional; the row number is used
when absent). ``columns: {prompt: question, reference: answer}`` maps them to the file's
columns; ``language: sw`` names the language of a file that has no language column. Language
values may be BCP-47 or ISO 639-3 codes.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

import msgspec

from ..core import languages
from ..errors import ManifestError

_FIELDS = ("prompt", "reference", "language", "id")


def _column(spec, field: str) -> str:
    return spec.columns.get(field, field)


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
        for number, row in rows(path, _kind(spec), getattr(spec, "delimiter", None)):
            _check_row(spec, where, path, number, row)
    except ManifestError as e:
        if not e.path:
            raise ManifestError(f"{where}.path", e.problem) from None
        raise
    except (OSError, UnicodeDecodeError, csv.Error, ValueError) as e:
        raise ManifestError(f"{where}.path", f"cannot read {path}: {e}") from None


def _check_row(spec, where: str, path: Path, number: int, row: dict) -> None:
    for field in ("prompt", "reference"):
        if not isinstance(row.get(_column(spec, field)), str):
            have = ", ".join(repr(k) for k in list(row)[:20])
            raise ManifestError(f"{where}.path", f"{path}:{number}: no text column {_column(spec, field)!r} "
                                f"(the row has: {have}; map yours with columns: {{{field}: NAME}})")
    lang = spec.language or row.get(_column(spec, "language"))
    if not isinstance(lang, str):
        raise ManifestError(f"{where}.path", f"{path}:{number}: no language (set `language:`)")
    try:
        languages.normalize(lang)
    except ValueError as e:
        raise ManifestError(f"{where}.path", f"{path}:{number}: {e}") from None


def read(spec) -> Iterator:
    from ..core.items import Reference

    for number, row in rows(Path(spec.path), _kind(spec), getattr(spec, "delimiter", None)):
        lang = languages.normalize(spec.language or row[_column(spec, "language")])
        ref_id = row.get(_column(spec, "id"))
        yield Reference(lang=lang, ref_id=str(number if ref_id in (None, "") else ref_id),
                        prompt=row[_column(spec, "prompt")], response=row[_column(spec, "reference")])
