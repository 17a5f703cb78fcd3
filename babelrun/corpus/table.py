"""A JSON Lines, CSV or Parquet file of references, with a column map for files that use other
names.

Fields: ``prompt``, ``reference``, ``language`` and ``id`` (optional; the line number is used
when absent). ``columns: {prompt: question, reference: answer}`` maps them to the file's keys;
``language: sw`` names the language of a file that has no language column.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import msgspec

from .. import languages
from ..errors import ManifestError

_FIELDS = ("prompt", "reference", "language", "id")


def _column(spec, field: str) -> str:
    return spec.columns.get(field, field)


def check(spec, where: str) -> None:
    for key in spec.columns:
        if key not in _FIELDS:
            raise ManifestError(f"{where}.columns.{key}", f"unknown field (known: {', '.join(_FIELDS)})")
    path = Path(spec.path)
    if not path.is_file():
        raise ManifestError(f"{where}.path", f"file not found: {path}")
    if spec.language is not None:
        try:
            languages.normalize(spec.language)
        except ValueError as e:
            raise ManifestError(f"{where}.language", str(e)) from None
    for lineno, row in _rows(path):
        for field in ("prompt", "reference"):
            if not isinstance(row.get(_column(spec, field)), str):
                raise ManifestError(
                    f"{where}.path", f"{path}:{lineno}: no text column {_column(spec, field)!r}"
                )
        lang = spec.language or row.get(_column(spec, "language"))
        if not isinstance(lang, str):
            raise ManifestError(f"{where}.path", f"{path}:{lineno}: no language (set `language:`)")
        try:
            languages.normalize(lang)
        except ValueError as e:
            raise ManifestError(f"{where}.path", f"{path}:{lineno}: {e}") from None


def _rows(path: Path) -> Iterator[tuple[int, dict]]:
    decoder = msgspec.json.Decoder(dict)
    with path.open("rb") as f:
        for lineno, line in enumerate(f, 1):
            if line.strip():
                try:
                    yield lineno, decoder.decode(line)
                except msgspec.DecodeError as e:
                    raise ManifestError("", f"{path}:{lineno}: not valid JSON ({e})") from None


def read(spec) -> Iterator:
    from . import Reference

    for lineno, row in _rows(Path(spec.path)):
        lang = languages.normalize(spec.language or row[_column(spec, "language")])
        ref_id = str(row.get(_column(spec, "id"), lineno))
        yield Reference(
            lang=lang,
            ref_id=ref_id,
            prompt=row[_column(spec, "prompt")],
            response=row[_column(spec, "reference")],
        )
