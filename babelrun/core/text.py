"""Untrusted text made inert for people: the one place that decides what a terminal (or a
report) may be shown.

Provider replies and error bodies, corpus text and names from manifests can carry terminal
escape sequences (``ESC[2J`` clears the screen, OSC sequences retitle the window), carriage
returns that overwrite a line, and bidirectional controls (U+202E RIGHT-TO-LEFT OVERRIDE)
that reorder what a reader sees. ``neutralise`` shows each such character as a visible
``⟦U+001B⟧`` marker; ordinary right-to-left text needs no controls and is left alone.
``SafeStream`` applies it to everything the CLI prints.
"""

from __future__ import annotations

import re
from typing import TextIO

# C0/C1 controls other than tab and newline (ESC, CR, BEL, …), bidi embeddings, overrides and
# isolates, the implicit marks, and other invisible format characters (category Cf).
_INVISIBLE = re.compile(r"[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200b-\u200f"
                        r"\u202a-\u202e\u2060-\u2069\ufeff\ufff9-\ufffb]")


def neutralise(text: str | None) -> str:
    """``text`` with every control and invisible format character shown as ⟦U+XXXX⟧."""
    if not text:
        return ""
    return _INVISIBLE.sub(lambda m: f"⟦U+{ord(m.group()):04X}⟧", text)


class SafeStream:
    """A text stream that neutralises whatever is written to it: the CLI's one printer.
    ``raw`` is the wrapped stream, for the few writers that emit their own control sequences
    (the live progress display) and neutralise their text themselves."""

    def __init__(self, raw: TextIO):
        self.raw = raw

    def write(self, text: str) -> int:
        self.raw.write(neutralise(text))
        return len(text)

    def __getattr__(self, name: str) -> object:  # flush, isatty, fileno, encoding, …
        return getattr(self.raw, name)
