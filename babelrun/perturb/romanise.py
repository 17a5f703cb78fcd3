"""Transliteration to Latin script, for the ``romanised`` probe (``perturb/probes.py``).

The transliterator is ``uroman`` (USC ISI's universal romaniser, pure Python, on PyPI):
ICU's transforms would be the first choice, but ``icu4py``'s wheels expose no transliterator
(only break iterators, locales and message formats) and PyICU has no wheel (it builds from
source against ICU's headers), so neither installs without a compiler. Japanese is the
exception: uroman reads kanji as Mandarin pinyin, so Japanese goes through ``cutlet``
(Hepburn romaji from the UniDic readings of each word, through MeCab's ``fugashi``), the
optional extra ``babelrun[romaji]`` (its MeCab part ships as wheels, not pure Python).

Per script (ISO 15924, ``core.languages.script`` of the item's language), ``SCRIPTS`` says
whether uroman's output was checked here to be a readable romanisation — each on a UDHR
sentence of the script (``tests/unit/test_romanised.py``). A language written in any other
script is refused by name when the manifest is checked: Chinese because uroman reads Han
characters as Mandarin pinyin with no tones and no spaces between words; Japanese where
``cutlet`` is not installed; the rest because no one checked them. Latin-script
languages need no transliteration: their romanised reference is the reference itself, and
the plan's no-op guard skips and counts the item.
"""

from __future__ import annotations

import functools
import unicodedata
from collections import Counter

# script -> what was checked (a UDHR article 1 sentence of the script, romanised by uroman)
SCRIPTS: dict[str, str] = {
    "Deva": "Hindi, Marathi, Nepali: sabhii manussyom ko gaurav …",
    "Beng": "Bengali: samasta maanuss sbaadhiinabhaabe …",
    "Guru": "Punjabi: saaraa manukkhii parivaar …",
    "Gujr": "Gujarati: pratisstthaa ane adhikaaronii …",
    "Taml": "Tamil: manitap piriviyinar cakalarum …",
    "Telu": "Telugu: pratipattisvatvamula vissayamuna …",
    "Cyrl": "Russian, Ukrainian, Kazakh: Vse lyudi rozhdayutsya svobodnymi …",
    "Grek": "Greek: Oloi oi anthropoi gennioundai eleutheroi …",
    "Arab": "Arabic, Persian: ywld jmy' alnas ahrara (consonants, as Arabic is written)",
    "Kore": "Korean: modeun inganeun taeeonal ddaebuteo …",
    "Jpan": "Japanese (cutlet): Subete no ningen wa, umarenagara ni shite jiyuu de ari …",
}
NEEDS_CUTLET = frozenset({"Jpan"})
REFUSED: dict[str, str] = {
    "Hans": "uroman reads Han characters as Mandarin pinyin with no tones and no word spaces",
    "Hant": "uroman reads Han characters as Mandarin pinyin with no tones and no word spaces",
    "Hani": "uroman reads Han characters as Mandarin pinyin with no tones and no word spaces",
}
NO_CUTLET = ("uroman reads kanji as Mandarin pinyin, and cutlet, which reads them in Japanese, is not "
             "installed: pip install 'babelrun[romaji]'")


def problem(lang: str) -> str | None:
    """Why ``lang`` cannot have a romanised probe, or None where it can (Latin script: a no-op)."""
    from ..core import languages

    written = languages.script(lang)
    if written in NEEDS_CUTLET and not _has_cutlet():
        return f"{lang} is written in {written}: {NO_CUTLET}"
    if written == "Latn" or written in SCRIPTS:
        return None
    why = REFUSED.get(written, "no romanisation of this script was checked")
    return f"{lang} is written in {written}: {why} (romanised: {', '.join(sorted(SCRIPTS))})"


def _has_cutlet() -> bool:
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("cutlet", "unidic_lite"))


@functools.lru_cache(maxsize=1)
def _cutlet():
    import cutlet

    return cutlet.Cutlet()  # Hepburn, foreign words in their original spelling where UniDic has one


@functools.lru_cache(maxsize=1)
def _uroman():  # loading its tables takes seconds: once per process, when a plan needs it
    import uroman

    return uroman.Uroman()


def transliterator(lang: str) -> str:
    """The library that romanises ``lang`` (recorded in the item's ``cue``)."""
    from ..core import languages

    return "cutlet" if languages.script(lang) in NEEDS_CUTLET else "uroman"


@functools.lru_cache(maxsize=4096)
def romanise(text: str, lang: str) -> str:
    """``text`` (in ``lang``) in Latin script: through cutlet in Japanese, else through uroman
    with the language's ISO 639-3 code; spaces tidied (none before punctuation)."""
    import langcodes

    from .script import tidy

    if transliterator(lang) == "cutlet":
        return tidy(str(_cutlet().romaji(text)))
    code = langcodes.Language.get(lang).to_alpha3()
    return tidy(" ".join(str(_uroman().romanize_string(text, lcode=code)).split()))


def main_script(text: str) -> str:
    """The Unicode script most of ``text``'s letters belong to, by the first word of their
    character names (``LATIN``, ``DEVANAGARI``, ``CJK``…); "" for a text with no letter."""
    names = Counter(unicodedata.name(ch, "?").split(" ", 1)[0] for ch in text if ch.isalpha())
    return names.most_common(1)[0][0] if names else ""
