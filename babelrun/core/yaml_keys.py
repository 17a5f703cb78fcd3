"""A manifest's mapping keys as written: YAML 1.1's boolean words stay words.

PyYAML (what ``msgspec.yaml`` reads with) follows YAML 1.1, where a bare ``on``, ``off``,
``yes``, ``no``, ``true`` or ``false`` is a boolean — keys too. A field named by one of those
words (``stopping: {on: verdict}``, as docs/stopping.md writes it) then arrives as the key
``True`` and the typed decoder refuses it ("expected `str` - at `key`"). Every key of a
manifest is a name (a field, a language, a label word), never a boolean, so ``decode`` reads a
plain (unquoted) boolean-looking key as the text it is: ``on`` is the field ``on``, and ``yes``
where no field has that name is an unknown field named as written, not a second spelling of
``on``. Values are read as before: ``on_flip: yes`` is still true.
"""

from __future__ import annotations

import datetime
from functools import cache
from typing import Any

import msgspec

_BOOL = "tag:yaml.org,2002:bool"
_STR = "tag:yaml.org,2002:str"


@cache
def _loader() -> type:
    """PyYAML's safe loader (the C one where installed, as ``msgspec.yaml`` uses), with plain
    boolean-looking mapping keys kept as their text."""
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class KeysAsWritten(base):  # type: ignore[misc, valid-type]
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            for key, _ in node.value:
                if isinstance(key, yaml.ScalarNode) and key.tag == _BOOL and not key.style:
                    key.tag = _STR
            return super().construct_mapping(node, deep)

    return KeysAsWritten


def load(raw: bytes) -> Any:
    """``msgspec.yaml.decode(raw)`` with the keys as written: the same safe loader otherwise,
    the same errors (``msgspec.DecodeError`` for YAML that is none)."""
    import yaml

    try:
        return yaml.load(raw, Loader=_loader())  # noqa: S506 - a safe loader; only its keys differ
    except (yaml.YAMLError, ValueError, LookupError, AttributeError) as e:
        raise msgspec.DecodeError(str(e)) from None


def decode(raw: bytes, type_: Any) -> Any:
    """``msgspec.yaml.decode(raw, type=type_)`` with the keys as written (``load``), then the
    same conversion as msgspec's (a safe load, then ``msgspec.convert``)."""
    return msgspec.convert(load(raw), type_, builtin_types=(datetime.datetime, datetime.date))
