"""One reader for tables of labelled pairs and of verdicts: CSV, JSON (a list of objects) and
JSON Lines, in the file's own column names (``columns:``), with texts kept in other files
joined by key or by line order (``join:``). The ``labelled_pairs`` source, ``babelrun agree``
and ``backend: replay`` all read through it.

**Columns.** ``columns: {field: column}`` names the file's column for each field; a field not
named is read from the column of its own name. A column may be a path into nested rows
(``choices[0].turns``, ``conversation_a.1.content``: ``table.get``), and ``id`` may be a list
of columns (their values joined by ``/``).

**Join.** Each ``join`` entry reads one more file (or every file a glob matches, in name
order) and takes some fields from it: ``by: {our_column: their_column}`` matches rows by key —
``$file`` on their side is the joined file's name without its extension (MT-Bench keeps each
model's answers in ``model_answer/<model>.jsonl``) — or ``by: line`` pairs the n-th row of
each file; ``columns: {field: their_column}`` says what it gives. A row whose key has no
joined row is refused (one line naming both files); so is a key two joined rows share.

**Turns.** A text whose value is a list — of strings (MT-Bench's ``turns``) or of chat
messages (``role``/``content``; the user's messages for ``input``, the assistant's for an
output) — is a conversation: the ``turn`` field (counted from 1) picks the judged turn, the
last without one, and the turns before it are the pair's earlier turns.

**Bounds** (the file is untrusted): only regular files are opened (a FIFO or a device is
refused without blocking); CSV and JSON Lines are streamed row by row; a ``.json`` document
is held once (at most ``MAX_DOCUMENT`` bytes) and its rows decoded one at a time; a row of
JSON is at most ``MAX_ROW`` bytes and a cell at most ``MAX_CELL``; a short or long CSV row, a
duplicated column and a duplicated JSON key are refused. Every refusal is one line naming the
file and the row (``TableError``).
"""

from __future__ import annotations

import csv
import glob
import json
import os
import stat
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO

import msgspec

from .table import get

MAX_CELL = 1 << 20  # 1 MiB: a cell (a CSV field, a mapped JSON value)
MAX_ROW = 16 << 20  # 16 MiB: one JSON row (a JSON Lines line, an element of a .json list)
MAX_DOCUMENT = 1 << 30  # 1 GiB: a .json document, held once while its rows are decoded
MAX_JOIN_FILES = 10_000
SUFFIXES = (".csv", ".tsv", ".json", ".jsonl", ".ndjson")
FILE = "$file"  # a joined file's name without its extension, as a key column
LINE = "line"  # join by line order

_USER_ROLES = ("user", "human")
_ANSWER_ROLES = ("assistant", "gpt", "model", "bot")


class TableError(ValueError):
    """One line naming the file (and row) and what is wrong."""


def open_regular(path: Path) -> BinaryIO:
    """``path`` opened for reading when it is a regular file: a FIFO is opened without
    blocking and refused, like a device or a folder."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise TableError(f"{path}: cannot read ({e.strerror})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise TableError(f"{path}: not a regular file (a FIFO, device or folder is not read)")
    if hasattr(os, "set_blocking"):
        os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def read_bounded(f: BinaryIO, limit: int) -> bytes | None:
    """The whole of a regular file, or None when it is over ``limit`` bytes (its size is
    checked before anything is read, so no buffer of ``limit`` bytes is ever made)."""
    if os.fstat(f.fileno()).st_size > limit:
        return None
    data = f.read()
    return None if len(data) > limit else data


def rows(path: Path, delimiter: str | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """(row number, row) of a CSV / TSV, JSON or JSON Lines file, numbered from 1 (a CSV's
    line number; a JSON list's element)."""
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise TableError(f"{path}: a table is {', '.join(SUFFIXES)}")
    with open_regular(path) as f:
        if suffix in (".csv", ".tsv"):
            yield from _csv_rows(path, f, delimiter or ("\t" if suffix == ".tsv" else None))
        elif suffix == ".json":
            yield from _document_rows(path, f)
        else:
            yield from _line_rows(path, f)


def _no_duplicates(path: Path, number: int):
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out = dict(pairs)
        if len(out) != len(pairs):
            seen: set[str] = set()
            twice = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
            raise TableError(f"{path}:{number}: key {twice[:60]!r} given twice (the last would win silently)")
        return out
    return hook


def _json_row(path: Path, number: int, data: bytes) -> dict[str, Any]:
    if len(data) > MAX_ROW:
        raise TableError(f"{path}:{number}: longer than {MAX_ROW >> 20} MiB")
    try:
        row = json.loads(data, object_pairs_hook=_no_duplicates(path, number))
    except RecursionError:
        raise TableError(f"{path}:{number}: nested too deeply") from None
    except TableError:
        raise
    except ValueError as e:  # JSONDecodeError, a number past Python's digit bound, bad UTF-8
        raise TableError(f"{path}:{number}: not valid JSON ({str(e)[:120]})") from None
    if not isinstance(row, dict):
        raise TableError(f"{path}:{number}: a row is a JSON object")
    return row


def _line_rows(path: Path, f: BinaryIO) -> Iterator[tuple[int, dict[str, Any]]]:
    number = 0
    while True:
        line = f.readline(MAX_ROW + 1)
        if not line:
            return
        number += 1
        if len(line) > MAX_ROW:
            raise TableError(f"{path}:{number}: longer than {MAX_ROW >> 20} MiB")
        if line.strip():
            yield number, _json_row(path, number, line)


def _document_rows(path: Path, f: BinaryIO) -> Iterator[tuple[int, dict[str, Any]]]:
    data = read_bounded(f, MAX_DOCUMENT)
    if data is None:
        raise TableError(f"{path}: a .json document over {MAX_DOCUMENT >> 30} GiB (write it as JSON Lines)")
    try:  # the rows' spans only (zero-copy): each is decoded when it is reached
        spans = msgspec.json.decode(data, type=list[msgspec.Raw])
    except msgspec.DecodeError as e:
        raise TableError(f"{path}: not a JSON list of objects ({e})") from None
    for number, span in enumerate(spans, 1):
        yield number, _json_row(path, number, bytes(span))


def _csv_rows(path: Path, f: BinaryIO, delimiter: str | None) -> Iterator[tuple[int, dict[str, Any]]]:
    import io

    if csv.field_size_limit() < MAX_CELL:
        csv.field_size_limit(MAX_CELL)  # the csv module refuses a longer cell; the row is named below
    check_cells = csv.field_size_limit() > MAX_CELL  # set higher elsewhere: our own check
    text = io.TextIOWrapper(f, encoding="utf-8-sig", newline="")
    header_line = text.readline(MAX_ROW)
    text.seek(0)
    sep = delimiter or _sniff(header_line)
    reader = csv.reader(text, delimiter=sep)
    try:
        header = next(reader, None)
        if header is None:
            return
        twice = sorted({h for h in header if header.count(h) > 1})
        if twice:
            raise TableError(f"{path}:1: the column {twice[0]!r} is named twice in the header")
        width = len(header)
        for cells in reader:
            if not cells:
                continue  # a blank line
            if len(cells) != width:
                raise TableError(f"{path}:{reader.line_num}: {len(cells)} cells where the header has {width}")
            if check_cells and max(map(len, cells)) > MAX_CELL:
                raise TableError(f"{path}:{reader.line_num}: a cell over {MAX_CELL >> 10} KiB")
            yield reader.line_num, dict(zip(header, cells))  # noqa: B905 (lengths checked above)
    except csv.Error as e:  # a cell past the field limit among them
        problem = f"a cell over {MAX_CELL >> 10} KiB" if "field limit" in str(e) else str(e)
        raise TableError(f"{path}:{reader.line_num}: {problem}") from None
    except UnicodeDecodeError:
        raise TableError(f"{path}:{reader.line_num + 1}: not UTF-8 text") from None


def _sniff(header: str) -> str:
    counts = {d: header.count(d) for d in (",", ";", "\t", "|")}
    best = max(counts, key=lambda d: counts[d])
    return best if counts[best] else ","


def cell(path: Path, number: int, row: dict[str, Any], column: str | list[str]) -> Any:
    """The value of ``column`` (a path into the row, or a list: an id of several columns) in
    ``row``; None where it is absent. An oversized string is refused."""
    if isinstance(column, list):
        parts = [cell(path, number, row, c) for c in column]
        return None if any(p is None for p in parts) else "/".join(str(p) for p in parts)
    value = get(row, column)
    if isinstance(value, str) and len(value) > MAX_CELL:
        raise TableError(f"{path}:{number}: column {column!r} over {MAX_CELL >> 10} KiB")
    return value


def key_text(value: Any) -> str:
    """A key's text, so that 81 and "81" match."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value).strip()


class Join(msgspec.Struct, frozen=True):
    """A ``join`` entry resolved: its files' rows indexed by key (or kept in line order),
    holding only the columns it gives."""

    what: str  # the path or glob, for messages
    by: dict[str, str] | None  # our column -> theirs; None: line order
    fields: dict[str, str]  # our field -> their column
    by_key: dict[tuple[str, ...], dict[str, Any]]
    by_line: list[dict[str, Any]]


def files_of(pattern: str) -> list[Path]:
    """The files a join names: one file, or a glob's matches in name order."""
    if not glob.has_magic(pattern):
        return [Path(pattern)]
    found = sorted(glob.glob(pattern))
    if not found:
        raise TableError(f"{pattern}: no file matches")
    if len(found) > MAX_JOIN_FILES:
        raise TableError(f"{pattern}: more than {MAX_JOIN_FILES} files match")
    return [Path(p) for p in found]


def load_join(path: str, by: Mapping[str, str] | str, fields: Mapping[str, str]) -> Join:
    """A ``join`` entry's files read and indexed (module docstring)."""
    if isinstance(by, str) and by != LINE:
        raise TableError(f"{path}: join by {by!r}: a mapping {{our_column: their_column}} or 'line'")
    by_key: dict[tuple[str, ...], dict[str, Any]] = {}
    by_line: list[dict[str, Any]] = []
    theirs = None if isinstance(by, str) else list(by.values())
    for file in files_of(path):
        for number, row in rows(file):
            kept = {f: cell(file, number, row, c) for f, c in fields.items()}
            if theirs is None:
                by_line.append(kept)
                continue
            key = tuple(file.stem if c == FILE else key_text(cell(file, number, row, c)) for c in theirs)
            if key in by_key:
                raise TableError(f"{file}:{number}: key {'/'.join(key)[:80]!r} given by two rows of {path}")
            by_key[key] = kept
    return Join(path, None if isinstance(by, str) else dict(by), dict(fields), by_key, by_line)


def joined(join: Join, path: Path, number: int, index: int, row: dict[str, Any]) -> dict[str, Any]:
    """The fields ``join`` gives the ``index``-th data row (row ``number`` of ``path``)."""
    if join.by is None:
        if index >= len(join.by_line):
            raise TableError(f"{path}:{number}: {join.what} has only {len(join.by_line)} rows (join by line)")
        return join.by_line[index]
    key = tuple(key_text(v) if (v := cell(path, number, row, ours)) is not None else "" for ours in join.by)
    found = join.by_key.get(key)
    if found is None:
        shown = ", ".join(f"{t}={k}" for t, k in zip(join.by.values(), key, strict=True))
        raise TableError(f"{path}:{number}: no row in {join.what} with {shown[:120]}")
    return found


def conversation(value: Any, role: str) -> list[str] | str | None:
    """A text, or a conversation's turns: a list of strings as it is; chat messages as the
    texts of the user's (``role`` "input") or the assistant's messages."""
    if isinstance(value, str) or value is None:
        return value
    if not isinstance(value, list):
        return None if isinstance(value, (dict, bool)) else str(value)
    if all(isinstance(t, str) for t in value):
        return value
    roles = _USER_ROLES if role == "input" else _ANSWER_ROLES
    out = []
    for t in value:
        if not isinstance(t, dict):
            return None
        speaker, text = t.get("role", t.get("from")), t.get("content", t.get("value"))
        if speaker in roles and isinstance(text, str):
            out.append(text)
    return out


def records(path: Path, columns: Mapping[str, str | list[str]], joins: Iterable[Join], fields: Iterable[str],
            delimiter: str | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """(row number, field -> value) of each data row: ``fields`` read through ``columns``
    (a field not mapped: its own column) and the joins."""
    joins, fields = list(joins), list(fields)
    plan = [(f, c, isinstance(c, str) and "." not in c and "[" not in c)
            for f in fields for c in [columns.get(f, f)]]
    fixed = path.suffix.lower() in (".csv", ".tsv")  # every row has the header's columns
    for index, (number, row) in enumerate(rows(path, delimiter)):
        if fixed and index == 0:
            plan = [(f, c, plain) for f, c, plain in plan if not plain or c in row]
        out = dict.fromkeys(fields)
        for field, column, plain in plan:  # a plain name: one lookup (most fields, on most rows)
            value = row.get(column) if plain else cell(path, number, row, column)
            if plain and isinstance(value, str) and len(value) > MAX_CELL:
                raise TableError(f"{path}:{number}: column {column!r} over {MAX_CELL >> 10} KiB")
            out[field] = value
        for join in joins:
            out.update(joined(join, path, number, index, row))
        yield number, out
