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
"""

from __future__ import annotations

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
    label: int
    id: str | None = None
    set: str | None = None
    condition: str | None = None
    language: str | None = None
    model_1: str = ""
    model_2: str = ""
    family_1: str = ""
    family_2: str = ""
    turns: list[_Turn] = []  # earlier turns, oldest first (multi-turn pairs: MT-Bench)


def bundled_path() -> Path:
    """The project-written Judge-LS variants shipped in the package."""
    return Path(str(resources.files(__package__) / "judge_ls" / "llmbar-zh.json"))


def path_of(spec) -> Path:
    return bundled_path() if spec.path is None else Path(spec.path)


def _sets(spec) -> list[tuple[str, Path]]:
    path = path_of(spec)
    if path.is_dir() and (path / "dataset.json").is_file():
        path = path / "dataset.json"  # one set's folder
    if path.is_file():
        return [(path.parent.name if path.name == "dataset.json" else path.stem, path)]
    return [(f.parent.name, f) for f in sorted(path.glob("*/dataset.json"))]


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
    for _, path in sets:
        try:
            rows = _decode(path)
        except msgspec.DecodeError as e:
            raise ManifestError(f"{where}.path", f"{path}: not LLMBar pairs ({e})") from None
        bad = [i for i, r in enumerate(rows) if r.label not in (1, 2)]
        if bad:
            raise ManifestError(f"{where}.path", f"{path}: pair {bad[0]} has label {rows[bad[0]].label}, not 1 or 2")
        for i, row in enumerate(rows):
            try:
                _where(row, spec)
            except ValueError as e:
                raise ManifestError(f"{where}.path", f"{path}: pair {i}: {e}") from None
            if row.id is not None and not row.id.strip() or len(row.id or "") > 200:
                raise ManifestError(f"{where}.path", f"{path}: pair {i}: id must be 1 to 200 characters")


def rows(spec) -> Iterator[tuple[str, str, _Row]]:
    """(pair id, set, row) of every row, ids as ``read_pairs`` gives them (``agree`` too)."""
    for set_name, path in _sets(spec):
        for i, row in enumerate(_decode(path)):
            name = row.set or set_name
            yield row.id or f"{name}-{i:04d}", name, row


def read_pairs(spec) -> Iterator[LabelledPair]:
    for pair_id, name, row in rows(spec):
        lang, mix = _where(row, spec)
        first = (row.output_1, row.model_1, row.family_1)
        second = (row.output_2, row.model_2, row.family_2)
        better, worse = (first, second) if row.label == 1 else (second, first)
        turns = tuple((t.input, t.output_1, t.output_2) if row.label == 1 else (t.input, t.output_2, t.output_1)
                      for t in row.turns)
        yield LabelledPair(lang, pair_id, name, row.input, better[0], worse[0],
                           condition=mix, better_model=better[1], worse_model=worse[1],
                           better_family=better[2], worse_family=worse[2], turns=turns)


def read(spec) -> Iterator:
    """Labelled pairs hold no references to perturb."""
    return iter(())
