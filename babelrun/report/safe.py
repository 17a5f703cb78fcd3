"""Untrusted text (corpus, judge replies, names from manifests) made inert for each output.

Every renderer passes judge and corpus text through here. Besides markup, text can carry
bidirectional controls (U+202E RIGHT-TO-LEFT OVERRIDE and friends) that reorder what a
reader sees — a reply can look like a different one — and other invisible controls; those
are replaced by a visible ``⟦U+202E⟧`` marker. Ordinary right-to-left text (Arabic, Hebrew)
needs no controls and is left alone.
"""

from __future__ import annotations

import html
import re
import unicodedata

from ..core.text import neutralise

__all__ = ["h", "is_visible_safe", "label", "md", "neutralise"]


def is_visible_safe(text: str) -> bool:
    """No character of ``text`` is a control or format character (tests, assertions)."""
    return not any(unicodedata.category(c) in ("Cc", "Cf") and c not in "\n\t" for c in text)


def h(text: object) -> str:
    """Text for HTML element content and attribute values (quotes escaped too)."""
    return html.escape(neutralise(str(text)), quote=True)


_MD_SPECIAL = re.compile(r"([\\`*_\[\]!|<>~&$])")


def md(text: object, limit: int | None = None) -> str:
    """Text for one Markdown table cell or line: every character Markdown could read as
    syntax (emphasis, links, code, HTML, table pipes) backslash-escaped, newlines shown as ⏎."""
    text = neutralise(str(text))
    if limit is not None and len(text) > limit:
        text = text[:limit] + "…"
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\n", " ⏎ ").replace("\t", " ")
    return _MD_SPECIAL.sub(r"\\\1", text)


def label(text: object, limit: int = 40) -> str:
    """Text for a plot label: neutralised and shortened (matplotlib draws it as glyph paths
    and math parsing is off, so nothing in it is read as markup or TeX). Shortened in the
    middle: names that share a long prefix (``pairs:LLMBar_Adversarial_GPTInst``,
    ``…_GPTOut``) stay distinct by their ends."""
    text = neutralise(str(text)).replace("\n", " ")
    if len(text) <= limit:
        return text
    head = (limit - 1) // 2
    return text[:head] + "…" + text[len(text) - (limit - 1 - head):]
