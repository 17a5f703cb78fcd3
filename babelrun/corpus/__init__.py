"""Corpus sources: each yields ``Reference(lang, ref_id, prompt, response)``.

Every loader module has the same two verbs, so adding a format copies no plumbing:

- ``check(spec, where)``: raise ``ManifestError`` for a source that cannot be read;
- ``read(spec)``: iterate its references (``lang`` already a standard BCP-47 tag).

Loaders: ``bundled`` (inside the package), ``table`` (JSONL / CSV / Parquet with a column
map), ``udhr``, ``aya``, ``flores``; and ``labelled`` (LLMBar-style pairs with a gold label
from the data), which yields ``LabelledPair`` items instead of references.

``select`` applies the language choice and the filters, then takes a seeded random sample
of ``references_per_language`` per language.
"""

from __future__ import annotations

import hashlib
import importlib
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import msgspec

from ..agentic.trajectory import Trajectory
from ..core import languages
from ..core.items import LabelledPair, Reference, Removed
from ..perturb import script
from ..spec import LabelledPairsSource, TrajectoriesSource
from . import labelled

if TYPE_CHECKING:
    from ..spec import CorpusSource, Manifest

__all__ = ["LabelledPair", "Reference", "Removed", "Selection", "available_languages", "check_source",
           "has_reference_answers", "read", "read_pairs", "read_trajectories", "select"]


# The manifest's ``kind`` -> the module that reads it (imported when first used).
_LOADERS = {"bundled": "bundled", "jsonl": "table", "csv": "table", "parquet": "table",
            "udhr": "udhr", "aya": "aya", "flores": "flores", "labelled_pairs": "labelled",
            "trajectories": "trajectories"}


def _loader(source: CorpusSource):
    return importlib.import_module(f".{_LOADERS[type(source).__struct_config__.tag]}", __package__)


def check_source(source: CorpusSource, manifest: Manifest, where: str) -> None:
    _loader(source).check(source, where)


def has_reference_answers(source: CorpusSource) -> bool:
    """Whether a source gives every reference a separate ``reference_answer`` (the table
    formats' optional column; no other format has one)."""
    loader = _loader(source)
    return hasattr(loader, "has_reference_answers") and loader.has_reference_answers(source)


def read(sources: Iterable[CorpusSource]) -> Iterator[Reference]:
    for source in sources:
        yield from _loader(source).read(source)


def read_pairs(sources: Iterable[CorpusSource]) -> Iterator[LabelledPair]:
    for source in sources:
        if isinstance(source, LabelledPairsSource):
            yield from _sample_pairs(source, labelled.read_pairs(source))


def read_trajectories(sources: Iterable[CorpusSource]) -> Iterator[Trajectory]:
    from . import trajectories

    for source in sources:
        if isinstance(source, TrajectoriesSource):
            yield from trajectories.read_trajectories(source)


def available_languages(manifest: Manifest) -> set[str]:
    sources = manifest.corpus.sources
    return ({ref.lang for ref in read(sources)} | {pair.lang for pair in read_pairs(sources)}
            | {t.lang for t in read_trajectories(sources)})


def _rank(seed: int, *key: str) -> bytes:
    # A seeded hash order: the sample is random, reproducible, and mostly stable when the
    # corpus grows (adding references does not reshuffle the ones already chosen).
    return hashlib.blake2b("\x1f".join((str(seed), *key)).encode(), digest_size=8).digest()


def _sample_pairs(source: LabelledPairsSource, pairs: Iterator[LabelledPair]) -> Iterator[LabelledPair]:
    if source.pairs_per_set is None:
        yield from pairs
        return
    # Per set and condition, ranked by the alignment id alone: every condition of a source
    # keeps the same pairs, so a sample stays aligned across languages.
    by_set: dict[tuple[str, str, str], list[LabelledPair]] = defaultdict(list)
    for pair in pairs:
        by_set[(pair.set_name, pair.lang, pair.condition)].append(pair)
    for key in sorted(by_set):
        chosen = sorted(by_set[key], key=lambda p: _rank(0, p.pair_id))[: source.pairs_per_set]
        yield from sorted(chosen, key=lambda p: p.pair_id)


class Selection(msgspec.Struct, frozen=True):
    references: list[Reference]
    pairs: list[LabelledPair]
    removed: list[Removed]
    trajectories: list[Trajectory] = []  # sampled per language like references


def _too_short(ref: Reference, manifest: Manifest) -> str | None:
    corpus = manifest.corpus
    if corpus.min_chars and len(ref.response) < corpus.min_chars:
        return f"fewer than {corpus.min_chars} characters"
    if corpus.min_sentences and len(script.sentences(ref.response, ref.lang)) < corpus.min_sentences:
        return f"fewer than {corpus.min_sentences} sentences"
    return None


def _duplicate(ref: Reference, kept: dict[str, Reference]) -> str | None:
    """Why ``ref`` repeats the id of a reference already kept (the first source wins; the
    repeat is counted in plan.json and the report, never silently merged)."""
    if ref.ref_id not in kept:
        return None
    same = kept[ref.ref_id].response == ref.response
    return ("duplicates of an earlier source's reference" if same
            else "the id of an earlier source's reference, another text")


def select(manifest: Manifest) -> Selection:
    """What to audit: the chosen languages; per language, the references that pass the
    filters, a seeded random sample of ``references_per_language`` of them (not the first
    n); and the labelled pairs of those languages."""
    wanted = manifest.corpus.languages
    wanted = None if wanted == "all" else {languages.normalize(c) for c in wanted}
    by_lang: dict[str, dict[str, Reference]] = defaultdict(dict)
    removed: Counter = Counter()
    for ref in read(manifest.corpus.sources):
        if wanted is not None and ref.lang not in wanted:
            continue
        reason = _duplicate(ref, by_lang[ref.lang]) or _too_short(ref, manifest)
        if reason:
            removed[(ref.lang, reason)] += 1
            continue
        by_lang[ref.lang][ref.ref_id] = ref
    n = manifest.corpus.references_per_language
    chosen: list[Reference] = []
    for lang in sorted(by_lang):
        refs = sorted(by_lang[lang].values(), key=lambda r: _rank(manifest.seed, r.lang, r.ref_id))
        chosen.extend(sorted(refs[:n], key=lambda r: r.ref_id))
    pairs = [p for p in read_pairs(manifest.corpus.sources) if wanted is None or p.lang in wanted]
    return Selection(chosen, pairs, [Removed(lang, reason, k) for (lang, reason), k in sorted(removed.items())],
                     _sample_trajectories(manifest, wanted))


def _sample_trajectories(manifest: Manifest, wanted: set[str] | None) -> list[Trajectory]:
    """The chosen languages' trajectories (the first source wins an id), a seeded random
    sample of ``references_per_language`` per language; corpus length filters are for text."""
    by_lang: dict[str, dict[str, Trajectory]] = defaultdict(dict)
    for traj in read_trajectories(manifest.corpus.sources):
        if wanted is None or traj.lang in wanted:
            by_lang[traj.lang].setdefault(traj.traj_id, traj)
    n = manifest.corpus.references_per_language
    chosen = []
    for lang in sorted(by_lang):
        ranked = sorted(by_lang[lang].values(), key=lambda t: _rank(manifest.seed, "agentic", t.lang, t.traj_id))
        chosen.extend(sorted(ranked[:n], key=lambda t: t.traj_id))
    return chosen
