"""Sentence-boundary rules as data: what ``script.sentences`` reads, with where each came from.

The segmenter's default is Unicode's: every ``Sentence_Terminal`` character (``\\p{STerm}``)
ends a sentence. The tables below are the measured exceptions to that default, per script
and per language. Each entry says its source:

- *UCD*: the Unicode Character Database (character names and properties);
- *core spec*: the Unicode Standard's description of the script (the chapter named);
- *CLDR*: the Unicode CLDR's sentence-break suppressions (``common/segments/<lang>.xml``,
  the ``<suppressions type="standard">`` lists) and number formats (``common/rbnf``);
- *udhr-all*: what the 512 declarations of ``../shared/data/udhr-all`` write (counts of the
  characters that end a paragraph and of what follows each mark; ``bench/segmentation.py``).

The lists of abbreviations are project-written: the common entries of CLDR's suppression
lists for the language, less the ones that as often end a sentence (``etc.``, ``usw.``,
``и т. д.``, ``г.`` after a year), which CLDR keeps and which would glue two sentences.
"""

from __future__ import annotations

# ---- per script -----------------------------------------------------------------------------

# ``Sentence_Terminal`` characters that are a script's clause mark (its comma), not its full
# stop: a text splits on them three times as often as it has sentences.
CLAUSE_MARKS: dict[str, str] = {
    # UCD name "MYANMAR SIGN LITTLE SECTION" beside U+104B "SECTION"; core spec ch. 16
    # (Myanmar: the little section is the comma, the section the full stop). udhr-all: in
    # mnw and shn, 141 of each, and 6 paragraphs (list items) end in ၊, 108 in ။.
    "\u104a": "Myanmar little section (comma); core spec ch. 16, udhr-all mnw/shn",
    # Balinese carik siki marks a pause inside a sentence, carik pareren ends it (core spec
    # ch. 17, Balinese punctuation; the UDHR article 1 sample in Balinese uses ᭞ before
    # "should act" and ᭟ at the ends).
    "\u1b5e": "Balinese carik siki (comma); core spec ch. 17",
}

# ``Sentence_Terminal`` characters that end a sentence only after a given character. Javanese
# pada lingsa is the comma, except after a syllable closed by pangkon (U+A9C0), where it is
# written for the full stop instead of pada lungsi (core spec ch. 17, Javanese punctuation).
CONDITIONAL_TERMINALS: dict[str, tuple[str, str]] = {
    "\ua9c8": ("\ua9c0", "Javanese pada lingsa after pangkon; core spec ch. 17"),
}

# Full stops written with other characters: regular expression (``regex`` module syntax) ->
# (whether it ends a sentence with no space after it, source).
SUBSTITUTE_TERMINALS: dict[str, tuple[bool, str]] = {
    # Ethiopic: the full stop ። (U+1362) looks like two wordspaces ፡ (U+1361), and texts
    # typed without it write two of them (the Unicode core spec, ch. 19, names ። the full stop
    # and ፡ the word separator). No Ethiopic file is in udhr-all.
    "\u1361{2,}": (True, "Ethiopic wordspace written twice for the full stop; Unicode core spec ch. 19"),
    # Armenian: the full stop ։ (U+0589, UCD "ARMENIAN FULL STOP") looks like a colon, and
    # texts typed on a Latin keyboard write ASCII ``:`` for it; after an Armenian letter a
    # colon ends the sentence (Armenian uses no colon of its own). No Armenian file is in
    # udhr-all: a project-written test covers it.
    r"(?<=\p{Armenian}\p{M}*):": (False, "Armenian full stop typed as a colon; UCD, Armenian orthography"),
}

# Tibetan shads: only ``Terminal_Punctuation`` in Unicode, but the sentence mark of Tibetan
# and Dzongkha (core spec ch. 13). U+0F08, U+0F0D–U+0F12.
TIBETAN_SHADS = "\u0f08\u0f0d-\u0f12"

# Where a terminal ends a sentence even with no space after it. ASCII ``. ! ?`` and the
# shared punctuation blocks stand inside abbreviations (``U.N.``, Dhivehi ``އ.ދ.``), numbers
# (``3.5``, full-width ``３．５``) and words (the click letter ``!`` of Khoekhoe): those need
# whitespace or the end after them. A script's own terminal (danda, shad, Ethiopic or Myanmar
# full stop, CJK ``。``) is never inside a word: udhr-all writes it straight before the next
# sentence in san, mag, san_gran (``।`` + letter: 2, 2, 6 times), dzo (``།`` + letter: 4),
# Japanese, Chinese and Yi (``。`` + letter: 149, 10), and the old rule missed every one.
SHARED_BLOCKS: tuple[tuple[int, int], ...] = (
    (0x0000, 0x007F),  # Basic Latin
    (0x2000, 0x206F),  # General Punctuation (‼ ⁇ ‽ ․ …)
    (0x2E00, 0x2E7F),  # Supplemental Punctuation
    (0xFE50, 0xFE6F),  # Small Form Variants
    (0xFF00, 0xFF0F),  # Halfwidth and Fullwidth Forms: ！ ． (a full-width decimal point)
)

# Scripts written without spaces between words, where a space separates phrases (core spec
# ch. 16, Southeast Asian scripts: "many use no interword spacing but use spaces or marks
# between phrases"; ch. 13, Tibetan, whose tsheg separates syllables). A space there is no
# sentence boundary: Thai and Tai Tham mark a sentence with nothing at all, and splitting
# them at every space gave 4.0 and 6.2 sentences for each sentence of the aligned English
# units (udhr-all tha2, kkh_lana: 242 and 380 against 61). What does end a sentence with no
# mark is the end of its paragraph: a line break between two letters of these scripts (the
# UDHR loader writes their paragraphs on lines of their own; there, 57 and 51 paragraphs for
# English's 61 sentences). Other scripts are unchanged: a space or a line break ends a
# sentence there only after a terminator. regex script names (Unicode Script property).
PHRASE_SPACED_SCRIPTS = ("Thai", "Lao", "Tai_Tham", "Khmer", "Myanmar", "Tibetan")
# ISO 15924 codes of the same scripts (``core.languages.script``), for loaders.
PHRASE_SPACED_ISO = frozenset({"Thai", "Laoo", "Lana", "Khmr", "Mymr", "Tibt"})

# ---- per language ---------------------------------------------------------------------------

# Abbreviations after which a full stop does not end the sentence (CLDR suppressions, the
# common entries; see the module note). Matched case-sensitively at a word start, also with
# a capital first letter (sentence-initial ``Z. B.``). Entries with inner spaces also stop the
# split at their inner full stops (``z. B.``: not after ``z.``).
ABBREVIATIONS: dict[str, tuple[str, ...]] = {
    "de": ("Abb.", "Abs.", "Abt.", "Anm.", "Art.", "Aufl.", "Bd.", "Bsp.", "Dipl.", "Dr.",
           "Fr.", "Frl.", "Hr.", "Hrn.", "Hrsg.", "Ing.", "Jh.", "Jhd.", "Kap.", "Mio.", "Mrd.", "Nr.",
           "Prof.", "S.", "St.", "Str.", "Tel.", "Tsd.", "bzw.", "ca.", "d. h.", "d.h.", "evtl.",
           "ggf.", "inkl.", "u. a.", "u.a.", "v. a.", "vgl.", "z. B.", "z.B.", "z. T.",
           "geb.", "gest.", "sog.", "zzgl.", "Mt.", "Op.",
           # ``v. Chr.`` / ``n. Chr.``: the inner stop only (``Chr.`` often ends the sentence)
           "v.", "n.",
           "Jan.", "Feb.", "Febr.", "Aug.", "Sept.", "Okt.", "Nov.", "Dez."),
    "en": ("Mr.", "Mrs.", "Ms.", "Dr.", "Prof.", "Rev.", "Gen.", "Sen.", "Rep.", "Gov.",
           "St.", "Mt.", "Jr.", "Sr.", "No.", "Nos.", "Vol.", "vs.", "e.g.", "i.e.", "cf.",
           "approx.", "Fig.", "Jan.", "Feb.", "Aug.", "Sept.", "Oct.", "Nov.", "Dec."),
    "fr": ("M.", "MM.", "Mme.", "Mlle.", "Dr.", "Pr.", "Me.", "St.", "Ste.", "p. ex.",
           "c.-à-d.", "av.", "apr.", "env.", "janv.", "févr.", "avr.", "juil.", "sept.",
           "oct.", "nov.", "déc.", "vol.", "chap.", "éd.", "n.", "p.", "art."),
    "es": ("Sr.", "Sra.", "Srta.", "Sres.", "Dr.", "Dra.", "Lic.", "Ing.", "Prof.", "Ud.",
           "Uds.", "Vd.", "Vds.", "D.", "Dña.", "Sto.", "Sta.", "núm.", "pág.", "págs.",
           "p. ej.", "aprox.", "Av.", "avda.", "art.", "cap.", "tel.", "vol."),
    "pt": ("Sr.", "Sra.", "Srta.", "Dr.", "Dra.", "Prof.", "Profa.", "Eng.", "Exmo.",
           "Exma.", "V. Exa.", "n.º", "p. ex.", "pág.", "págs.", "aprox.", "Av.", "art.",
           "cap.", "séc.", "tel.", "vol."),
    "it": ("Sig.", "Sigg.", "Sig.ra", "Dott.", "Dott.ssa", "Prof.", "Ing.", "Avv.", "On.",
           "Geom.", "Rag.", "Egr.", "Gent.", "Spett.", "S.", "pag.", "pagg.", "es.", "cfr.",
           "vol.", "art.", "cap.", "n.", "ca."),
    "ru": ("т. е.", "т.е.", "т. н.", "т.н.", "им.", "ул.", "пр.", "д.", "кв.", "стр.",
           "с.", "см.", "напр.", "тыс.", "млн.", "млрд.", "руб.", "коп.", "проф.", "акад.",
           "гр.", "рис.", "ок.", "обл.", "р.", "оз.", "св.", "ст.", "гл."),
}

# Languages where an initial (one capital letter and a full stop) before a capitalised word
# is part of a name (``J. F. Kennedy``, ``А. С. Пушкин``): no boundary there. A project rule
# (CLDR has no such list); the UDHR never ends a sentence on a single capital letter.
INITIALS = frozenset({"de", "en", "es", "fr", "it", "pt", "ru"})

# Languages that write an ordinal as a number and a full stop (CLDR ``common/rbnf``:
# ``%digits-ordinal`` is ``=#,##0=.``), with what makes ``9.`` an ordinal rather than a
# sentence end: the month after it (CLDR month names, format wide and abbreviated), or an
# article or preposition+article before it (``am 9.``, ``im 20.``, ``der 2.``): a closed class,
# where a cardinal that ends a sentence follows a noun or a verb (``Artikel 29.``, ``waren
# 9.``). A 1-3 digit number only: a year (``1989.``) ends its sentence.
ORDINALS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "de": (frozenset({"Januar", "Jänner", "Februar", "März", "April", "Mai", "Juni", "Juli",
                      "August", "September", "Oktober", "November", "Dezember", "Jan.",
                      "Feb.", "Febr.", "Apr.", "Aug.", "Sept.", "Okt.", "Nov.", "Dez."}),
           frozenset({"am", "im", "vom", "zum", "beim", "der", "die", "das", "den", "dem",
                      "des", "ein", "eine", "einer", "einem", "einen", "eines",
                      "zur", "jeder", "jede", "jedes", "jeden", "jedem",
                      # possessive and demonstrative determiners (``seine 9. Sinfonie``,
                      # ``ihr 2. Buch``, ``dieses 3. Mal``): the same closed class as the
                      # articles, each in every case
                      *(stem + end for stem in ("mein", "dein", "sein", "ihr", "unser", "euer", "eur",
                                                "dies", "jen", "welch")
                        for end in ("", "e", "er", "es", "em", "en")
                        if stem + end not in ("dies", "jen", "welch", "eur", "euere", "euerer"))})),
    "lb": (frozenset({"Januar", "Februar", "Mäerz", "Abrëll", "Mee", "Juni", "Juli",
                      "August", "September", "Oktober", "November", "Dezember"}),
           frozenset({"den", "de", "d'", "um", "am", "vum", "zum"})),
    "da": (frozenset({"januar", "februar", "marts", "april", "maj", "juni", "juli", "august",
                      "september", "oktober", "november", "december"}),
           frozenset({"den", "det", "de", "til", "fra"})),
    "nb": (frozenset({"januar", "februar", "mars", "april", "mai", "juni", "juli", "august",
                      "september", "oktober", "november", "desember"}),
           frozenset({"den", "det", "de", "til", "fra"})),
    "fi": (frozenset({"tammikuuta", "helmikuuta", "maaliskuuta", "huhtikuuta", "toukokuuta",
                      "kesäkuuta", "heinäkuuta", "elokuuta", "syyskuuta", "lokakuuta",
                      "marraskuuta", "joulukuuta"}), frozenset()),
}

# ---- entities ---------------------------------------------------------------------------

# Languages that capitalise every noun: a capital letter there is no sign of a name, so
# ``script.entity_spans`` uses the rules for such languages (module note of ``script``).
NOUNS_CAPITALISED = frozenset({"de", "lb", "gsw", "bar", "nds", "ksh", "pfl"})

# Closed-class words (articles, possessives, demonstratives) before a capitalised adjective +
# noun in those languages: ``der Vereinten Nationen``, ``die Berliner Mauer``. Function words,
# not nouns: listing them says nothing about which nouns exist.
ARTICLES: dict[str, frozenset[str]] = {
    "de": frozenset({"der", "die", "das", "den", "dem", "des", "im", "am", "vom", "zum",
                     "zur", "beim", "ins", "ans"}),
    "lb": frozenset({"de", "d'", "den", "dem", "der", "vum", "zum", "am", "um"}),
}
