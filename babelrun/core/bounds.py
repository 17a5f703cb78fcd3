"""The bounds every number and structure from outside is held to (docs/operations.md, "Bounds").

Numbers a provider, a Python judge or a hand-edited log supplies are bounded where they enter:
a token count is a whole number in ``[0, MAX_COUNT]`` (above it clamped, anything else unknown),
and a log record's integers fit Arrow's int64 (a line that does not is a bad line, skipped and
named). Structures are bounded before they are expanded: a YAML document may hold at most
``MAX_YAML_ALIASES`` aliases, expand to at most ``MAX_YAML_NODES`` nodes and nest at most
``MAX_DEPTH`` levels, all checked on the event stream (nothing is built); a JSON value nested
past the decoder's recursion limit is refused by ``decode_json`` with one line.

No I/O: values in, values (or ``BoundError``) out.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar

MAX_SAMPLES = 100  # samples of one presentation a judge may be asked for (G-Eval's protocol: 20)

MAX_COUNT = 10**15  # tokens, lengths: far above any real call, far below int64 and float64's exact range
INT64 = (-(2**63), 2**63 - 1)
MAX_DEPTH = 64  # nesting levels of a manifest or a YAML prompt collection
MAX_YAML_ALIASES = 100  # aliases (*name) in one YAML document
MAX_YAML_NODES = 100_000  # nodes of a YAML document with every alias expanded

_T = TypeVar("_T")


class BoundError(ValueError):
    """An input past one of the bounds above; the message is one line for the user."""


def count(value: object) -> int | None:
    """A token count (or length) as babelrun keeps it: a whole number, clamped to
    ``[0, MAX_COUNT]`` above; a negative, fractional, non-finite or non-numeric value is
    unknown (None), never a value the log cannot read back."""
    if value is None or (type(value) is int and 0 <= value <= MAX_COUNT):  # the usual: once per call
        return value
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        if not math.isfinite(value) or value != int(value):
            return None
        value = int(value)
    if not isinstance(value, int) or value < 0:
        return None
    return min(value, MAX_COUNT)


def in_int64(value: int) -> bool:
    return INT64[0] <= value <= INT64[1]


def decode_json(decode: Callable[[Any], _T], data: Any) -> _T:
    """``decode(data)``, with a value nested past the decoder's recursion limit refused as
    ``BoundError`` (one line) instead of a ``RecursionError`` traceback."""
    try:
        return decode(data)
    except RecursionError:
        raise BoundError("nested too deeply (more than about 1,000 levels of [ or {)") from None


def check_yaml(raw: bytes | str) -> None:
    """Refuse (``BoundError``) a YAML text past the alias, expansion or depth bounds, before
    anything is composed or expanded: one pass over the parser's events, with each anchor's
    expanded size remembered, so a 547-byte alias bomb is refused in microseconds. A text
    the parser cannot read passes: the decoder reports it."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    starts = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
    ends = (yaml.MappingEndEvent, yaml.SequenceEndEvent)
    sizes: dict[str, int] = {}  # anchor -> its node count, aliases expanded
    open_: list[list[Any]] = []  # [anchor, nodes so far] of each open collection
    total = aliases = 0

    def add(nodes: int) -> None:
        nonlocal total
        total += nodes
        if total > MAX_YAML_NODES:
            raise BoundError(f"expands to more than {MAX_YAML_NODES:,} nodes (YAML aliases): refused")

    def child(nodes: int) -> None:
        if open_:
            open_[-1][1] += nodes

    try:
        for event in yaml.parse(raw, Loader=loader):
            if isinstance(event, yaml.AliasEvent):
                aliases += 1
                if aliases > MAX_YAML_ALIASES:
                    raise BoundError(f"more than {MAX_YAML_ALIASES} YAML aliases (*name): refused")
                size = sizes.get(str(event.anchor), 1)
                add(size)
                child(size)
            elif isinstance(event, yaml.ScalarEvent):
                if event.anchor is not None:
                    sizes[str(event.anchor)] = 1
                add(1)
                child(1)
            elif isinstance(event, starts):
                add(1)
                open_.append([event.anchor, 1])
                if len(open_) > MAX_DEPTH:
                    raise BoundError(f"nested more than {MAX_DEPTH} levels deep: refused")
            elif isinstance(event, ends) and open_:
                anchor, nodes = open_.pop()
                if anchor is not None:
                    sizes[str(anchor)] = nodes
                child(nodes)
    except yaml.YAMLError:
        return


__all__ = ["INT64", "MAX_COUNT", "MAX_DEPTH", "MAX_YAML_ALIASES", "MAX_YAML_NODES", "BoundError", "check_yaml",
           "count", "decode_json", "in_int64"]
