"""Corpus sources: each yields ``Reference(lang, ref_id, prompt, response)``.

Every loader module has the same two verbs, so adding a format copies no plumbing:

- ``check(spec, where)``: raise ``ManifestError`` for a source that cannot be read;
- ``read(spec)``: iterate its references (``lang`` already a standard BCP-47 tag).

``select`` then takes a seeded sample of ``references_per_language`` per language.
"""

from __future__ import annotations

import hashlib
import importlib
from collections import defaultdict
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:
    from ..manifest import CorpusSource, Manifest


class Reference(msgspec.Struct, frozen=True):
    """A prompt and a good answer to it, in one language."""

    lang: str
    ref_id: str
    prompt: str
    response: str


# The manifest's ``kind`` -> the module that reads it (imported when first used).
_LOADERS = {"bundled": "bundled", "jsonl": "table", "csv": "table", "parquet": "table",
            "udhr": "udhr", "aya": "aya", "flores": "flores", "labelled_pairs": "labelled"}


def _loader(source: CorpusSource):
    return importlib.import_module(f".{_LOADERS[type(source).__struct_config__.tag]}", __package__)


def check_source(source: CorpusSource, manifest: Manifest, where: str) -> None:
    _loader(source).check(source, where)


def read(sources: Iterable[CorpusSource]) -> Iterator[Reference]:
    for source in sources:
        yield from _loader(source).read(source)


def available_languages(manifest: Manifest) -> set[str]:
    return {ref.lang for ref in read(manifest.corpus.sources)}


def _sample_rank(seed: int, ref: Reference) -> bytes:
    # A seeded hash order: the sample is random, reproducible, and mostly stable when the
    # corpus grows (adding references does not reshuffle the ones already chosen).
    return hashlib.blake2b(f"{seed}\x1f{ref.lang}\x1f{ref.ref_id}".encode(), digest_size=8).digest()


def select(manifest: Manifest) -> list[Reference]:
    """The references to audit: the chosen languages, a seeded sample of n per language."""
    from .. import languages

    wanted = manifest.corpus.languages
    wanted = None if wanted == "all" else {languages.normalize(c) for c in wanted}
    by_lang: dict[str, dict[str, Reference]] = defaultdict(dict)
    for ref in read(manifest.corpus.sources):
        if wanted is None or ref.lang in wanted:
            by_lang[ref.lang].setdefault(ref.ref_id, ref)  # first source wins on a repeated id
    n = manifest.corpus.references_per_language
    chosen: list[Reference] = []
    for lang in sorted(by_lang):
        refs = sorted(by_lang[lang].values(), key=lambda r: _sample_rank(manifest.seed, r))
        chosen.extend(sorted(refs[:n], key=lambda r: r.ref_id))
    return chosen
