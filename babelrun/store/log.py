"""The verdict log: the run's source of truth.

Append-only JSON Lines segments under ``RUN_DIR/log/``, one record per finished call of a
(judge_id, item_id, order) key. Each process writes its own segments, named by the writer
(host, pid, start time, sequence), so segments from several processes merge by
concatenation; a key's first ``ok`` record is the one that counts, which makes merging
idempotent. A segment is closed and a new one opened past ``segment_bytes``.

Durability. The writer hands each batch of records to the OS in one ``write`` call, so a
process that is killed (SIGKILL, OOM, Ctrl-C) loses nothing it wrote: the page cache
outlives the process. Against power loss or a kernel crash, ``fsync="interval"`` (default)
syncs at most every ``fsync_interval`` seconds, at rotation and at close — the window of
loss is that interval; ``fsync="batch"`` syncs after every batch — the window is the batch
in flight, at a cost in throughput. A crash can leave a torn last line; ``repair`` cuts it
off before the next run appends, and the key is judged again. Rotation happens between
batches, so a segment can pass ``segment_bytes`` by one batch. Errors are recorded but are
never done: a resume retries them.

The done-set (the keys with an ``ok`` record) is ``store/done.py``; the run directory's lock,
and how shards share a run directory, ``store/lock.py``.
"""

from __future__ import annotations

import io
import math
import os
import socket
import time
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Literal

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson

from ..core import bounds
from ..core.keys import MAX_SAMPLES, Shard, keys_by_judge
from ..core.records import ANSWERS, ORDERS, Record
from .files import check_not_link, open_nofollow, safe_dir
from .lock import RunLock

__all__ = ["KEYS", "BadLine", "LogWriter", "Record", "RunLock", "Shard", "decode_line", "final_records",
           "index_segment", "read", "read_index", "read_table", "repair", "segments", "stream_segment"]

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Record)


def segments(run_dir: Path) -> list[Path]:
    """The log's segment files (not a directory that happens to be named ``*.jsonl``)."""
    return sorted(p for p in (run_dir / "log").glob("*.jsonl") if p.is_file())


def repair(run_dir: Path, shard: Shard | None = None) -> int:
    """Cut a torn (unterminated) last line off every segment (only ``shard``'s, when given),
    and delete empty segments. Returns the bytes removed. Runs under the run lock (or the
    shard's): none of the segments it touches has a live writer."""
    removed = 0
    prefix = f"{shard.tag}-" if shard is not None else ""
    check_not_link(run_dir / "log")
    for seg in segments(run_dir):
        if not seg.name.startswith(prefix):
            continue
        fd = open_nofollow(seg, os.O_RDWR)  # a link planted as a segment: refused, its target never cut
        with os.fdopen(fd, "rb+") as f:
            size = os.fstat(fd).st_size
            if size == 0:
                seg.unlink()  # a writer killed before its first record
                continue
            f.seek(-1, os.SEEK_END)
            if f.read(1) == b"\n":
                continue
            # Walk back to the last newline; everything after it is a partial record.
            block = min(size, 1 << 16)
            pos = size
            cut = 0
            while pos > 0:
                start = max(0, pos - block)
                f.seek(start)
                chunk = f.read(pos - start)
                nl = chunk.rfind(b"\n")
                if nl >= 0:
                    cut = start + nl + 1
                    break
                pos = start
            f.truncate(cut)
            removed += size - cut
    return removed


def _complete_lines(seg: Path) -> Iterator[bytes]:
    with seg.open("rb") as f:
        for line in f:
            if line.endswith(b"\n"):  # a torn last line belongs to a writer still running
                yield line


# ---- one reader, two speeds ---------------------------------------------------------------
#
# A record is valid when it decodes as a ``Record`` (every required field, every field of its
# type, its integers inside int64 and its floats finite, status/verdict/slot among their
# values) and an ``ok`` record names its verdict and slot. Both read paths apply this one
# rule: ``read`` decodes line by line with msgspec;
# ``stream_segment`` parses a segment with Arrow (fast) and checks the same rule column-wise,
# and when Arrow refuses the segment or a check fails, it reads that segment line by line
# (``_valid_lines``), skipping each bad line and naming it (``BadLine``). A bad line never
# stops a reader: one torn write, a power loss's NULs or a hand edit cannot brick a run.


class BadLine(msgspec.Struct, frozen=True):
    """A log line no reader counts: ``segment:line`` and why."""

    segment: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.segment}:{self.line} ({self.reason})"


_ORDERS = (*ORDERS, *ANSWERS)  # pairwise orders, pointwise answers
_REQUIRED = ("judge_id", "item_id", "order", "status", "judge", "kind", "lang", "perturbation",
             "severity", "ref_len", "pert_len")
_INTS = ("ref_len", "pert_len", "attempts", "tokens_in", "tokens_out", "seed")
_FLOATS = ("severity", "latency_ms", "ts", "p_a", "p_b", "p_tie", "score", "temperature")
_VALUES = {"order": _ORDERS, "status": ("ok", "error"), "verdict": ("reference", "perturbed", "tie", "invalid"),
           "slot": ("A", "B", "tie", "invalid")}


def _problem(record: Record) -> str | None:
    """What the type alone does not say is wrong with a decoded record, if anything. An ok
    record carries its verdict: a slot and a verdict (pairwise), or a score or ``invalid``
    (pointwise, keyed by the answer judged)."""
    if record.order not in _ORDERS:
        return f"order {record.order[:20]!r}"
    if not 0 <= record.sample < MAX_SAMPLES:
        return "sample out of range"
    for name in _INTS:  # Arrow reads int64: a larger number (a hand edit, 10^20) is a bad line, not a crash
        value = getattr(record, name)
        if value is not None and not bounds.in_int64(value):
            return f"{name} out of range"
    for name in _FLOATS:
        value = getattr(record, name)
        if value is not None and not math.isfinite(value):
            return f"{name} not finite"
    if record.status != "ok":
        return None
    if record.order in ANSWERS:
        return None if record.score is not None or record.verdict == "invalid" else "ok record without a score"
    if record.verdict is None or record.slot is None:
        return "ok record without a verdict"
    return None


def decode_line(line: bytes) -> Record | str:
    """A log line as a valid ``Record``, or the reason it is not one."""
    try:
        record = _decoder.decode(line)
    except msgspec.DecodeError as e:  # includes ValidationError
        return str(e)[:120]
    return _problem(record) or record


def read(run_dir: Path, bad: list[BadLine] | None = None) -> Iterator[Record]:
    """Every valid record in every segment, in segment order; invalid lines are skipped (and
    appended to ``bad``, when given)."""
    for seg in segments(run_dir):
        yield from _valid_records(seg, bad)


def _valid_records(seg: Path, bad: list[BadLine] | None) -> Iterator[Record]:
    """A segment's valid records; each invalid line named in ``bad`` (when given)."""
    for number, line in _numbered(seg, bad):
        if not line.strip():
            continue
        decoded = decode_line(line)
        if isinstance(decoded, str):
            if bad is not None:
                bad.append(BadLine(seg.name, number, decoded))
            continue
        yield decoded


def _numbered(seg: Path, bad: list[BadLine] | None) -> Iterator[tuple[int, bytes]]:
    """A segment's complete lines, numbered from 1; an unreadable segment is one bad line 0."""
    try:
        yield from enumerate(_complete_lines(seg), start=1)
    except OSError as e:
        if bad is not None:
            bad.append(BadLine(seg.name, 0, f"unreadable: {e.strerror or e}"))


def _source(seg: Path) -> Path | io.BytesIO:
    """The segment to parse: its path, or its bytes up to the last newline when the last line
    is torn (a writer still running, or one killed mid-write before a repair)."""
    with seg.open("rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - 1))
        if size > 0 and f.read(1) == b"\n":
            return seg
    data = seg.read_bytes()
    return io.BytesIO(data[: data.rfind(b"\n") + 1])


def _parse_options(schema: pa.Schema) -> pajson.ParseOptions:
    return pajson.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")


_TYPES = {
    "severity": pa.float64(), "ref_len": pa.int64(), "pert_len": pa.int64(),
    "latency_ms": pa.float64(), "attempts": pa.int64(), "tokens_in": pa.int64(),
    "tokens_out": pa.int64(), "ts": pa.float64(), "p_a": pa.float64(), "p_b": pa.float64(),
    "p_tie": pa.float64(), "score": pa.float64(), "cached": pa.bool_(), "tokens_cached": pa.int64(),
    "truncated": pa.bool_(), "tokens_cache_write": pa.int64(), "sample": pa.int64(), "seed": pa.int64(),
    "temperature": pa.float64(),
}
# Every field of a record, typed: the fast path parses all of them whatever the caller asked
# for, so that a wrong-typed field anywhere refuses the line on both paths alike (the done-set
# and the compaction never disagree about a record).
RECORD_SCHEMA = pa.schema([(f.name, _TYPES.get(f.name, pa.string())) for f in msgspec.structs.fields(Record)])


def _all_valid(batch: pa.RecordBatch | pa.Table) -> bool:
    """The validity rule, column-wise (types were enforced by the parse)."""
    for name in _REQUIRED:
        if batch.column(name).null_count:
            return False
    for name, allowed in _VALUES.items():
        column = batch.column(name)
        if not pc.all(pc.or_kleene(pc.is_null(column), pc.is_in(column, pa.array(allowed)))).as_py():
            return False
    sample = batch.column("sample")
    if sample.null_count < len(sample) and not pc.all(pc.fill_null(
            pc.and_(pc.greater_equal(sample, 0), pc.less(sample, MAX_SAMPLES)), True)).as_py():
        return False
    ok = pc.equal(batch.column("status"), "ok")
    verdict = batch.column("verdict")
    slotless = pc.or_(pc.is_null(verdict), pc.is_null(batch.column("slot")))
    scoreless = pc.and_(pc.is_null(batch.column("score")), pc.fill_null(pc.not_equal(verdict, "invalid"), True))
    missing = pc.if_else(pc.is_in(batch.column("order"), pa.array(ANSWERS)), scoreless, slotless)
    return not pc.any(pc.and_(ok, missing)).as_py()


def _fast(seg: Path, schema: pa.Schema, block_bytes: int, threads: bool) -> list[pa.RecordBatch] | None:
    """The segment parsed by Arrow, every row valid; None when Arrow refuses it (a bad line,
    a line longer than a block) or a row breaks the rule."""
    source = _source(seg)
    if isinstance(source, io.BytesIO) and not source.getbuffer().nbytes:
        return []
    full = RECORD_SCHEMA
    options = pajson.ReadOptions(use_threads=threads, block_size=block_bytes)
    try:
        if threads:  # the whole segment at once, on every core (the done-set at start-up)
            table = pajson.read_json(source, parse_options=_parse_options(full), read_options=options)
            batches, checked = table.to_batches(), [table]
        else:
            batches = list(pajson.open_json(source, parse_options=_parse_options(full), read_options=options))
            checked = batches
    except (pa.ArrowInvalid, OSError):
        return None
    if not all(_all_valid(part) for part in checked):
        return None
    return [b.select(schema.names) for b in batches]


def _valid_lines(seg: Path, bad: list[BadLine] | None) -> Iterator[bytes]:
    for record in _valid_records(seg, bad):
        yield _encoder.encode(record) + b"\n"  # re-encoded: one form Arrow always parses


def _slow(seg: Path, schema: pa.Schema, block_bytes: int, bad: list[BadLine] | None) -> Iterator[pa.RecordBatch]:
    """The segment's valid lines, parsed by Arrow a block of lines at a time (a block is never
    smaller than its longest line, so one huge reply cannot straddle two)."""
    options = _parse_options(schema)
    block: list[bytes] = []
    size = 0

    def parse() -> Iterator[pa.RecordBatch]:
        data = b"".join(block)
        longest = max(len(line) for line in block)
        table = pajson.read_json(io.BytesIO(data), parse_options=options,
                                 read_options=pajson.ReadOptions(use_threads=False,
                                                                 block_size=max(block_bytes, longest + 1)))
        yield from table.to_batches()

    for line in _valid_lines(seg, bad):
        block.append(line)
        size += len(line)
        if size >= block_bytes:
            yield from parse()
            block, size = [], 0
    if block:
        yield from parse()


def stream_segment(seg: Path, schema: pa.Schema, block_bytes: int = 4 << 20,
                   bad: list[BadLine] | None = None, threads: bool = False) -> Iterator[pa.RecordBatch]:
    """The given columns of one segment's valid records, in record batches of about
    ``block_bytes`` of JSON each (memory: one segment's batches, as a segment is checked whole
    before any of it is used). Fields outside ``schema`` are skipped; a torn last line is left
    out; invalid lines are skipped and appended to ``bad``."""
    try:
        batches = _fast(seg, schema, block_bytes, threads)
    except OSError as e:  # unreadable (a directory named *.jsonl, permissions)
        if bad is not None:
            bad.append(BadLine(seg.name, 0, f"unreadable: {e.strerror or e}"))
        return
    if batches is not None:
        yield from batches
    else:
        yield from _slow(seg, schema, block_bytes, bad)


def read_segment(seg: Path, schema: pa.Schema, *, threads: bool = False,
                 bad: list[BadLine] | None = None) -> pa.Table:
    """``stream_segment`` as one table (``threads``: Arrow parses with several threads)."""
    batches = list(stream_segment(seg, schema, bad=bad, threads=threads))
    return pa.Table.from_batches(batches, schema=schema) if batches else schema.empty_table()


def read_table(run_dir: Path, schema: pa.Schema, *, threads: bool = False,
               bad: list[BadLine] | None = None) -> pa.Table:
    """``read_segment`` over every segment, concatenated."""
    parts = [read_segment(seg, schema, threads=threads, bad=bad) for seg in segments(run_dir)]
    return pa.concat_tables(parts) if parts else schema.empty_table()


# ---- the keys index of a sealed segment ---------------------------------------------------
#
# A resume needs only the keys of the ok records. For a segment that no longer grows, they
# are kept beside it in ``log/keys/<segment>.keys``: a header line (the segment's size and
# CRC-32 when indexed, and each judge's key count) and the judges' sorted 61-bit keys as
# little-endian uint64. The index counts only while the segment is what was indexed: same
# size, same CRC-32 (an append, a repair's cut, a torn write or a hand edit all change one
# of them); otherwise the segment is parsed again, by the same rule as ever. The writer
# indexes each segment it seals (rotation, close); the done-set indexes the sealed segments
# it had to parse (logs written before the index, a writer killed before it sealed).

# The log columns a done-set is built from (and that count a run's ok records).
KEYS = pa.schema([("judge_id", pa.string()), ("item_id", pa.string()),
                  ("order", pa.string()), ("status", pa.string()), ("sample", pa.int64())])
INDEX_DIR = "keys"
INDEX_MIN_BYTES = 1 << 20  # smaller segments are parsed in milliseconds: not worth a file
_INDEX_VERSION = 1


class _IndexHeader(msgspec.Struct, frozen=True):
    version: int
    size: int
    crc32: int
    judges: list[tuple[str, int]]


def index_path(seg: Path) -> Path:
    return seg.parent / INDEX_DIR / f"{seg.name}.keys"


def checksum(seg: Path, block_bytes: int = 1 << 20) -> tuple[int, int]:
    """(size, CRC-32) of a segment's bytes, read in blocks into one buffer (zlib releases
    the GIL: segments can be checked on several threads)."""
    crc, size = 0, 0
    buf = bytearray(block_bytes)
    view = memoryview(buf)
    with seg.open("rb", buffering=0) as f:
        while n := f.readinto(buf):
            crc = zlib.crc32(view[:n], crc)
            size += n
    return size, crc


def ok_keys(table: pa.Table) -> dict[str, np.ndarray]:
    """Each judge's 61-bit keys (``core.keys``) of the ok records in ``table`` (``KEYS``)."""
    table = table.filter(pc.equal(table["status"], "ok"))
    return {jid: bits for jid, _, bits in keys_by_judge(table)}


def read_index(seg: Path) -> dict[str, np.ndarray] | None:
    """The segment's ok keys from its index, when there is one and the segment is still
    what was indexed (its size and CRC-32); None otherwise."""
    path = index_path(seg)
    try:
        with path.open("rb") as f:
            header = msgspec.json.decode(f.readline(), type=_IndexHeader)
            body = f.read()
        if header.version != _INDEX_VERSION or seg.stat().st_size != header.size:
            return None
        if checksum(seg) != (header.size, header.crc32):
            return None
    except (OSError, msgspec.DecodeError):
        return None
    counts = [n for _, n in header.judges]
    if len(body) != 8 * sum(counts):
        return None
    keys = np.frombuffer(body, dtype="<u8").astype(np.uint64)
    out, at = {}, 0
    for (jid, n) in header.judges:
        out[jid] = keys[at: at + n]
        at += n
    return out


def write_index(seg: Path, size: int, crc: int, keys: dict[str, np.ndarray]) -> None:
    """Write a segment's index (atomically: a reader sees the old one, the new one or none).
    Best effort: a run directory that cannot be written keeps working without one."""
    from ..core.keys import sorted_unique

    judged = {jid: sorted_unique(k) for jid, k in keys.items()}
    header = _IndexHeader(_INDEX_VERSION, size, crc, [(jid, len(k)) for jid, k in judged.items()])
    path = index_path(seg)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(exist_ok=True)
        with tmp.open("wb") as f:
            f.write(msgspec.json.encode(header) + b"\n")
            for k in judged.values():
                f.write(k.astype("<u8").tobytes())
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)


def index_segment(seg: Path) -> dict[str, np.ndarray]:
    """Parse a segment for its ok keys (``read_segment``, the one validity rule) and, when it
    is sealed-looking (at least ``INDEX_MIN_BYTES``, ending in a whole line, unchanged while
    it was read), write its index."""
    try:
        before = seg.stat().st_size
    except OSError:
        before = -1
    keys = ok_keys(read_segment(seg, KEYS, threads=True))  # an unreadable segment: no keys (a BadLine)
    if before >= INDEX_MIN_BYTES:
        try:
            size, crc = checksum(seg)
            if size == before and ends_whole(seg):
                write_index(seg, size, crc, keys)
        except OSError:
            pass
    return keys


def ends_whole(seg: Path) -> bool:
    """Whether the segment's last byte ends a line."""
    with seg.open("rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def final_records(records: Iterable[Record]) -> list[Record]:
    """One record per key: its first ``ok`` record; keys that never succeeded are left out."""
    seen: dict[tuple[str, str, str] | tuple[str, str, str, int], Record] = {}
    for r in records:
        if r.status == "ok" and r.key not in seen:
            seen[r.key] = r
    return [seen[k] for k in sorted(seen)]


class LogWriter:
    """Appends records to this process's own segments. One task owns it (the engine's writer)."""

    def __init__(self, run_dir: Path, *, fsync: Literal["interval", "batch"] = "interval",
                 fsync_interval: float = 1.0, segment_bytes: int = 16 << 20,
                 shard: Shard | None = None):
        self.run_dir = run_dir
        self._dir = safe_dir(run_dir, "log")
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        owner = f"{shard.tag}-" if shard is not None else ""  # a shard repairs only its own
        self._stem = f"{owner}{socket.gethostname()}-{os.getpid()}-{stamp}"
        self._fsync_every_batch = fsync == "batch"
        self._fsync_interval = fsync_interval
        self._segment_bytes = segment_bytes
        self._sequence = 0
        self._fd = -1
        self._size = 0
        self._last_sync = time.monotonic()
        self.written = 0
        self.paths: list[Path] = []  # opened on the first write: no empty segments
        self.sealed: list[Path] = []  # closed segments not indexed yet (``index_sealed``)

    def _open_next(self) -> None:
        self._sequence += 1
        path = self._dir / f"{self._stem}-{self._sequence:04d}.jsonl"
        self._fd = open_nofollow(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._size = 0
        self.paths.append(path)

    def _close_current(self) -> None:
        if self._fd < 0:
            return
        os.fsync(self._fd)
        os.close(self._fd)
        self._fd = -1
        if self._size == 0:
            self.paths.pop().unlink(missing_ok=True)  # leave no empty segments behind
        elif self._size >= INDEX_MIN_BYTES:
            self.sealed.append(self.paths[-1])

    def index_sealed(self) -> None:
        """Index the segments sealed so far (``index_segment``); the engine's writer task runs
        it off the event loop after a rotation, ``close`` for the last segment."""
        while self.sealed:
            seg = self.sealed.pop(0)
            try:
                index_segment(seg)
            except OSError:
                pass  # no index: a resume parses the segment, as before indexes

    def write_batch(self, records: list[Record]) -> bool:
        """Append ``records`` in one write. Returns whether an fsync is due now under the
        policy; the caller runs ``sync`` (off the event loop: it can take milliseconds)."""
        if not records:
            return False
        if self._fd < 0 or self._size >= self._segment_bytes:
            self._close_current()
            self._open_next()
        buf = bytearray()
        for r in records:
            _encoder.encode_into(r, buf, len(buf))
            buf += b"\n"
        view = memoryview(buf)
        try:
            while view:
                n = os.write(self._fd, view)
                view = view[n:]
        except OSError as e:  # a full disk: name the segment (a torn last line is repaired on resume)
            raise OSError(e.errno, e.strerror, str(self.paths[-1])) from None
        self._size += len(buf)
        self.written += len(records)
        return self._fsync_every_batch or time.monotonic() - self._last_sync >= self._fsync_interval

    def sync(self) -> None:
        if self._fd >= 0:
            try:
                os.fsync(self._fd)
            except OSError as e:
                raise OSError(e.errno, e.strerror, str(self.paths[-1])) from None
        self._last_sync = time.monotonic()

    def close(self, *, index: bool = True) -> None:
        """Close the current segment; ``index``: write the keys index of the segments sealed
        and not indexed yet. Without it they stay in ``sealed`` for the caller: an audit that
        compacts next has ``compact.write_parquet(index=True)`` index them from its own parse
        of the log (one parse, not two); with no index a resume parses them, as before
        indexes (the index only speeds a resume up)."""
        self._close_current()
        if index:
            self.index_sealed()
