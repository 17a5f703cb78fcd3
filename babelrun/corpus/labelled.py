"""Labelled pairs in the LLMBar format: a JSON list of ``{input, output_1, output_2, label}``
where ``label`` (1 or 2) names the better output, judged by people or by an objective check.

These are not references to degrade: each pair is already an item whose gold label comes
from the data. ``path`` is one ``dataset.json`` or a folder of ``<set>/dataset.json``; a
pair's set is its folder's name (``LLMBar_Natural``; a set's own folder works too), and its
items carry the perturbation
name ``pairs:<set>`` so cards show each set beside the perturbations.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import msgspec

from ..core import languages
from ..core.items import LabelledPair
from ..errors import ManifestError


class _Row(msgspec.Struct):
    input: str
    output_1: str
    output_2: str
    label: int


def _sets(spec) -> list[tuple[str, Path]]:
    path = Path(spec.path)
    if path.is_dir() and (path / "dataset.json").is_file():
        path = path / "dataset.json"  # one set's folder
    if path.is_file():
        return [(path.parent.name if path.name == "dataset.json" else path.stem, path)]
    return [(f.parent.name, f) for f in sorted(path.glob("*/dataset.json"))]


def _decode(path: Path) -> list[_Row]:
    return msgspec.json.decode(path.read_bytes(), type=list[_Row])


SOURCE = ("LLMBar's sets are in github.com/princeton-nlp/LLMBar, Dataset/<set>/dataset.json "
          "(MIT); any JSON list of {input, output_1, output_2, label} works")


def check(spec, where: str) -> None:
    if not Path(spec.path).exists():
        raise ManifestError(f"{where}.path", f"not found: {spec.path} ({SOURCE})")
    sets = _sets(spec)
    if not sets:
        raise ManifestError(f"{where}.path", f"no dataset.json in {spec.path}")
    languages.checked(spec.language, f"{where}.language")
    for _, path in sets:
        try:
            rows = _decode(path)
        except msgspec.DecodeError as e:
            raise ManifestError(f"{where}.path", f"{path}: not LLMBar pairs ({e})") from None
        bad = [i for i, r in enumerate(rows) if r.label not in (1, 2)]
        if bad:
            raise ManifestError(f"{where}.path", f"{path}: pair {bad[0]} has label {rows[bad[0]].label}, not 1 or 2")


def read_pairs(spec) -> Iterator[LabelledPair]:
    lang = languages.normalize(spec.language)
    for set_name, path in _sets(spec):
        for i, row in enumerate(_decode(path)):
            better, worse = (row.output_1, row.output_2) if row.label == 1 else (row.output_2, row.output_1)
            yield LabelledPair(lang, f"{set_name}-{i:04d}", set_name, row.input, better, worse)


def read(spec) -> Iterator:
    """Labelled pairs hold no references to perturb."""
    return iter(())
