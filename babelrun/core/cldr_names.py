"""CLDR's names of languages and territories (language-data, through langcodes), computed
once and kept with the package: what ``languages.name`` gives a tag (its English name) and
what ``perturb.script`` looks for in a text to drop (the country and language names written
in the text's language, its gazetteer).

language-data keeps every name in one Python module of 4.5 MB (``language_data.name_data``)
whose import alone costs an audit ~0.25 s of its plan, and each gazetteer is ~24,000 lookups
more. ``cldr_names.msgpack`` (~400 KB) holds the results for the tags most corpora use (every
language code's English name; the gazetteers of the 200 most spoken languages, CLDR's
languages and the bundled corpus's tags), each computed by the same functions from the
installed data. It is believed only where the
installed langcodes and language-data are those it was computed from (``fingerprint``, a
hash of their source files, ~10 ms); anywhere else, and for any tag it lacks, the callers
compute from language-data as before. ``python -m babelrun.corpus.cldr_table`` writes it
again (after an upgrade of either package); tests/unit/test_cldr_names.py checks every entry
against a computation from the installed packages.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import zlib
from pathlib import Path

import msgspec

TABLE = Path(__file__).with_name("cldr_names.msgpack")

# The source files the names are computed from: language-data's tables and langcodes' matching.
_SOURCES = (("language_data", ("name_data.py", "names.py", "language_lists.py")),
            ("langcodes", ("__init__.py", "data_dicts.py", "language_distance.py", "tag_parser.py")))


class Table(msgspec.Struct, frozen=True):
    fingerprint: str  # ``fingerprint()`` of the packages the names were computed from
    english: dict[str, str]  # tag -> ``langcodes.Language.get(tag).display_name()``
    gazetteers: dict[str, int]  # tag -> its list in ``lists`` (languages with few names of their own share one)
    lists: list[bytes]  # zlib-compressed msgpack lists of names, as ``script`` orders them


def fingerprint() -> str:
    h = hashlib.blake2b(digest_size=16)
    for package, files in _SOURCES:
        spec = importlib.util.find_spec(package)
        if spec is None or spec.origin is None:
            return ""
        folder = Path(spec.origin).parent
        for name in files:
            try:
                h.update(name.encode() + b"\0" + (folder / name).read_bytes())
            except OSError:
                return ""
    return h.hexdigest()


@functools.cache
def _table() -> Table | None:
    """The kept table, when it was computed from the installed packages; else None."""
    try:
        table = msgspec.msgpack.decode(TABLE.read_bytes(), type=Table)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None
    return table if table.fingerprint and table.fingerprint == fingerprint() else None


def english(tag: str) -> str | None:
    """``tag``'s English display name, where the table holds it."""
    table = _table()
    return None if table is None else table.english.get(tag)


def gazetteer(tag: str) -> tuple[str, ...] | None:
    """``tag``'s gazetteer (``script._place_and_language_names``), where the table holds it."""
    table = _table()
    if table is None:
        return None
    at = table.gazetteers.get(tag)
    if at is None or not 0 <= at < len(table.lists):
        return None
    return tuple(msgspec.msgpack.decode(zlib.decompress(table.lists[at]), type=list[str]))
