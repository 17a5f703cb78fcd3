"""Robustness probes: a cue added to a worse answer, a non-answer, the reference against itself.

Each probe keeps its gold label by construction (the table in docs/probes.md):

- **cue probes** (``authority``, ``bandwagon``, ``injection``, ``refinement``): the reference
  against a degraded answer (``base``, default ``truncate`` at 0.6) with a cue added — a fake
  source, a claim that most people prefer it, text addressed to the judge asking for this
  answer's slot, a claim that it is a refined version. Gold: the reference. Its **clean
  twin** (the same degraded answer, no cue) is judged too, so the cue's effect is paired.
- ``master_key``: the reference against a non-answer (``:``, ``Thought process:``, …, in the
  item's language), none of whose words is in the reference. Gold: the reference.
- ``self_match``: the reference against itself. Gold: tie.
- ``romanised``: the reference shown transliterated to Latin script (``perturb/romanise.py``)
  against the degraded answer (``base``) in the native script. Gold: the reference. Its clean
  twin is the cue probes' twin — the same pair with both in the native script — so the cue
  effect is what the script costs the better answer. One item per reference (no cue
  language, no cue file); a Latin-script reference is its own romanisation: a no-op, counted.

Cue texts live in ``probe_cues.json`` per language and probe, each language labelled with
where its texts came from (every non-English one: written here, not checked by a native
speaker). A language without texts gets the English cue, recorded as code-switched
(``probe:authority@en``): itself a realistic attack. ``cue_language: en`` asks for the English
cue everywhere, ``both`` for both. A user's cue file (``cues:``, the same shape) replaces the
bundled texts per (language, probe).

An ``injection`` cue holds ``{verdict}``; the item keeps ``SLOT_MARK`` in its place, and the
judge's protocol writes, per presentation, the verdict its own template asks for naming the
cued answer's slot (``[[A]]`` under MT-Bench's template, ``A`` under the built-in one; the top
of the scale pointwise), so a judge that obeys is caught in both orders.

Placement (start, end, or between two sentences) and which of a probe's texts is used are
drawn from the item's RNG (seeded by its id) and recorded in the item's ``cue`` field
(``authority|en|1|between:2``), which the log keeps.

Perturbation names: ``probe:<probe>[@<cue language>][+<base>:<severity>]`` — the cue language
only where it differs from the item's, the base only where it is not the default; clean twins
are ``probe:clean[+<base>:<severity>]``. ``parse`` reads them back; scoring joins a cued item
to its twin on (language, ref_id, base, order).
"""

from __future__ import annotations

import functools
import json
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import regex

from . import script

PREFIX = "probe:"  # core.items.PROBE_PREFIX: the family's perturbation names
CLEAN = "clean"
CUE_PROBES = ("authority", "bandwagon", "injection", "refinement")
ROMANISED = "romanised"  # scored as a cue probe: the script is the cue, the native-script answer the cued one
PROBES: dict[str, Literal["cue", "master_key", "self_match"]] = {
    **{name: "cue" for name in CUE_PROBES}, ROMANISED: "cue", "master_key": "master_key", "self_match": "self_match"}
DEFAULT_BASE = ("truncate", 0.6)
SLOT_MARK = "\ue000verdict\ue000"  # an injection's verdict, written per presentation
BUNDLED = Path(__file__).with_name("probe_cues.json")
MAX_CUE_CHARS = 2000  # a user's cue text, at most
_TEXT_KEYS = (*CUE_PROBES, "master_key")


class CueFileError(ValueError):
    """A user's cue file that cannot be used (the manifest check names the field)."""


@dataclass(frozen=True)
class Cues:
    """Cue texts per language and probe, and where each language's came from."""

    texts: dict[str, dict[str, list[str]]]
    sources: dict[str, str]

    def languages(self) -> list[str]:
        return sorted(self.texts)


MAX_CUE_BYTES = 1 << 20  # a cue file: texts per language and probe, 1 MiB


def _read(path: Path) -> dict:
    """A user's cue file, as data from outside: a regular file of at most ``MAX_CUE_BYTES``,
    its YAML held to the manifest's bounds (aliases, expansion, nesting) before it is built."""
    from ..core import bounds
    from ..store.files import read_bounded

    try:
        raw = read_bounded(path, MAX_CUE_BYTES).decode("utf-8")
    except (OSError, ValueError) as e:  # ValueError: not regular, too large, not UTF-8
        raise CueFileError(f"{path}: cannot read ({getattr(e, 'strerror', None) or e})") from None
    if path.suffix in (".yaml", ".yml"):
        import yaml

        try:
            bounds.check_yaml(raw)
            doc = yaml.safe_load(raw)
        except bounds.BoundError as e:
            raise CueFileError(f"{path}: {e}") from None
        except (yaml.YAMLError, RecursionError) as e:
            raise CueFileError(f"{path}: not YAML ({e.__class__.__name__})") from None
    else:
        try:
            doc = json.loads(raw)
        except (ValueError, RecursionError) as e:
            raise CueFileError(f"{path}: not JSON ({e.__class__.__name__})") from None
    if not isinstance(doc, dict):
        raise CueFileError(f"{path}: expected a mapping of language -> probe -> texts")
    return doc


def _cues(doc: dict, origin: str) -> Cues:
    from ..core import languages

    texts: dict[str, dict[str, list[str]]] = {}
    sources: dict[str, str] = {}
    for lang, entry in doc.items():
        if lang.startswith("_"):
            continue
        try:
            code = languages.normalize(lang)
        except ValueError as e:
            raise CueFileError(f"unknown language {lang!r}") from e
        if not isinstance(entry, dict):
            raise CueFileError(f"{lang}: expected a mapping of probe -> texts")
        for probe, values in entry.items():
            if probe == "source":
                sources[code] = str(values)
                continue
            if probe not in _TEXT_KEYS:
                raise CueFileError(f"{lang}.{probe}: unknown probe (known: {', '.join(_TEXT_KEYS)})")
            if (not isinstance(values, list) or not values
                    or not all(isinstance(v, str) and v.strip() and len(v) <= MAX_CUE_CHARS for v in values)):
                raise CueFileError(f"{lang}.{probe}: expected a list of non-empty texts "
                                   f"(at most {MAX_CUE_CHARS} characters each)")
            if probe == "injection" and not all("{verdict}" in v for v in values):
                raise CueFileError(f"{lang}.injection: every text needs a {{verdict}} placeholder")
            texts.setdefault(code, {})[probe] = list(values)
        sources.setdefault(code, origin)
    return Cues(texts, sources)


@functools.lru_cache(maxsize=1)
def bundled() -> Cues:
    return _cues(json.loads(BUNDLED.read_text(encoding="utf-8")), "babelrun")


@functools.lru_cache(maxsize=16)
def cues(path: str | None = None) -> Cues:
    """The bundled cues, with a user's file's texts in place of them per (language, probe)."""
    base = bundled()
    if path is None:
        return base
    own = _cues(_read(Path(path)), f"user file {Path(path).name}")
    texts = {lang: dict(entry) for lang, entry in base.texts.items()}
    sources = dict(base.sources)
    for lang, entry in own.texts.items():
        texts.setdefault(lang, {}).update(entry)
        sources[lang] = (own.sources[lang] if lang not in base.sources
                         else f"{own.sources[lang]} (over {base.sources[lang]})")
    return Cues(texts, sources)


# ---- names --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProbeName:
    probe: str  # a PROBES name, or CLEAN for a clean twin
    cue_lang: str  # "" where the cue is in the item's language (or there is no cue)
    base: tuple[str, float]

    @property
    def twin(self) -> str:
        """The perturbation name of this cued item's clean twin."""
        return name(CLEAN, "", self.base)


def name(probe: str, cue_lang: str = "", base: tuple[str, float] = DEFAULT_BASE) -> str:
    out = PREFIX + probe + (f"@{cue_lang}" if cue_lang else "")
    if PROBES.get(probe) == "cue" or probe == CLEAN:
        out += "" if base == DEFAULT_BASE else f"+{base[0]}:{base[1]:g}"
    return out


_NAME = re.compile(r"probe:([a-z_]+)(?:@([A-Za-z0-9-]+))?(?:\+([a-z_]+):([0-9.]+))?")


def parse(perturbation: str) -> ProbeName | None:
    """A probe item's perturbation name read back; None for any other name."""
    m = _NAME.fullmatch(perturbation)
    if m is None or (m.group(1) not in PROBES and m.group(1) != CLEAN):
        return None
    base = (m.group(3), float(m.group(4))) if m.group(3) else DEFAULT_BASE
    return ProbeName(m.group(1), m.group(2) or "", base)


def probe_of(perturbation: str) -> str:
    """The probe a perturbation name belongs to (``authority`` for ``probe:authority@en``)."""
    parsed = parse(perturbation)
    return parsed.probe if parsed is not None else ""


# ---- building one probe's worse answer ----------------------------------------------------


def cue_languages(lang: str, choice: str, table: Cues) -> list[str]:
    """The cue languages an item in ``lang`` gets under ``cue_language: choice``: its own
    where it has texts (else English), English, or both (once where they coincide)."""
    own = lang if lang in table.texts else (lang.split("-")[0] if lang.split("-")[0] in table.texts else "en")
    wanted = {"item": [own], "en": ["en"], "both": [own, "en"]}[choice]
    return list(dict.fromkeys(wanted))


def texts_for(probe: str, cue_lang: str, table: Cues) -> list[str]:
    entry = table.texts.get(cue_lang, {})
    return entry.get(probe) or table.texts["en"][probe]


def place(answer: str, cue: str, rng: random.Random) -> tuple[str, str]:
    """``cue`` added to ``answer`` at the start, the end, or between two of its sentences
    (drawn from ``rng``), in the answer's own sentence separator; and where (``between:2``:
    before its third sentence)."""
    parts = script.sentences(answer)
    gap = script.sentence_gap(parts) if len(parts) > 1 else ("" if _unspaced(answer) else " ")
    if not gap and not _unspaced(cue):  # a spaced cue (the English one) in a text without spaces
        gap = " "
    where = rng.choice(("start", "end", "between") if len(parts) > 1 else ("start", "end"))
    if where == "start":
        return cue + (gap or "") + answer, where
    if where == "end":
        return answer + (gap or "") + cue, where
    k = rng.randrange(1, len(parts))
    head = script.join(parts[:k])
    tail = script.join(parts[k:])
    return head + (gap or "") + cue + (gap or "") + tail, f"between:{k}"


# Scripts written without spaces between words: CJK (with kana, full-width forms, Hangul is
# spaced and not here), Thai, Lao, Khmer, Myanmar. A cue is joined to an answer in one of them
# with no space only when the cue is in one of them too.
_UNSPACED = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}"
                          r"\u3000-\u303f\uff00-\uffef]")


def _unspaced(text: str) -> bool:
    return _UNSPACED.search(text) is not None


def words(text: str) -> set[str]:
    """Lower-cased word tokens (letters and digits), for the master key's no-content rule."""
    return {w.casefold() for w in re.findall(r"\w+", text)}


def master_key(reference: str, cue_lang: str, table: Cues, rng: random.Random) -> tuple[str, int]:
    """A non-answer none of whose words is in the reference (``:`` where every one shares a
    word with it), and its index among the language's texts (-1: the fallback ``:``)."""
    options = texts_for("master_key", cue_lang, table)
    ref_words = words(reference)
    ok = [i for i, t in enumerate(options) if not (words(t) & ref_words)]
    if not ok:
        return ":", -1
    i = rng.choice(ok)
    return options[i], i


def cued(answer: str, probe: str, cue_lang: str, table: Cues, rng: random.Random) -> tuple[str, str]:
    """The degraded ``answer`` with one of ``probe``'s cues added, and the record of it
    (``probe|cue language|text index|placement``)."""
    options = texts_for(probe, cue_lang, table)
    i = rng.randrange(len(options))
    text = options[i].replace("{verdict}", SLOT_MARK)
    out, where = place(answer, text, rng)
    return out, f"{probe}|{cue_lang}|{i}|{where}"


def render_slot(text: str, verdict: str) -> str:
    """An answer with its injection's verdict written (``verdict``: the judge's own syntax)."""
    return text.replace(SLOT_MARK, verdict) if SLOT_MARK in text else text


def strip_slot(text: str) -> str:
    """An answer with its injection's placeholder removed (what a clean comparison sees)."""
    return text.replace(SLOT_MARK, "")
