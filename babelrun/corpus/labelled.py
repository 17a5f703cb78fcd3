"""Labelled pairs in the LLMBar format: a JSON list of ``{input, output_1, output_2, label}``
where ``label`` (1 or 2) names the better output, judged by people or by an objective check.

These are not references to degrade: each pair is already an item whose gold label comes
from the data. ``path`` is one ``dataset.json`` (or any ``.json`` file) or a folder of
``<set>/dataset.json``; a pair's set is its folder's name (``LLMBar_Natural``; a set's own
folder works too), and its items carry the perturbation name ``pairs:<set>`` so cards show
each set beside the perturbations. Without ``path``: the project-written Judge-LS variants
bundled with babelrun (``judge_ls/README.md``).

Optional columns, for the Judge-LS protocol and self-preference (any row may carry them):

- ``id``: the pair's alignment id, the same for one pair in every language condition
  (default ``<set>-<index>``, which is what a plain LLMBar file gets); ``set``: its set;
- ``condition``: the language condition (default: the source's ``condition``, else its
  ``language``). A language tag (``zh``), or a named mix whose first part is the language
  (``zh-en-switched``: its items are Chinese, and its cards say ``pairs:<set>@zh-en-switched``
  so a mix never shares a card cell with its plain language); ``language`` overrides;
- ``model_1``, ``model_2``, ``family_1``, ``family_2``: which model (and model family) wrote
  each output, for the self-preference analysis;
- ``turns``: the earlier turns of a multi-turn conversation, oldest first, each
  ``{input, output_1, output_2}`` (the same two models' earlier answers); ``input`` and the
  outputs above are the last turn. What MT-Bench's multi-turn templates judge.

**Labels.** ``label`` is ``1``, ``2`` or ``"tie"`` (neither output better); a source's
``label_map`` maps a data set's own coding (``{0: tie, 1: 1, 2: 2}``). A row may carry
``labels`` instead (a list, one per annotator, or a mapping annotator → label), and a source's
``labels`` file (``read_label_file``: LLMBar-format JSON, or CSV ``item,label`` /
``item,annotator,label``) replaces the rows' own labels. The gold of several labels is the
**majority**: the label more annotators gave than any other; where two labels share the top
count there is no majority and the pair is left out of the plan (``no_majority`` counts them;
``babelrun agree`` reports them). A tie-labelled pair becomes an item of kind
``labelled_tie`` with output_1 in the reference's place and output_2 in the perturbed one's:
a ``tie`` verdict is its correct answer.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import msgspec

from ..core import languages
from ..core.items import LabelledPair
from ..errors import ManifestError
from . import pairtable
from .pairtable import TableError


class _Turn(msgspec.Struct):
    input: str
    output_1: str
    output_2: str


class _Row(msgspec.Struct):
    input: str
    output_1: str
    output_2: str
    label: int | str | None = None
    id: str | None = None
    set: str | None = None
    condition: str | None = None
    language: str | None = None
    model_1: str = ""
    model_2: str = ""
    family_1: str = ""
    family_2: str = ""
    turns: list[_Turn] = []  # earlier turns, oldest first (multi-turn pairs: MT-Bench)
    labels: list[int | str] | dict[str, int | str] | None = None  # one per annotator


LABELS = ("1", "2", "tie")  # babelrun's label coding: the data's output 1 or 2 better, or neither
NO_MAJORITY = "no majority"


def label_of(value: object, label_map: dict | None = None) -> str:
    """One label in babelrun's coding (``LABELS``); ValueError naming what it is otherwise."""
    if label_map:
        number = (int(value),) if isinstance(value, str) and value.lstrip("-").isdigit() else ()
        for key in (value, str(value), *number):
            if key in label_map:
                value = label_map[key]
                break
        else:
            raise ValueError(f"label {value!r} is not in label_map")
    text = str(value).strip().lower()
    if isinstance(value, bool) or text not in LABELS:
        hint = "" if label_map else " (label_map maps a data set's own coding)"
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "…"  # a file's cell: bounded
        raise ValueError(f"label {shown} is not 1, 2 or tie{hint}")
    return text


def majority(votes: list[str]) -> str | None:
    """The label more votes name than any other; None where the top count is shared (or no vote)."""
    counts = Counter(votes).most_common()
    if not counts or len(counts) > 1 and counts[0][1] == counts[1][1]:
        return None
    return counts[0][0]


def row_votes(row: _Row, label_map: dict | None = None) -> dict[str, str]:
    """A row's labels, annotator → label (``"0"``, ``"1"``, … for a list; ``""`` for one label)."""
    if row.labels is not None:
        items = row.labels.items() if isinstance(row.labels, dict) else ((str(i), v) for i, v in enumerate(row.labels))
        return {str(a): label_of(v, label_map) for a, v in items}
    if row.label is None:
        return {}
    return {"": label_of(row.label, label_map)}


def read_label_file(path: Path, label_map: dict | None = None, columns: dict | None = None,
                    join: list | None = None, delimiter: str | None = None) -> tuple[dict[str, dict[str, str]], dict]:
    """A label file as (pair id → {annotator: label}, pair id → (output_1, output_2) where the
    file has the texts). LLMBar-format JSON (a file or a folder of ``<set>/dataset.json``, rows
    with ``label`` or ``labels``), or any table the table reader reads (CSV, JSON Lines, or
    JSON with ``columns`` / ``join``): ``item,label`` / ``item,annotator,label`` as they are,
    other names through ``columns``. ValueError naming the file (and row) on a bad label."""
    if columns or join or path.suffix.lower() in (".csv", ".tsv", ".jsonl", ".ndjson"):
        return _table_labels(path, label_map, dict(columns or {}), list(join or []), delimiter)
    labels, texts = {}, {}
    for pair_id, _, row in rows_of(path):
        try:
            labels[pair_id] = row_votes(row, label_map)
        except ValueError as e:
            raise ValueError(f"{path}: pair {pair_id}: {e}") from None
        texts[pair_id] = (row.output_1, row.output_2)
    return labels, texts


def _table_labels(path: Path, label_map: dict | None, columns: dict, join: list,
                  delimiter: str | None) -> tuple[dict[str, dict[str, str]], dict]:
    if "id" not in columns:  # the item,label CSV: ``item`` is the id
        first = next(pairtable.rows(path, delimiter), None)
        if first is not None and "item" in first[1] and "id" not in first[1]:
            columns["id"] = "item"
    labels, texts = {}, {}
    for pid, _, row, v in table_pairs(path, columns, join, label_map, delimiter, texts_needed=False):
        labels[pid] = v
        if row.output_1 or row.output_2:
            texts[pid] = (row.output_1, row.output_2)
    if labels and not any(labels.values()):
        raise TableError(f"{path}: no row has a label (a label or labels column; map yours with columns:)")
    return labels, texts


def bundled_path() -> Path:
    """The project-written Judge-LS variants shipped in the package."""
    return Path(str(resources.files(__package__) / "judge_ls" / "llmbar-zh.json"))


def path_of(spec) -> Path:
    return bundled_path() if spec.path is None else Path(spec.path)


def _sets(spec) -> list[tuple[str, Path]]:
    return _sets_of(path_of(spec))  # a file, one set's folder, or a folder of sets


def _decode(path: Path) -> list[_Row]:
    try:
        with pairtable.open_regular(path) as f:  # a FIFO refused, never waited on
            data = pairtable.read_bounded(f, pairtable.MAX_DOCUMENT)
    except TableError as e:
        raise msgspec.DecodeError(str(e).removeprefix(f"{path}: ")) from None
    if data is None:
        raise msgspec.DecodeError(f"over {pairtable.MAX_DOCUMENT >> 30} GiB")
    try:
        return msgspec.json.decode(data, type=list[_Row])
    except RecursionError:  # the decoder's depth bound: bad input like any other
        raise msgspec.DecodeError("nested too deeply") from None


SOURCE = ("LLMBar's sets are in github.com/princeton-nlp/LLMBar, Dataset/<set>/dataset.json "
          "(MIT); any JSON list of {input, output_1, output_2, label} works")


def condition(name: str) -> tuple[str, str]:
    """(language, mix) of a condition name: ``zh`` -> ("zh", ""); ``zh-en-switched`` ->
    ("zh", "zh-en-switched"). ValueError when neither it nor its first part is a language."""
    try:
        return languages.normalize(name), ""
    except ValueError:
        pass
    first = name.split("-", 1)[0]
    if not first or len(name) > 64 or not all(c.isalnum() or c in "-_" for c in name):
        raise ValueError(f"{name!r} is not a language condition (a language tag, or a mix "
                         "named <language>-…, e.g. zh-en-switched)")
    try:
        return languages.normalize(first), name
    except ValueError:
        raise ValueError(f"{name!r}: a mix's name starts with its language, and {first!r} is not "
                         "a language code") from None


def _where(row: _Row, spec) -> tuple[str, str]:
    """The row's (language, mix)."""
    name = row.condition or spec.condition
    lang, mix = condition(name) if name else (languages.normalize(spec.language), "")
    return (languages.normalize(row.language) if row.language else lang), mix


def check(spec, where: str) -> None:
    if is_table(spec):
        _check_table(spec, where)
        return
    if spec.path is not None and not Path(spec.path).exists():
        raise ManifestError(f"{where}.path", f"not found: {spec.path} ({SOURCE})")
    sets = _sets(spec)
    if not sets:
        raise ManifestError(f"{where}.path", f"no dataset.json in {spec.path}")
    languages.checked(spec.language, f"{where}.language")
    if spec.condition is not None:
        try:
            condition(spec.condition)
        except ValueError as e:
            raise ManifestError(f"{where}.condition", str(e)) from None
    if spec.labels is not None:
        if not Path(spec.labels).exists():
            raise ManifestError(f"{where}.labels", f"not found: {spec.labels}")
        try:
            external = read_label_file(Path(spec.labels), spec.label_map)[0]
        except (ValueError, msgspec.DecodeError) as e:
            raise ManifestError(f"{where}.labels", str(e)) from None
        _check_matches(spec, external, f"{where}.labels")
    for _, path in sets:
        try:
            rows = _decode(path)
        except msgspec.DecodeError as e:
            raise ManifestError(f"{where}.path", f"{path}: not LLMBar pairs ({e})") from None
        for i, row in enumerate(rows):
            try:
                votes = row_votes(row, spec.label_map)
            except ValueError as e:
                raise ManifestError(f"{where}.path", f"{path}: pair {i}: {e}") from None
            if not votes and spec.labels is None:
                raise ManifestError(f"{where}.path", f"{path}: pair {i} has no label (label or labels)")
        for i, row in enumerate(rows):
            try:
                _where(row, spec)
            except ValueError as e:
                raise ManifestError(f"{where}.path", f"{path}: pair {i}: {e}") from None
            if row.id is not None and not row.id.strip() or len(row.id or "") > 200:
                raise ManifestError(f"{where}.path", f"{path}: pair {i}: id must be 1 to 200 characters")


def _check_matches(spec, external: dict[str, dict[str, str]], where: str) -> None:
    """A label file that names no pair is refused (its labels would be silently unused); one
    that names only some is a warning with the counts."""
    import sys

    try:
        ids = {pair_id for pair_id, _, _ in rows(spec)}
    except msgspec.DecodeError:
        return  # the pairs' own check names the file
    matched = len(external.keys() & ids)
    if not matched:
        theirs = f" (its first: {next(iter(external))!r}; the pairs' first: {next(iter(ids))!r})" if external and ids \
            else ""
        raise ManifestError(where, f"{spec.labels}: none of its {len(external):,} item ids is a pair's id{theirs}: "
                                   "its labels would be unused")
    if matched < len(external) or matched < len(ids):
        print(f"babelrun: warning: {where}: {matched:,} of the file's {len(external):,} item ids name a pair; "
              f"{len(ids) - matched:,} of the {len(ids):,} pairs keep their own labels", file=sys.stderr)


def rows(spec) -> Iterator[tuple[str, str, _Row]]:
    """(pair id, set, row) of every row, ids as ``read_pairs`` gives them (``agree`` too)."""
    if is_table(spec):
        for pair_id, name, row, _ in table_votes(spec):
            yield pair_id, name, row
        return
    for set_name, path in _sets(spec):
        for i, row in enumerate(_decode(path)):
            name = row.set or set_name
            yield row.id or f"{name}-{i:04d}", name, row


def rows_of(path: Path) -> Iterator[tuple[str, str, _Row]]:
    """``rows`` of an LLMBar-format file or folder."""
    for set_name, file in _sets_of(path):
        for i, row in enumerate(_decode(file)):
            name = row.set or set_name
            yield row.id or f"{name}-{i:04d}", name, row


def _sets_of(path: Path) -> list[tuple[str, Path]]:
    if path.is_dir() and (path / "dataset.json").is_file():
        path = path / "dataset.json"
    if path.is_file():
        return [(path.parent.name if path.name == "dataset.json" else path.stem, path)]
    return [(f.parent.name, f) for f in sorted(path.glob("*/dataset.json"))]


def votes(spec) -> Iterator[tuple[str, str, _Row, dict[str, str]]]:
    """(pair id, set, row, annotator → label) of every row: the source's label file where it
    names the pair, else the row's own labels."""
    external = read_label_file(Path(spec.labels), spec.label_map)[0] if spec.labels else {}
    if is_table(spec):
        for pair_id, name, row, own in table_votes(spec):
            yield pair_id, name, row, external.get(pair_id) or own
        return
    for pair_id, name, row in rows(spec):
        yield pair_id, name, row, external.get(pair_id) or row_votes(row, spec.label_map)


def gold(spec) -> Iterator[tuple[str, str, _Row, str | None]]:
    """(pair id, set, row, gold label or None where there is no majority) of every row."""
    for pair_id, name, row, v in votes(spec):
        yield pair_id, name, row, majority(list(v.values()))


def no_majority(spec) -> list[str]:
    """The ids of pairs left out for want of a majority label (``read_pairs`` skips them)."""
    return [pair_id for pair_id, _, _, g in gold(spec) if g is None]


def read_pairs(spec) -> Iterator[LabelledPair]:
    for pair_id, name, row, label in gold(spec):
        if label is None:
            continue  # no majority: left out, and counted (no_majority)
        lang, mix = _where(row, spec)
        first = (row.output_1, row.model_1, row.family_1)
        second = (row.output_2, row.model_2, row.family_2)
        better, worse = (second, first) if label == "2" else (first, second)
        turns = tuple((t.input, t.output_2, t.output_1) if label == "2" else (t.input, t.output_1, t.output_2)
                      for t in row.turns)
        yield LabelledPair(lang, pair_id, name, row.input, better[0], worse[0],
                           condition=mix, better_model=better[1], worse_model=worse[1],
                           better_family=better[2], worse_family=worse[2], tie=label == "tie", turns=turns)


def read(spec) -> Iterator:
    """Labelled pairs hold no references to perturb."""
    return iter(())


# -- tables in their own column names (pairtable) -------------------------------------------

TABLE_FIELDS = ("id", "input", "output_1", "output_2", "label", "labels", "annotator", "turn", "set",
                "condition", "language", "model_1", "model_2", "family_1", "family_2")
TEXTS = ("input", "output_1", "output_2")


def is_table(spec) -> bool:
    """Whether a source is read by the table reader: it maps columns or joins files, or its
    file is CSV / JSON Lines (an LLMBar ``.json`` without either keeps LLMBar's reading)."""
    path = getattr(spec, "path", None)
    return bool(getattr(spec, "columns", None) or getattr(spec, "join", None)) or (
        path is not None and Path(path).suffix.lower() in (".csv", ".tsv", ".jsonl", ".ndjson"))


def _turn_index(path: Path, number: int, value) -> int | None:
    if value in (None, ""):
        return None
    try:
        turn = int(pairtable.key_text(value))
    except ValueError:
        raise TableError(f"{path}:{number}: turn {value!r} is not a number (turns count from 1)") from None
    if not 1 <= turn <= 10_000:
        raise TableError(f"{path}:{number}: turn {turn} is not 1 to 10000")
    return turn - 1


def _texts(path: Path, number: int, rec: dict) -> tuple[list[str | None], list[_Turn]]:
    """The judged turn's (input, output_1, output_2) and the earlier turns (module docstring of
    pairtable: a list is a conversation, ``turn`` picks the judged one)."""
    if rec["input"] is None and rec["output_1"] is None and rec["output_2"] is None:
        return [None, None, None], []  # a label file's row: an id and labels only
    values = [pairtable.conversation(rec[f], f) for f in TEXTS]
    if not any(isinstance(v, list) for v in values):
        return [v if isinstance(v, str) else None for v in values], []
    index = _turn_index(path, number, rec.get("turn"))
    judged: list[str | None] = []
    for field, v in zip(TEXTS, values, strict=True):
        if isinstance(v, list):
            i = len(v) - 1 if index is None else index
            if not 0 <= i < len(v):
                raise TableError(f"{path}:{number}: {field} has {len(v)} turns, not turn {i + 1}")
            judged.append(v[i] if isinstance(v[i], str) else None)
        else:
            judged.append(v if isinstance(v, str) else None)
    earlier = [v[: (len(v) - 1 if index is None else index)] for v in values if isinstance(v, list)]
    if not any(earlier):
        return judged, []
    if len(earlier) < 3 or len({len(e) for e in earlier}) != 1:
        raise TableError(f"{path}:{number}: a later turn needs the earlier turns of input, output_1 "
                         "and output_2 (each a list)")
    return judged, [_Turn(q, a, b) for q, a, b in zip(*earlier, strict=True)]


class _Labels:
    """``label_of`` with the file's ``label_map``, remembered per value: a file has few label words."""

    def __init__(self, label_map: dict | None):
        self.label_map = label_map
        self.seen: dict[tuple[type, object], str] = {}

    def __call__(self, value: object) -> str:
        key = (type(value), value if isinstance(value, str | int | float) else repr(value))
        if key not in self.seen:
            self.seen[key] = label_of(value, self.label_map)  # ValueError for a bad one: never remembered
        return self.seen[key]


MAX_NAME_CHARS = 1000  # an id, an annotator or a label: a short name, never a text


def _row_labels(path: Path, number: int, rec: dict, decode: _Labels) -> dict[str, str]:
    for field in ("label", "annotator", "id"):
        if isinstance(rec[field], str) and len(rec[field]) > MAX_NAME_CHARS:
            raise TableError(f"{path}:{number}: a cell longer than {MAX_NAME_CHARS:,} characters ({field})")
    try:
        if rec["labels"] not in (None, ""):
            labels = rec["labels"]
            items = labels.items() if isinstance(labels, dict) else enumerate(labels) if isinstance(labels, list) \
                else None
            if items is None:
                raise ValueError("labels is a list or a mapping annotator -> label")
            return {str(a): decode(v) for a, v in items}
        label = rec["label"]
        if label is None or label == "":
            return {}
        annotator = rec["annotator"]
        return {annotator if isinstance(annotator, str) else str(annotator or ""): decode(label)}
    except ValueError as e:
        raise TableError(f"{path}:{number}: {e}") from None


_FLIP = {"1": "2", "2": "1"}


def table_votes(spec) -> Iterator[tuple[str, str, _Row, dict[str, str]]]:
    """(pair id, set, row, annotator -> label) of each pair of a table source."""
    yield from table_pairs(Path(spec.path), spec.columns, spec.join, spec.label_map, spec.delimiter)


def table_pairs(path: Path, columns: dict, join: list, label_map: dict | None, delimiter: str | None = None,
                texts_needed: bool = True) -> Iterator[tuple[str, str, _Row, dict[str, str]]]:
    """(pair id, set, row, annotator -> label) of each pair of a table. Rows that share an
    ``id`` (or, without one, the same texts) are one pair with several labels; a row that lists
    the pair's outputs the other way round has its label turned round too. Without
    ``texts_needed`` (a label file) a row may carry an id and labels only."""
    default_set = path.parent.name if path.stem == "dataset" else path.stem
    joins = [pairtable.load_join(j.path, j.by, j.columns) for j in join]
    pairs: dict[str, tuple[str, _Row, dict[str, str]]] = {}
    by_texts: dict[tuple, str] = {}
    decode = _Labels(label_map)
    for index, (number, rec) in enumerate(pairtable.records(path, columns, joins, TABLE_FIELDS, delimiter)):
        (question, first, second), turns = _texts(path, number, rec)
        has_id = rec.get("id") not in (None, "")
        if (texts_needed or not has_id) and (question is None or first is None or second is None):
            missing = next(f for f, v in zip(TEXTS, (question, first, second), strict=True) if v is None)
            what = "" if texts_needed else " and no id"
            raise TableError(f"{path}:{number}: no text for {missing}{what} (map the file's own with "
                             "columns: or join:)")
        name = str(rec["set"]) if rec.get("set") not in (None, "") else default_set
        votes = _row_labels(path, number, rec, decode)
        if has_id:
            pid = str(rec["id"]).strip()
        else:  # a pair is its texts, whichever output the row lists first
            key = (name, question, tuple((t.input, frozenset((t.output_1, t.output_2))) for t in turns),
                   frozenset((first, second)))
            pid = by_texts.setdefault(key, f"{name}-{index:04d}")
        if len(pid) > 200:
            raise TableError(f"{path}:{number}: an id is at most 200 characters")
        if pid not in pairs:
            models = {k: _opt(rec, k) or "" for k in ("model_1", "model_2", "family_1", "family_2")}
            row = _Row(question or "", first or "", second or "", id=pid, set=name, condition=_opt(rec, "condition"),
                       language=_opt(rec, "language"), turns=turns, **models)
            pairs[pid] = (name, row, {})
        _, row, merged = pairs[pid]
        if (first, second) == (row.output_2, row.output_1) and first != second and question == row.input:
            votes = {a: _FLIP.get(v, v) for a, v in votes.items()}
        elif (question, first, second) != (row.input, row.output_1, row.output_2) and question is not None:
            raise TableError(f"{path}:{number}: id {pid!r} names another pair's texts")
        for annotator, label in votes.items():
            slot = annotator if annotator or annotator not in merged else f"#{number}"
            if merged.get(slot, label) != label:
                raise TableError(f"{path}:{number}: annotator {annotator!r} labels pair {pid} twice, differently")
            merged[slot] = label
    for pid, (name, row, merged) in pairs.items():
        yield pid, name, row, merged


def _opt(rec: dict, field: str) -> str | None:
    return None if rec.get(field) in (None, "") else str(rec[field])


def _known(where: str, names, known) -> None:
    import difflib

    for name in names:
        if name not in known:
            close = difflib.get_close_matches(name, list(known), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ManifestError(f"{where}.{name}", f"unknown field{hint} (fields: {', '.join(known)})")


def _check_table(spec, where: str) -> None:
    """A table source's checks: its fields, its files, then every row read once."""
    if spec.path is None or not Path(spec.path).exists():
        raise ManifestError(f"{where}.path", f"not found: {spec.path} (a table of pairs: CSV, JSON or JSON Lines)")
    _known(f"{where}.columns", spec.columns, TABLE_FIELDS)
    for i, join in enumerate(spec.join):
        _known(f"{where}.join[{i}].columns", join.columns, TABLE_FIELDS)
        if isinstance(join.by, str) and join.by != pairtable.LINE:
            raise ManifestError(f"{where}.join[{i}].by", "a mapping {our_column: their_column} or 'line'")
    languages.checked(spec.language, f"{where}.language")
    if spec.delimiter is not None and len(spec.delimiter) != 1:
        raise ManifestError(f"{where}.delimiter", "one character, e.g. ';'")
    if spec.labels is not None:
        if not Path(spec.labels).exists():
            raise ManifestError(f"{where}.labels", f"not found: {spec.labels}")
        try:
            read_label_file(Path(spec.labels), spec.label_map)
        except (ValueError, msgspec.DecodeError) as e:
            raise ManifestError(f"{where}.labels", str(e)) from None
    try:
        pairs = 0
        for pair_id, _, row, votes in table_votes(spec):
            pairs += 1
            if not votes and spec.labels is None:
                raise ManifestError(f"{where}.path", f"{spec.path}: pair {pair_id} has no label (label or labels; "
                                                     "map yours with columns:)")
            try:
                _where(row, spec)
            except ValueError as e:
                raise ManifestError(f"{where}.path", f"{spec.path}: pair {pair_id}: {e}") from None
    except TableError as e:
        raise ManifestError(f"{where}.path", str(e)) from None
    if not pairs:
        raise ManifestError(f"{where}.path", f"{spec.path}: no pair in the file")
    if spec.labels is not None:
        _check_matches(spec, read_label_file(Path(spec.labels), spec.label_map)[0], f"{where}.labels")
