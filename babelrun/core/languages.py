"""Language codes, names, scripts and direction, from langcodes / language-data.

The manifest and corpora may name a language by BCP-47 (``hi``, ``zh-Hant``) or ISO 639-3
(``hin``); everything inside babelrun uses the standardised BCP-47 tag langcodes returns,
with individual languages folded into their macrolanguage where that is the usual name
(``swh`` -> ``sw``, ``cmn`` -> ``zh``, ``arb`` -> ``ar``, ``pes`` -> ``fa``), so that Aya's,
FLORES's and UDHR's codes meet the manifest's.
"""

from __future__ import annotations

import functools

import langcodes

from ..errors import ManifestError
from . import cldr_names

# Scripts written right to left (ISO 15924). A property of the Unicode scripts, not a table
# of languages: the language -> script step comes from language-data.
_RTL_SCRIPTS = frozenset(
    {"Arab", "Hebr", "Syrc", "Thaa", "Nkoo", "Adlm", "Mand", "Samr", "Rohg", "Yezi", "Mend"}
)


@functools.lru_cache(maxsize=4096)
def normalize(code: str) -> str:
    """Return the standard BCP-47 tag for ``code``; ``ValueError`` if it is not a language."""
    code = code.strip()
    if not code or not langcodes.tag_is_valid(code):
        raise ValueError(f"{code!r} is not a valid language code")
    tag = langcodes.standardize_tag(code, macro=True)
    if not langcodes.Language.get(tag).is_valid():
        raise ValueError(f"{code!r} is not a known language")
    return tag


# Codes that are valid BCP-47 but name no language a judge can be audited in: undetermined,
# multiple, no linguistic content, uncoded, and the private-use range qaa–qtz.
_NOT_A_LANGUAGE = {"und": "undetermined", "mul": "multiple languages", "zxx": "no linguistic content",
                   "mis": "an uncoded language"}


@functools.lru_cache(maxsize=4096)
def checked(code: str, where: str) -> str:
    """``normalize(code)``, or a ManifestError naming the manifest field ``where``; codes that
    name no particular language (``und``, ``mul``, ``qaa``…) are refused here."""
    try:
        tag = normalize(code)
    except ValueError as e:
        raise ManifestError(where, str(e)) from None
    base = tag.split("-")[0].lower()
    if base in _NOT_A_LANGUAGE or (len(base) == 3 and "qaa" <= base <= "qtz"):
        what = _NOT_A_LANGUAGE.get(base, "a private-use code")
        raise ManifestError(where, f"{code!r} names no particular language ({what})")
    return tag


def name(code: str) -> str:
    """English name of the language (``Hindi``, ``Swahili``): langcodes' display name, from
    the package's table where it holds it for the installed language-data (``cldr_names``)."""
    kept = cldr_names.english(code)
    return kept if kept is not None else langcodes.Language.get(code).display_name()


@functools.lru_cache(maxsize=4096)
def script(code: str) -> str:
    """ISO 15924 script the language is usually written in (``Deva``, ``Hans``)."""
    return langcodes.Language.get(code).maximize().script or "Zyyy"


def direction(code: str) -> str:
    """``rtl`` or ``ltr``."""
    return "rtl" if script(code) in _RTL_SCRIPTS else "ltr"
