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

import csv
from collections import Counter
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import msgspec

from ..core import languages
from ..core.items import LabelledPair
from ..errors import ManifestError


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
        raise ValueError(f"label {value!r} is not 1, 2 or tie{hint}")
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


def read_label_file(path: Path, label_map: dict | None = None) -> tuple[dict[str, dict[str, str]], dict]:
    """A label file as (pair id → {annotator: label}, pair id → (output_1, output_2) where the
    file has the texts). LLMBar-format JSON (a file or a folder of ``<set>/dataset.json``, rows
    with ``label`` or ``labels``) or CSV with the columns ``item,label`` or
    ``item,annotator,label``. ValueError naming the file (and line) on a bad label."""
    if not path.is_dir():
        _regular(path)
    if path.suffix.lower() == ".csv":
        return _read_csv(path, label_map), {}
    labels, texts = {}, {}
    for pair_id, _, row in rows_of(path):
        try:
            labels[pair_id] = row_votes(row, label_map)
        except ValueError as e:
            raise ValueError(f"{path}: pair {pair_id}: {e}") from None
        texts[pair_id] = (row.output_1, row.output_2)
    return labels, texts


MAX_CELL_CHARS = 1000  # an item id, an annotator or a label: a short name, never a text


def _regular(path: Path) -> None:
    """A label file is a regular file: a FIFO or a device is refused before it is opened for
    reading (``stat`` does not block), so validate never waits on one."""
    import stat

    try:
        mode = path.stat().st_mode
    except OSError as e:
        raise ValueError(f"{path}: cannot read ({e.strerror or e})") from None
    if not stat.S_ISREG(mode):
        raise ValueError(f"{path}: not a regular file (a FIFO, a device or a socket): refused")


def _read_csv(path: Path, label_map: dict | None) -> dict[str, dict[str, str]]:
    """``item,label`` or ``item,annotator,label`` rows; a short or long row, a cell past
    ``MAX_CELL_CHARS`` (or the csv module's own limit) and a column named twice are refused
    with one line naming the file and line."""
    out: dict[str, dict[str, str]] = {}
    with path.open(newline="", encoding="utf-8-sig") as f:
        reader = csv.reader(f)
        try:
            header = [h.strip() for h in next(reader, [])]
            twice = sorted({h for h in header if header.count(h) > 1})
            if twice:
                raise ValueError(f"{path}: the column {twice[0]!r} is named twice in the header")
            if not {"item", "label"} <= set(header):
                raise ValueError(f"{path}: a labels CSV needs the columns item,label (or item,annotator,label)")
            fields = set(header)
            for cells in reader:
                if not cells:
                    continue
                if len(cells) != len(header):
                    raise ValueError(f"{path}:{reader.line_num}: {len(cells)} cells where the header has "
                                     f"{len(header)}")
                if any(len(c) > MAX_CELL_CHARS for c in cells):
                    raise ValueError(f"{path}:{reader.line_num}: a cell longer than {MAX_CELL_CHARS:,} characters")
                row = dict(zip(header, cells, strict=True))
                _add_vote(out, row, fields, label_map, path, reader.line_num)
        except csv.Error as e:
            raise ValueError(f"{path}:{reader.line_num}: not a readable CSV row ({e})") from None
    return out


def _add_vote(out: dict[str, dict[str, str]], row: dict[str, str], fields: set[str], label_map: dict | None,
              path: Path, line: int) -> None:
    try:
        label = label_of(row["label"].strip(), label_map)
    except ValueError as e:
        raise ValueError(f"{path}:{line}: {e}") from None
    annotator = (row.get("annotator") or "").strip() if "annotator" in fields else ""
    votes = out.setdefault(row["item"].strip(), {})
    if annotator in votes and votes[annotator] != label and "annotator" in fields:
        raise ValueError(f"{path}:{line}: annotator {annotator!r} labels "
                         f"item {row['item'].strip()} twice, differently")
    if annotator in votes and votes[annotator] != label:
        raise ValueError(f"{path}: item {row['item'].strip()} is labelled both "
                         f"{votes[annotator]} and {label}")
    votes[annotator] = label




def bundled_path() -> Path:
    """The project-written Judge-LS variants shipped in the package."""
    return Path(str(resources.files(__package__) / "judge_ls" / "llmbar-zh.json"))


def path_of(spec) -> Path:
    return bundled_path() if spec.path is None else Path(spec.path)


def _sets(spec) -> list[tuple[str, Path]]:
    return _sets_of(path_of(spec))  # a file, one set's folder, or a folder of sets


def _decode(path: Path) -> list[_Row]:
    try:
        return msgspec.json.decode(path.read_bytes(), type=list[_Row])
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
