r"""Script-aware text handling shared by every perturbation.

Sentences
    A sentence ends at a run of terminators plus any closing quotes or brackets. The
    terminators are every Unicode ``Sentence_Terminal`` character (``\p{STerm}``, from the
    ``regex`` module's tables: ``. ! ? 。 ؟ ۔ । ॥ ። ။ ។ ᙮ ᠃ 𑅁 ꓿ …``, ~170 of them) and the
    Tibetan shads (``།`` …, only ``Terminal_Punctuation`` in Unicode but Tibetan's sentence
    mark), with the exceptions measured on the 512 UDHR declarations and written as data in
    ``rules.py`` (each with its source): clause marks that Unicode lists as terminals are not
    (Myanmar's little section ``၊``, Balinese ``᭞``; Javanese ``꧈`` only after pangkon), and
    full stops typed with other characters are (Ethiopic ``፡፡``, an Armenian colon).
    A script's own terminal (danda, shad, ``።``, ``။``, CJK ``。``: anything outside ASCII
    and the shared punctuation blocks) ends a sentence wherever it stands, since those
    scripts often write the next sentence straight after it; the shared ones (``. ! ?``)
    when followed by whitespace, a script's word separator (Ethiopic ``፡``) or the end of
    the text. Either way the next word must not start with a lower-case letter of a cased
    script (so ``3.5`` and ``e.g. the`` do not split; CJK terminators excepted). "Cased" asks
    whether the script has case at all: a letter with a distinct capital, outside Georgian
    (whose Mkhedruli letters Python calls lower-case, though Georgian is written caseless).
    Given the language, a full stop also stays inside a sentence after one of its
    abbreviations (CLDR's suppressions: ``z. B.``, ``Nr.``, ``Dr.``, ``p. ex.``, ``núm.``,
    ``т. е.``), an initial (``J. F. Kennedy``) and, where ordinals are written ``9.``
    (de, lb, da, nb, fi), an ordinal before a month or after an article (``am 9. November``,
    ``im 20. Jahrhundert``, ``seine 9. Sinfonie``). Scripts written without spaces between
    words, whose spaces separate phrases (Thai, Lao, Tai Tham, Khmer, Myanmar, Tibetan:
    ``rules.PHRASE_SPACED_SCRIPTS``), never end a sentence at a space; a line break between
    two of their letters ends one (a paragraph's end: Thai and Tai Tham mark sentences with
    nothing else, and a text with rare marks has its paragraphs). A piece
    with no word in it (a stray ``.``) stays with the sentence before. Each sentence keeps
    the separator that followed it, so ``"".join`` of the pieces gives back the text exactly.
    ICU's sentence rules (the ``icu4py`` wheel, root and language locales) were measured
    against this on the same sample (``python tests/unit/test_segmentation.py icu``): they agree
    with an independent per-declaration check on 92 % of units against 99.9 % here: they
    split ``am 9. November`` and at Myanmar ``၊``, find one sentence a unit in Thai, Tai Tham
    and Tibetan, and none at ``፡፡``; so ICU is not used.
    A text's last piece may have no terminator (a fragment); ``is_whole`` tells a sentence
    that can stand anywhere from such a fragment (or from one starting with a lower-case
    letter, which would join the sentence before it), so that ``shuffle`` and
    ``repeat_pad`` never move or repeat one into a run-on.

Numbers
    A numeric token is a run of decimal digits of any Unicode digit system, with ``.``/``,``
    (and the Arabic ``٫ ٬``) between digit groups. ``digits_like`` writes a value in the digit
    system of the token it replaces (Devanagari stays Devanagari, Arabic-Indic stays
    Arabic-Indic).

Entity-like tokens (the fallback for caseless scripts)
    1. In cased scripts (Latin, Cyrillic, Greek, …): a run of capitalised words, except a
       single capitalised word that starts its sentence; and any all-capitals acronym.
       Words joined by an apostrophe or a hyphen (``-``, and the Unicode hyphens U+2010 and
       U+2011 that Yoruba, Igbo, Xhosa, Kazakh and Ukrainian texts use) are one word, so a
       run never takes half of ``Àjọ‐ìsọ̀kan`` or ``Na‐akwado``.
    2. In every script: names of countries/territories and languages written in the text's
       own language, from CLDR via language-data (``भारत``, ``مصر``, ``印度``, ``インド``); in
       spaced scripts the whole word that starts with the name (``ভারতের``: with its suffix;
       ``Türkiye'nin``: across the apostrophe; ``l’Inde``: with its elided article), never a
       name inside a word.
    3. Japanese: runs of two or more katakana (foreign names, loanwords).
    Caseless scripts (Arabic, Devanagari, Bengali, Han, …) therefore get rules 2 and 3, plus
    rule 1 for Latin-script names embedded in them. Languages that capitalise every noun
    (German, Luxembourgish: ``rules.NOUNS_CAPITALISED``) do not get rule 1, where a capital
    is no sign of a name: they get rule 2, acronyms of 2-6 capitals, and names of several
    words that start with a capitalised adjective after an article (``der Vereinten
    Nationen``, ``die Berliner Mauer``) whose first word occurs nowhere else in the text on
    its own (see ``_name_runs``). On the German UDHR that is "Vereinten Nationen", 5 times,
    and nothing else; person names (``Angela Merkel``) are not found there. Person and city
    names written in a caseless script are not found either; a reference with no entity-like token makes
    ``drop_entities`` a no-op, which the item builder skips and counts.
"""

from __future__ import annotations

import functools
import re
import unicodedata

import msgspec
import regex

from ..core import cldr_names
from . import rules

# Terminators come from the Unicode data (the ``regex`` module's property tables), not a
# hand-written list: every ``Sentence_Terminal`` character, plus the Tibetan shads, less the
# clause marks, plus the conditional and substitute full stops of ``rules`` (where each rule
# comes from is written there).
_CLAUSE = "".join(rules.CLAUSE_MARKS) + "".join(rules.CONDITIONAL_TERMINALS)
_TERM_SET = rf"[[\p{{STerm}}{rules.TIBETAN_SHADS}]--[{_CLAUSE}]]"
_SHARED = "".join(f"\\u{a:04x}-\\u{b:04x}" for a, b in rules.SHARED_BLOCKS)  # all in the BMP
_CONDITIONAL = "|".join(rf"(?<={regex.escape(after)}){regex.escape(ch)}"
                        for ch, (after, _) in rules.CONDITIONAL_TERMINALS.items())
_SUBSTITUTES = "|".join(rf"(?:{p})" for p in rules.SUBSTITUTE_TERMINALS)
_TERM = rf"(?:{_TERM_SET}|{_CONDITIONAL}|{_SUBSTITUTES})"
# Terminators that end a sentence wherever they stand (a script's own marks, never inside a
# word or a number: ``rules.SHARED_BLOCKS``).
_ANYWHERE = "|".join([rf"[{_TERM_SET}--[{_SHARED}]]", _CONDITIONAL,
                      *(rf"(?:{p})" for p, (anywhere, _) in rules.SUBSTITUTE_TERMINALS.items() if anywhere)])
# Terminators of scripts written without spaces (CJK): a sentence ends there wherever it
# stands, and a lower-case Latin word after one does not continue it.
_CJK_END = "。！？｡︒﹖﹗"
# Closing quotes and brackets that belong to the sentence they close.
_CLOSE = r"[\p{Pe}\p{Pf}\"'»」』]"
# What may separate two sentences: whitespace, or a script's own word separator (Ethiopic
# wordspace ``፡``, which some Ge'ez-script texts write after ``።`` instead of a space).
_SEP = "\u1361"
_BOUNDARY = regex.compile(
    rf"(?P<cjk>[{_CJK_END}]+)(?:{_TERM}|{_CLOSE})*"
    rf"|(?:{_ANYWHERE})+(?:{_TERM}|{_CLOSE})*"
    rf"|(?P<term>{_TERM}+){_CLOSE}*(?=[\s{_SEP}]|$)",
    regex.V1,
)
_GAP = regex.compile(rf"[\s{_SEP}]*")
# Scripts written without spaces between words, whose spaces separate phrases (Thai, Lao,
# Tai Tham, Khmer, Myanmar, Tibetan: ``rules.PHRASE_SPACED_SCRIPTS``): a line break between
# two of their letters ends a sentence (the end of a paragraph); a space does not.
_PHRASE_SPACED = "".join(rf"\p{{{name}}}" for name in rules.PHRASE_SPACED_SCRIPTS)
_LINE_BOUNDARY = regex.compile(
    rf"(?<=[[{_PHRASE_SPACED}]&&[\p{{L}}\p{{M}}]])[^\S\n]*\n\s*(?=[{_PHRASE_SPACED}])", regex.V1)


class Sentence(msgspec.Struct, frozen=True):
    text: str
    gap: str  # the whitespace that followed it in the source


@functools.lru_cache(maxsize=256)
def _sentences(text: str, lang: str) -> tuple[Sentence, ...]:
    # Cached: the perturbations of one reference split the same text again and again.
    return tuple(_split(text, lang))


def sentences(text: str, lang: str = "") -> list[Sentence]:
    """``text``'s sentences; ``lang`` (a BCP-47 tag) adds its abbreviation and ordinal
    suppressions (``rules.ABBREVIATIONS``, ``rules.ORDINALS``, ``rules.INITIALS``)."""
    return list(_sentences(text, _base(lang)))


def _base(lang: str) -> str:
    return lang.split("-", 1)[0].split("_", 1)[0].lower()


# Scripts whose letters Python calls lower-case although the script is written without case:
# Georgian Mkhedruli letters are ``Ll`` since Unicode 11 added the Mtavruli capitals, yet
# Georgian prose has no capitals, so ``str.islower()`` is True for every letter and the
# "lower-case after a full stop continues the sentence" rule would block every split.
_WRITTEN_CASELESS = frozenset({"GEORGIAN"})


def _continues(following: str) -> bool:
    """Whether the text after a terminator continues the sentence: it starts with a
    lower-case letter of a script that has case (``e.g. the``, ``approx. five``) — a letter
    with a distinct capital, in a script not written caseless."""
    first = following[:1]
    return (first.islower() and first.upper() != first
            and unicodedata.name(first, "").split(" ", 1)[0] not in _WRITTEN_CASELESS)


def _split(text: str, lang: str) -> list[Sentence]:
    out: list[Sentence] = []
    start = 0
    held = _abbreviation_stops(text, lang)
    for end, cjk, dot in _boundaries(text):
        if end < start:
            continue
        gap = _GAP.match(text, end).group()
        after = end + len(gap)
        if not cjk and _continues(text[after : after + 1]):
            continue  # "e.g. the", "approx. five": not the end of a sentence
        if dot is not None and (dot in held or _initial(text, dot, after, lang)
                                or _ordinal(text, dot, after, lang)):
            continue  # "z. B. Kinder", "J. F. Kennedy", "am 9. November"
        _append(out, text[start:end].strip(), gap)
        start = after
    _append(out, text[start:].strip(), "")
    return out


@functools.lru_cache(maxsize=32)
def _abbreviation_pattern(lang: str) -> regex.Pattern | None:
    entries = rules.ABBREVIATIONS.get(lang)
    if not entries:
        return None
    forms = {e for entry in entries for e in (entry, entry[:1].upper() + entry[1:])}
    alternatives = (r"[ \u00a0]?".join(regex.escape(part) for part in form.split(" "))
                    for form in sorted(forms, key=len, reverse=True))
    return regex.compile(rf"(?<![\w.'’\-])(?:{'|'.join(alternatives)})")


def _abbreviation_stops(text: str, lang: str) -> frozenset[int]:
    """Offsets just past each full stop of an abbreviation of ``lang`` in ``text``."""
    pattern = _abbreviation_pattern(lang)
    if pattern is None or "." not in text:
        return frozenset()
    return frozenset(m.start() + i + 1 for m in pattern.finditer(text)
                     for i, ch in enumerate(m.group()) if ch == ".")


def _initial(text: str, dot: int, after: int, lang: str) -> bool:
    """``J. F. Kennedy``: one capital letter, a full stop, a capitalised word (``rules.INITIALS``)."""
    if lang not in rules.INITIALS or dot < 2:
        return False
    letter, before = text[dot - 2], text[dot - 3] if dot >= 3 else " "
    return (letter.isupper() and not (before.isalnum() or before in ".'’-")
            and text[after : after + 1].isupper())


_ORDINAL_NUMBER = regex.compile(r"(?:(?<=(\w+)[ \u00a0]+)|(?<![\w.,]))\d{1,3}\.\Z")
_NEXT_WORD = regex.compile(r"\w+\.?")


def _ordinal(text: str, dot: int, after: int, lang: str) -> bool:
    """``am 9. November``: a 1-3 digit number written as an ordinal (``rules.ORDINALS``)."""
    rule = rules.ORDINALS.get(lang)
    if rule is None:
        return False
    m = _ORDINAL_NUMBER.search(text, max(0, dot - 40), dot)
    if m is None:
        return False
    months, before = rule
    following = _NEXT_WORD.match(text, after)
    word = following.group() if following else ""
    return (word in months or word.rstrip(".") in months
            or (m.group(1) or "").lower() in before)


def _append(out: list[Sentence], piece: str, gap: str) -> None:
    """A piece with no word in it (a stray ``.`` after a sentence, ``…。 .``) is no sentence:
    it stays with the one before it, so it never moves or repeats on its own."""
    if not piece:
        return
    if out and not _HAS_WORD.search(piece):
        out[-1] = Sentence(out[-1].text + out[-1].gap + piece, gap)
    else:
        out.append(Sentence(piece, gap))


_HAS_WORD = regex.compile(r"\w")


def _boundaries(text: str) -> list[tuple[int, bool, int | None]]:
    """Candidate sentence ends, in text order: (offset just past the terminator and its
    closing marks, whether it is a CJK one, the offset just past it when it is a single
    ``.``: the one an abbreviation or an ordinal may hold), and the spaces between sentences
    of a phrase-spaced script (its line breaks between letters)."""
    ends: list[tuple[int, bool, int | None]] = []
    for m in _BOUNDARY.finditer(text):
        dot = m.end("term") if m.group("term") == "." else None
        ends.append((m.end(), m.group("cjk") is not None, dot))
    if "\n" in text:
        ends += [(m.start(), True, None) for m in _LINE_BOUNDARY.finditer(text)]
    return sorted(ends)


_WHOLE = regex.compile(rf"(?:{_TERM}){_CLOSE}*$|[{_PHRASE_SPACED}]$", regex.V1)


# A text's sentences are looked at again for every perturbation and severity of it (shuffle's
# and repeat_pad's movable sentences): the answers for the last sentences are kept.
@functools.lru_cache(maxsize=4096)
def is_whole(text: str) -> bool:
    """Whether a sentence stays a sentence wherever it is put after another one: it ends
    with a terminator (a text's last piece may be an unterminated fragment; in a space-only
    script, its last letter) and does not start with a lower-case letter of a cased script
    (which would join it to the sentence before)."""
    return bool(_WHOLE.search(text)) and not _continues(text)


_LINE_END = regex.compile(rf"[[{_PHRASE_SPACED}]&&[\p{{L}}\p{{M}}]]$", regex.V1)


@functools.lru_cache(maxsize=4096)
def ends_at_line(text: str) -> bool:
    """Whether a sentence ends only because a line break follows it (a paragraph of a
    phrase-spaced script with no mark at its end): put anywhere, it needs one after it."""
    return bool(_LINE_END.search(text))


def join(parts: list[Sentence]) -> str:
    return "".join(p.text + p.gap for p in parts).strip()


def sentence_gap(parts: list[Sentence]) -> str:
    """The separator this text puts between sentences: its most common gap, or none for CJK."""
    gaps = [p.gap for p in parts if p.gap]
    if gaps:
        return max(set(gaps), key=gaps.count)
    # No gap at all: CJK if any sentence ends with a full-width terminator (the last piece
    # may be an unterminated fragment: ``…権利を有する。…できない``).
    return "" if any(regex.search(rf"[{_CJK_END}]{_CLOSE}*$", p.text) for p in parts) else " "


# ---- numbers ------------------------------------------------------------------------------

NUMBER = re.compile(r"\d+(?:[.,٫٬]\d+)*")
DIGIT_GROUP = re.compile(r"\d+")  # a number's first digit group (before its separators)


def digits_like(value: int, template: str) -> str:
    """``value`` in the digit system of ``template``'s first digit, zero-padded to its width."""
    first = next(ch for ch in template if ch.isdecimal())
    zero = ord(first) - unicodedata.decimal(first)
    width = sum(ch.isdecimal() for ch in template)
    return "".join(chr(zero + int(d)) for d in str(value).zfill(width))


def digit_value(group: str) -> int:
    return int("".join(str(unicodedata.decimal(ch)) for ch in group))


# ---- entity-like tokens -------------------------------------------------------------------

# A word character: the ``regex`` module's Unicode ``\w`` (letters and combining marks of every
# plane, so ``Gẹ̀ẹ́sì``, ``भारतीय`` or Chakma ``𑄟𑄚𑄬𑄴`` are never cut in the middle of a letter;
# Python's ``re`` leaves marks out of ``\w``).
_WORDCH = r"\w"
_JOINERS = "'’\\-\u2010\u2011"  # apostrophes and hyphens inside a word
_WORD = regex.compile(rf"{_WORDCH}+(?:[{_JOINERS}]{_WORDCH}+)*")
_KATAKANA = re.compile(r"[\u30A0-\u30FF]{2,}(?:・[\u30A0-\u30FF]+)*")


def _is_capitalised(word: str) -> bool:
    return word[:1].isupper()


def _is_acronym(word: str) -> bool:
    letters = [c for c in word if c.isalpha()]
    return len(letters) >= 2 and all(c.isupper() for c in letters)


def _cased_runs(text: str, lang: str = "") -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    pos = 0
    for sent in sentences(text, lang):
        offset = text.find(sent.text, pos)
        pos = offset + len(sent.text)
        words = list(_WORD.finditer(sent.text))
        caps = [_is_capitalised(w.group()) for w in words]
        if True not in caps:  # most sentences of a caseless script, or with no name
            continue
        i, n = 0, len(words)
        while i < n:
            if not caps[i]:
                i += 1
                continue
            j = i
            while j + 1 < n and caps[j + 1] and _adjacent(sent.text, words[j], words[j + 1]):
                j += 1
            single_initial = i == j and i == 0 and not _is_acronym(words[i].group())
            if not single_initial:
                spans.append((offset + words[i].start(), offset + words[j].end()))
            i = j + 1
    return spans


def _adjacent(text: str, a: re.Match, b: re.Match) -> bool:
    return text[a.end() : b.start()] in (" ", "\u00a0", "-", "\u2010", "\u2011")


@functools.lru_cache(maxsize=256)
def _place_and_language_names(lang: str) -> tuple[str, ...]:
    """Country and language names in ``lang`` itself: ``computed_gazetteer``'s, from the
    package's table where it holds them for the installed language-data (``core.cldr_names``)."""
    kept = cldr_names.gazetteer(lang)
    return kept if kept is not None else computed_gazetteer(lang)


def computed_gazetteer(lang: str) -> tuple[str, ...]:
    """Country and language names in ``lang`` itself (CLDR via language-data): the names
    langcodes' ``territory_name(lang)`` and ``language_name(lang)`` give (``_cldr_name``),
    longest first."""
    import langcodes

    target = langcodes.Language.get(lang)
    tag, matchable = str(target), frozenset(target.broader_tags())
    names = {_cldr_name(names, tag, matchable) for names in _named_codes()}
    # Codes without a name in ``lang`` (langcodes' "Unknown language [xx]"): dropped.
    real = {n for n in names if n is not None and len(n) >= 2 and "[" not in n}
    return tuple(sorted(real, key=lambda n: (-len(n), n)))  # one order in every process


@functools.cache
def _named_codes() -> tuple[dict[str, str], ...]:
    """The names in every language (CLDR's, by language tag) of each two-letter territory
    and each CLDR language: the same whatever the target language."""
    from langcodes import Language
    from langcodes.data_dicts import TERRITORY_REPLACEMENTS
    from language_data.language_lists import CLDR_LANGUAGES
    from language_data.names import code_to_names

    territories = {t for t in TERRITORY_REPLACEMENTS.values() if len(t) == 2 and t.isalpha()}
    languages = {Language.get(code).language or "und" for code in CLDR_LANGUAGES}
    return tuple(code_to_names(code) for code in sorted(territories) + sorted(languages))


def _cldr_name(names: dict[str, str], target: str, matchable: frozenset[str]) -> str | None:
    """The name (of a language or territory, ``names`` by language tag) in the language
    ``target``, as langcodes' ``Language._best_name`` picks it (the closest of the languages
    the name is known in, else English), None where it has none: the same choice, with the
    closest match worked out once per set of candidate languages, not once per name (a plan
    builds this for every language of its corpus; tests/unit/test_hot_path.py compares it
    with langcodes). ``matchable``: the target's broader tags."""
    chosen = _closest(target, tuple(sorted(k for k in matchable if k in names)))
    return names[chosen] if chosen in names else names.get("en")


@functools.lru_cache(maxsize=4096)
def _closest(target: str, candidates: tuple[str, ...]) -> str:
    import langcodes

    return langcodes.closest_match(target, candidates, 25)[0]


def _gazetteer_spans(text: str, lang: str, spaced: bool) -> list[tuple[int, int]]:
    spans = []
    for name in _place_and_language_names(lang):
        if name not in text:
            continue
        # In spaced scripts a name starts a word and takes the word's inflection with it
        # (Bengali ভারতের, Turkish Türkiye'nin, Swahili-style suffixes): the whole word goes.
        # Never from inside a word (``Àjọ‐…``): a name starts a word, or follows an elided
        # article (``l’Inde``, ``dell'Italia``: the article goes with it), and the word runs
        # on across apostrophes and hyphens (``Türkiye'nin``).
        pattern = (rf"(?<![{_JOINERS}])(?<!{_WORDCH})(?:{_WORDCH}{{1,4}}['’])?{regex.escape(name)}"
                   rf"(?:{_WORDCH}|[{_JOINERS}](?={_WORDCH}))*") if spaced else regex.escape(name)
        spans.extend(m.span() for m in regex.finditer(pattern, text))
    return spans


def entity_spans(text: str, lang: str) -> list[tuple[int, int]]:
    """Non-overlapping (start, end) spans of entity-like tokens, in text order."""
    return list(_entity_spans(text, lang))


# A plan drops entities from each reference at every severity (in its survey, and again in a
# pass that has no packed texts to replay): the spans of the last references are kept (they
# depend on the text and the language alone).
@functools.lru_cache(maxsize=256)
def _entity_spans(text: str, lang: str) -> tuple[tuple[int, int], ...]:
    spaced = " " in text.strip()
    base = _base(lang)
    if base in rules.NOUNS_CAPITALISED:
        cased = _name_runs(text, base) + _acronyms(text)
    else:
        cased = _cased_runs(text, lang)
    spans = cased + _gazetteer_spans(text, lang, spaced)
    if lang.startswith("ja"):
        spans += [m.span() for m in _KATAKANA.finditer(text)]
    return tuple(_merge(spans))


# ---- languages that capitalise every noun (German, Luxembourgish) ---------------------------
# A capital letter there marks a noun, not a name, so a capitalised word is no entity on its
# own. What is: a CLDR country or language name (rule 2 above), an acronym, and a name of
# several words whose first is an adjective: the adjectives of such a name are capitalised
# (``der Vereinten Nationen``, ``die Berliner Mauer``, ``diese Allgemeine Erklärung``) where
# an ordinary adjective is not. A capitalised word with an adjective's ending after an article
# or demonstrative, followed by more capitalised words, is such a name when the first word
# occurs nowhere else in the text on its own (only in the same name): a noun in that place
# (``die Menschen Rede``: the people free speech) recurs as a noun. Closed-class words only
# (``rules.ARTICLES``), no list of nouns or of names.
_NAME_RUN = regex.compile(
    r"(?<!\w)(?P<det>\w+['’]?)(?:(?<=['’])|[ \u00a0]+)"
    r"(?P<first>\p{Lu}\w*(?:e|en|er|es|em))(?P<rest>(?:[ \u00a0\-]\p{Lu}\w*)+)"
)


def _name_runs(text: str, lang: str) -> list[tuple[int, int]]:
    articles = rules.ARTICLES.get(lang, rules.ARTICLES["de"])
    spans = []
    for m in _NAME_RUN.finditer(text, overlapped=True):
        if m.group("det").lower() not in articles:
            continue
        first, second = m.group("first"), _WORD.match(m.group("rest").lstrip(" \u00a0-")).group()
        alone = [o for o in regex.finditer(rf"(?<!\w){regex.escape(first)}(?!\w)", text)
                 if not regex.match(rf"[ \u00a0\-]{regex.escape(second)}(?!\w)", text[o.end():])]
        if not alone:
            spans.append((m.start("first"), m.end("rest")))
    return spans


def _acronyms(text: str) -> list[tuple[int, int]]:
    """All-capital words of 2-6 letters (``UNO``, ``EU``), not inside a heading written in
    capitals (two or more such words in a row)."""
    words = list(_WORD.finditer(text))
    caps = [_is_acronym(w.group()) for w in words]
    return [w.span() for i, w in enumerate(words)
            if caps[i] and sum(c.isalpha() for c in w.group()) <= 6
            and not (i > 0 and caps[i - 1]) and not (i + 1 < len(words) and caps[i + 1])]


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


_SPACE_BEFORE_PUNCT = re.compile(r"\s+([,.;:!?،؛؟।)\]」』）])")


def tidy(text: str) -> str:
    """Whitespace after a deletion: single spaces, none before punctuation."""
    text = re.sub(r"[ \t\u00a0]{2,}", " ", text)
    text = _SPACE_BEFORE_PUNCT.sub(r"\1", text)
    return text.strip()


def forget() -> None:
    """Empty the caches keyed by texts (sentences, their tests, entity spans), once the
    passes that perturb items are over: their entries were made all through the plan's
    passes, and each one left pins the allocator's block it sits in (after a 500-language
    plan with the robustness probes, clearing them handed back ~8 MB). They refill as needed."""
    for cached in (_sentences, is_whole, ends_at_line, _entity_spans):
        cached.cache_clear()
