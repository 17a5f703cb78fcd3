"""The done-set: the keys of a run that have an ``ok`` record, which a resume skips.

Built from the log (``log.read_table`` over ``KEYS``, the columns it reads), or from key tuples.
Errors are never done: a resume retries them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from ..core.keys import item_bits, order_bit, plan_keys, slot, sorted_unique
from .log import KEYS, index_segment, read_index, segments

__all__ = ["KEYS", "DoneSet"]


class DoneSet:
    """The keys that have an ``ok`` record: per judge, a sorted array of 61-bit keys (60 bits
    of item id, 1 bit of order) — 8 bytes a key, a million keys in 8 MB, where a Python set
    of key tuples takes about 200 bytes a key. Built from the log with Arrow and NumPy, no
    Python loop per record. Two items of one judge share 60 bits with probability about
    n² / 2⁶¹: for a million items, one in two million. A judge asked ``samples: k`` keeps
    samples 1 … k−1 under their own slots (``core.keys.slot``); sample 0 is the judge id."""

    def __init__(self, keys: dict[str, np.ndarray] | None = None):
        self._keys = {j: sorted_unique(k) for j, k in (keys or {}).items()}

    @classmethod
    def from_log(cls, run_dir: Path) -> DoneSet:
        """The ok keys of every segment: from the segment's keys index where it still matches
        the segment (``log.read_index``: its size and CRC-32, checked on several threads),
        else parsed (``log.index_segment``: Arrow, every field typed, the validity rule
        column-wise), which indexes a sealed segment for the next resume."""
        segs = segments(run_dir)
        with ThreadPoolExecutor(max_workers=min(len(segs), os.cpu_count() or 1) or 1) as pool:
            indexed = list(pool.map(read_index, segs))
        parts: dict[str, list[np.ndarray]] = {}
        for seg, keys in zip(segs, indexed, strict=True):
            for jid, bits in (keys if keys is not None else index_segment(seg)).items():
                parts.setdefault(jid, []).append(bits)
        return cls({jid: np.concatenate(p) for jid, p in parts.items()})

    @classmethod
    def of(cls, keys: Iterable[tuple[str, str, str] | tuple[str, str, str, int]]) -> DoneSet:
        """From (judge_id, item_id, order) or (judge_id, item_id, order, sample) tuples."""
        by_judge: dict[str, list[int]] = {}
        for key in keys:
            judge_id, item_id, order = key[:3]
            name = slot(judge_id, key[3] if len(key) > 3 else 0)
            by_judge.setdefault(name, []).append((item_bits(item_id) << 1) | order_bit(order))
        return cls({j: np.array(v, dtype=np.uint64) for j, v in by_judge.items()})

    def __len__(self) -> int:
        return sum(len(k) for k in self._keys.values())

    def __contains__(self, key: tuple[str, str, str] | tuple[str, str, str, int]) -> bool:
        return self.contains(*key)

    def contains(self, judge_id: str, item_id: str, order: str, sample: int = 0) -> bool:
        keys = self._keys.get(slot(judge_id, sample))
        if keys is None:
            return False
        bits = (item_bits(item_id) << 1) | order_bit(order)
        i = int(np.searchsorted(keys, np.uint64(bits)))
        return i < len(keys) and int(keys[i]) == bits

    def count(self, judge_id: str, item_ids: Sequence[str], samples: int = 1) -> int:
        """How many of (item, order, sample) for these items, both orders and the first
        ``samples`` sample indices, are done for this judge."""
        if not item_ids:
            return 0
        planned = plan_keys(item_ids)
        return sum(self.count_keys(slot(judge_id, s), planned) for s in range(samples))

    def count_keys(self, judge_id: str, wanted: np.ndarray) -> int:
        """How many of these 61-bit keys are done for this judge slot (``core.keys.slot``)."""
        keys = self._keys.get(judge_id)
        if keys is None or not len(wanted):
            return 0
        return int(np.isin(wanted, keys).sum())

    def keys(self, judge_id: str) -> np.ndarray:
        """This judge slot's keys, sorted (``core.keys.slot``: the judge id is its sample 0)."""
        return self._keys.get(judge_id, np.zeros(0, dtype=np.uint64))

    @property
    def nbytes(self) -> int:
        return sum(k.nbytes for k in self._keys.values())
