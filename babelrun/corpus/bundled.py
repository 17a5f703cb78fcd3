"""The multilingual corpus that ships inside the package (see ``bundled/README.md``)."""

from __future__ import annotations

from collections.abc import Iterator
from importlib import resources

import msgspec

from ..core import languages


class _Row(msgspec.Struct, forbid_unknown_fields=True):
    id: str
    prompt: str
    reference: str


def _files():
    folder = resources.files(__package__) / "bundled"
    return sorted((f for f in folder.iterdir() if f.name.endswith(".jsonl")), key=lambda f: f.name)


def check(spec, where: str) -> None:
    """The bundled corpus is part of the package: nothing a manifest can get wrong."""


def read(spec) -> Iterator:
    from ..core.items import Reference

    decoder = msgspec.json.Decoder(_Row)
    for f in _files():
        lang = languages.normalize(f.name.removesuffix(".jsonl"))
        for line in f.read_bytes().splitlines():
            if line.strip():
                row = decoder.decode(line)
                yield Reference(lang=lang, ref_id=row.id, prompt=row.prompt, response=row.reference)
