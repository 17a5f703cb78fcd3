"""The identities of a run's keys, as numbers: no I/O.

A pairwise record's key is ``(judge_id, item_id, order)``, a pointwise one's ``(judge_id,
item_id, answer)`` (kept in the same field). For sets of millions of keys it is packed into
61 bits (60 bits of the item id, 1 bit of the order: 1 for ``pert_first`` and for a
pointwise ``degraded``): the done-set, the compacted ``item_key`` column and the shard hash
all use this one packing, for both protocols.

A judge asked ``samples: k`` times per presentation keys each answer by a sample index too
(0 … k−1). Sample 0 packs exactly as a key did before samples existed (so old logs, indexes
and shards stay valid); sample s > 0 keeps the same 61 bits under its own *slot* of the judge,
``slot(judge_id, s)`` = ``judge_id~s``: the done-set, the segment indexes, the compaction's
duplicate check and the shard hash hold one sorted key array per slot. Judge ids are hex, so
a slot name never collides with a judge id.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable, Iterator, Sequence
from typing import overload

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import UserError
from .bounds import MAX_SAMPLES as MAX_SAMPLES  # a judge's samples of one presentation, at most

_HEX = np.full(256, 255, dtype=np.uint8)
_HEX[np.frombuffer(b"0123456789", np.uint8)] = np.arange(10)
_HEX[np.frombuffer(b"abcdef", np.uint8)] = np.arange(10, 16)
_ITEM_HEX = 15  # item ids are blake2b hex; their first 15 digits (60 bits) identify them



_SLOT = "~"


def slot(judge_id: str, sample: int = 0) -> str:
    """The done-set's name for one sample index of a judge: the judge id itself for sample 0."""
    return judge_id if sample == 0 else f"{judge_id}{_SLOT}{sample}"


def judge_of_slot(name: str) -> tuple[str, int]:
    """(judge_id, sample) of a slot name (``slot``'s inverse)."""
    judge_id, _, sample = name.partition(_SLOT)
    return judge_id, int(sample) if sample else 0


def sample_seed(seed: int, item_id: str, order: str, sample: int) -> int:
    """The seed sent with one sample of one presentation when a judge sets ``seed``: a hash of
    the judge's seed, the item, the order and the sample index, so that a provider that honours
    seeds gives distinct samples, and the same ones again on a resume (31 bits: every API takes it)."""
    blob = f"{seed}\x1f{item_id}\x1f{order}\x1f{sample}".encode()
    return int.from_bytes(hashlib.blake2b(blob, digest_size=8).digest(), "little") >> 33


# The second value of each protocol's key (the key bit set): pairwise, then pointwise.
SECOND = ("pert_first", "degraded")


def order_bit(order: str) -> int:
    return 1 if order in SECOND else 0


def item_bits(item_id: str) -> int:
    """60 bits that stand for an item id: its first 15 hex digits (item ids are blake2b
    digests), or a blake2b of the id for any id that is not hex."""
    head = item_id[:_ITEM_HEX]
    if len(head) == _ITEM_HEX:
        try:
            return int(head, 16)
        except ValueError:
            pass
    return int.from_bytes(hashlib.blake2b(item_id.encode(), digest_size=8).digest(), "little") >> 4


_HEX_PAIR = np.full(1 << 16, 0xFFFF, dtype=np.uint16)  # two ASCII hex digits -> their byte
for _hi, _a in enumerate(b"0123456789abcdef"):
    for _lo, _b in enumerate(b"0123456789abcdef"):
        _HEX_PAIR[_a | (_b << 8)] = (_hi << 4) | _lo  # little-endian uint16 view of "ab"


def item_bits_column(item_ids: pa.Array) -> np.ndarray:
    """``item_bits`` for a whole column at once, straight from Arrow's string buffer."""
    n = len(item_ids)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    offsets = np.frombuffer(item_ids.buffers()[1], dtype=np.int32, count=n + 1, offset=item_ids.offset * 4)
    data = np.frombuffer(item_ids.buffers()[2], dtype=np.uint8)
    width = int(offsets[1] - offsets[0])
    if width >= 16 and width % 2 == 0 and (np.diff(offsets) == width).all():
        # Every id is hex of one even width (ours: 20): read each id's first 16 digits as 8
        # digit pairs, map pairs to bytes, and take the 60 high bits of that big-endian word.
        block = data[offsets[0]: offsets[0] + n * width].reshape(n, width)[:, :16]
        pairs = np.ascontiguousarray(block).view(np.uint16)
        decoded = _HEX_PAIR[pairs]
        good = (decoded != 0xFFFF).all(axis=1)
        word = decoded.astype(np.uint8).view(">u8").reshape(n).astype(np.uint64)
        out = word >> np.uint64(4)
    else:
        out = np.zeros(n, dtype=np.uint64)
        good = np.zeros(n, dtype=bool)
    for i in np.flatnonzero(~good):  # ids that are not hex of one width: rare, one by one
        out[i] = item_bits(item_ids[i].as_py())
    return out


def keys_by_judge(table: pa.Table) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """For each judge slot in ``table`` (columns judge_id, item_id, order, and sample where
    the table has it): its rows and their 61-bit keys (60 bits of item id, 1 bit of order).
    The slot is the judge id for sample 0 (``slot``)."""
    if table.num_rows == 0:
        return []
    judge = pc.dictionary_encode(table["judge_id"]).combine_chunks()
    codes = judge.indices.to_numpy(zero_copy_only=False)
    bits = key_bits(item_bits_column(table["item_id"].combine_chunks()),
                     second_column(table["order"]))
    samples = sample_column(table)
    out = []
    for j, jid in enumerate(judge.dictionary.to_pylist()):
        rows = np.flatnonzero(codes == j)
        if samples is None or not samples[rows].any():
            out.append((jid, rows, bits[rows]))
            continue
        for s in np.unique(samples[rows]).tolist():
            mine = rows[samples[rows] == s]
            out.append((slot(jid, int(s)), mine, bits[mine]))
    return out


def sample_column(table: pa.Table) -> np.ndarray | None:
    """The table's sample indices (a missing or null sample is 0), or None without the column."""
    if "sample" not in table.column_names:
        return None
    out: np.ndarray = np.asarray(pc.fill_null(table["sample"], 0).to_numpy(zero_copy_only=False), dtype=np.int64)
    return out


def second_column(order: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """``order_bit`` of an Arrow column (plain or dictionary strings)."""
    bits: np.ndarray = pc.is_in(order, value_set=pa.array(SECOND)).to_numpy(zero_copy_only=False)
    return bits


def sorted_unique(keys: np.ndarray) -> np.ndarray:
    # Sort and drop repeats; np.unique hashes instead, three times slower on a million keys.
    keys = np.sort(keys.astype(np.uint64))
    return keys[np.concatenate(([True], keys[1:] != keys[:-1]))] if len(keys) else keys


def key_bits(item: np.ndarray, second_order: np.ndarray) -> np.ndarray:
    return (item << np.uint64(1)) | second_order.astype(np.uint64)


# ---- shards -------------------------------------------------------------------------------

_MASK64 = (1 << 64) - 1


@functools.lru_cache(maxsize=64)
def _judge_word(judge_id: str) -> int:
    return int.from_bytes(hashlib.blake2b(judge_id.encode(), digest_size=8).digest(), "little")


def _mix(x: int) -> int:
    """splitmix64's finalizer: every input bit moves every output bit, so ``mod N`` is even."""
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def _mix_array(x: np.ndarray) -> np.ndarray:
    """``_mix`` over a uint64 array (NumPy's uint64 products wrap modulo 2**64, as wanted)."""
    x = x.astype(np.uint64)
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    mixed: np.ndarray = x ^ (x >> np.uint64(31))
    return mixed


MAX_SHARDS = 1 << 20  # far more processes than any run has; keeps N inside 64-bit arithmetic


class Shard(msgspec.Struct, frozen=True):
    """Shard ``index`` of ``count``: the keys whose mixed (judge_id, item_id, order) word is
    ``index`` mod ``count``. The word is the done-set's 61-bit key XOR 64 bits of the judge
    id, so a key's shard is the same on every machine and in every run."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``"i/N"`` with 0 <= i < N."""
        try:
            i, n = (int(part) for part in text.split("/"))
        except ValueError:
            raise UserError(f"--shard {text!r}: expected i/N, e.g. 0/4") from None
        if not 0 <= i < n:
            raise UserError(f"--shard {text!r}: need 0 <= i < N")
        if n > MAX_SHARDS:
            raise UserError(f"--shard {text!r}: at most {MAX_SHARDS} shards")
        return cls(i, n)

    @property
    def tag(self) -> str:
        return f"s{self.index}of{self.count}"

    def contains(self, judge_id: str, item_id: str, order: str, sample: int = 0) -> bool:
        key = (item_bits(item_id) << 1) | order_bit(order)
        return _mix(key ^ _judge_word(slot(judge_id, sample))) % self.count == self.index

    def mask(self, judge_id: str, keys: np.ndarray) -> np.ndarray:
        """Which of these 61-bit keys (``key_bits``) of one judge slot (``slot``) are in this shard."""
        words = keys.astype(np.uint64) ^ np.uint64(_judge_word(judge_id))
        inside: np.ndarray = _mix_array(words) % np.uint64(self.count) == np.uint64(self.index)
        return inside


class ItemIds(Sequence[str]):
    """A plan's item ids, in plan order, packed: the 20 hex digits of each (``item_id``'s
    10-byte blake2b) as 10 bytes of one bytearray. A list held a 69-byte str for each (~9 MB
    for a 127,000-item plan), made among the survey's short-lived strings of the same size
    and alive all through judging, so the allocator's pools they shared stayed in use after
    the rest was freed. An id of another form is kept as it is, apart. Reads make the strs
    anew (equal, not the same objects)."""

    _WIDTH = 10  # bytes a packed id takes

    def __init__(self, ids: Iterable[str] = ()):
        self._packed = bytearray()
        self._other: dict[int, str] = {}  # position -> an id that is not 20 lowercase hex digits
        for iid in ids:
            self.append(iid)

    def append(self, iid: str) -> None:
        raw = None
        if len(iid) == 2 * self._WIDTH:
            try:
                raw = bytes.fromhex(iid)
            except ValueError:
                pass
        if raw is None or raw.hex() != iid:  # not hex, or not as ``hexdigest`` writes it
            self._other[len(self)] = iid
            raw = bytes(self._WIDTH)
        self._packed += raw

    def __len__(self) -> int:
        return len(self._packed) // self._WIDTH

    def _at(self, i: int) -> str:
        other = self._other.get(i) if self._other else None
        return other if other is not None else self._packed[i * self._WIDTH:(i + 1) * self._WIDTH].hex()

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [self._at(k) for k in range(*i.indices(len(self)))]
        n = len(self)
        if not -n <= i < n:
            raise IndexError("item id index out of range")
        return self._at(i % n)

    def __iter__(self) -> Iterator[str]:
        return (self._at(k) for k in range(len(self)))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ItemIds):
            return self._packed == other._packed and self._other == other._other
        return isinstance(other, Sequence) and not isinstance(other, str) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]  # mutable, as a list

    def __repr__(self) -> str:
        return f"ItemIds({len(self)} ids)"

    def bits(self) -> np.ndarray:
        """``item_bits`` of every id, in order: the 60 high bits of each packed id's first 8
        bytes (its first 15 hex digits), without making a str."""
        words = np.frombuffer(bytes(self._packed), dtype=np.uint8).reshape(-1, self._WIDTH)[:, :8]
        bits: np.ndarray = words.copy().view(">u8").ravel().astype(np.uint64) >> np.uint64(4)
        for i, iid in self._other.items():
            bits[i] = item_bits(iid)
        return bits


def plan_keys(item_ids: Sequence[str]) -> np.ndarray:
    """The 61-bit keys of these items in both orders (ref_first, then pert_first)."""
    items = item_ids.bits() if isinstance(item_ids, ItemIds) else \
        np.array([item_bits(i) for i in item_ids], dtype=np.uint64)
    return np.concatenate([key_bits(items, np.zeros(len(items), bool)),
                           key_bits(items, np.ones(len(items), bool))])


