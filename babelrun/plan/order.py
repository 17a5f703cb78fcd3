"""The order the engine feeds a judge's keys in: seeded, and fair to every cell at any prefix.

A budget, a ``--limit`` or early stopping ends a run part-way, so any prefix of the feed must
be a fair sample: every language within one item (or one reference, ``grouped``) of the others
and, within a language, every (kind, perturbation) cell within one item of the others.

Each cell takes its items in a seeded random order keyed by reference first (``cell_key``):
every cell of a language, and every language of a parallel corpus, takes the references in
one order, so a prefix judges the same references under every perturbation (a paired
comparison) and, fed a reference at a time, a run sends the prompts that share a prefix (the
template, the question, the reference in slot A) one after another. An in-process model keeps
the prefix it evaluated last (llama.cpp's KV cache), so that order is what lets it skip the
tokens it has seen: on the bundled corpus's first 64 calls a batch of 8 evaluates 12,059
prompt tokens fed a reference at a time against 18,967 fed an item at a time.

Stopping by language (``stratified=False``) takes a language's items in their own seeded
order (``order_key``), one i.i.d. draw at a time, the order its sequential test assumes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from itertools import zip_longest
from typing import NamedTuple, TypeVar

T = TypeVar("T")
_GONE = object()  # zip_longest's fill: a sequence that ran out


class Placed(NamedTuple):
    """What the order needs of an item (the plan's survey gives it without the texts)."""

    item_id: str
    lang: str
    cell: tuple[str, str]  # (kind, perturbation)
    ref_id: str


def order_key(seed: int, name: str) -> int:
    """A name's place in a seeded random order (the same in every process)."""
    return int.from_bytes(hashlib.blake2b(f"{seed}:{name}".encode(), digest_size=8).digest(), "big")


def cell_key(seed: int, ref_id: str, item_id: str) -> tuple[int, int]:
    """An item's place in its cell's seeded order: its reference's place, then its own (a
    reference's severities)."""
    return order_key(seed, f"ref:{ref_id}"), order_key(seed, item_id)


def seeded_cell(seed: int, items: Iterable[tuple[str, str]], per_perturbation: bool) -> list[str]:
    """A stopping cell's item ids, given as (reference id, item id), in the order the feed
    issues them: ``cell_key`` order for a (language, perturbation) cell, the language's own
    seeded order for a language (stopping by language feeds unstratified)."""
    if per_perturbation:
        return [iid for _, iid in sorted(items, key=lambda ri: cell_key(seed, *ri))]
    return sorted((iid for _, iid in items), key=lambda iid: order_key(seed, iid))


def round_robin(sequences: Iterable[list[T]]) -> list[T]:
    """The first of every sequence, then the second of every one, …; a short one drops out."""
    return [x for rank in zip_longest(*sequences, fillvalue=_GONE) for x in rank if x is not _GONE]


def _stratified(items: list[Placed], seed: int) -> list[str]:
    """One language's items round-robin over its cells, each cell in ``cell_key`` order."""
    cells: dict[tuple[str, str], list[Placed]] = {}
    for p in items:
        cells.setdefault(p.cell, []).append(p)
    return round_robin([p.item_id for p in sorted(ps, key=lambda p: cell_key(seed, p.ref_id, p.item_id))]
                       for _, ps in sorted(cells.items()))


def _by_reference(items: list[Placed], seed: int) -> list[list[str]]:
    """One language's references in their seeded order, each with its items in cell order
    (consistent with every cell's ``cell_key`` order)."""
    refs: dict[str, list[Placed]] = {}
    for p in items:
        refs.setdefault(p.ref_id, []).append(p)
    return [[p.item_id for p in sorted(refs[r], key=lambda p: (p.cell, order_key(seed, p.item_id)))]
            for r in sorted(refs, key=lambda r: order_key(seed, f"ref:{r}"))]


def interleave(items: Iterable[Placed], seed: int, stratified: bool = True, grouped: bool = False) -> list[str]:
    """Every item id round-robin over the languages (a language that runs out drops out).
    Within a language, ``stratified``: round-robin over its cells; ``grouped`` (stratified
    only): a reference's items together, the languages taking turns a reference at a time;
    else the language's items in their seeded order."""
    langs: dict[str, list[Placed]] = {}
    for p in items:
        langs.setdefault(p.lang, []).append(p)
    ordered = [langs[lang] for lang in sorted(langs)]
    if stratified and grouped:
        return [iid for group in round_robin(_by_reference(ps, seed) for ps in ordered) for iid in group]
    if stratified:
        return round_robin(_stratified(ps, seed) for ps in ordered)
    return round_robin(sorted((p.item_id for p in ps), key=lambda iid: order_key(seed, iid)) for ps in ordered)
