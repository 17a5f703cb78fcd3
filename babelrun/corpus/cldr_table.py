"""``core/cldr_names.msgpack`` computed from the installed langcodes and language-data (see
``core.cldr_names``): ``python -m babelrun.corpus.cldr_table`` writes it. Here, above
``perturb`` and beside the bundled corpus, because it computes what ``perturb.script`` and
``core.languages`` would, for the tags a corpus most often has."""

from __future__ import annotations

import zlib

import msgspec

from ..core import languages
from ..core.cldr_names import TABLE, Table, fingerprint
from ..perturb import script
from . import bundled

MOST_SPOKEN = 200  # the languages with the most speakers (language-data's population figures) given a gazetteer


def tags() -> tuple[list[str], list[str]]:
    """The tags the table is computed for: (English names, gazetteers). English names: every
    language code language-data names, and the gazetteers' tags; gazetteers: the
    ``MOST_SPOKEN`` languages, CLDR's languages and the bundled corpus's tags (~2 KB each:
    the ~700 languages with population figures would make the table 1 MB)."""
    from language_data.language_lists import CLDR_LANGUAGES
    from language_data.name_data import CODE_TO_NAMES
    from language_data.population_data import LANGUAGE_SPEAKING_POPULATION as speakers

    spoken: list[str] = []
    for code in sorted((c for c in speakers if "-" not in c), key=lambda c: (-speakers[c], c)):
        try:
            tag = languages.normalize(code)
        except ValueError:
            continue
        if tag not in spoken:
            spoken.append(tag)
        if len(spoken) == MOST_SPOKEN:
            break
    corpus = {languages.normalize(ref.lang) for ref in bundled.read(None)}
    gazetteers = set(spoken) | corpus | {languages.normalize(code) for code in CLDR_LANGUAGES}
    return sorted(gazetteers | set(CODE_TO_NAMES)), sorted(gazetteers)


def build() -> Table:
    """The table, computed from the installed packages by the functions its readers fall back on."""
    import langcodes

    english_tags, gazetteer_tags = tags()
    english_names = {}
    for tag in english_tags:
        try:
            english_names[tag] = langcodes.Language.get(tag).display_name()
        except (ValueError, LookupError):  # a code langcodes cannot parse: computed by the caller, if ever asked
            continue
    at: dict[tuple[str, ...], int] = {}
    gazetteers = {tag: at.setdefault(script.computed_gazetteer(tag), len(at)) for tag in gazetteer_tags}
    lists = [zlib.compress(msgspec.msgpack.encode(list(names)), 9) for names in at]  # in index order
    return Table(fingerprint(), english_names, gazetteers, lists)


if __name__ == "__main__":
    TABLE.write_bytes(msgspec.msgpack.encode(build()))
    print(f"{TABLE}: {TABLE.stat().st_size:,} bytes")
