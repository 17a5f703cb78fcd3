"""Columnar form of the log: one row per key (its counted record), in Parquet.

``write_parquet`` streams the log into ``RUN_DIR/judgements.parquet`` a few megabytes of
JSON at a time — peak memory stays flat however long the run — keeping each key's first ``ok``
record, and stamps the file with the segments (name, size, content hash) it was built from,
and with the log lines it skipped as invalid (``bad_lines``). ``load``
reads that file, rebuilding it first when the stamp no longer matches the log. The file is
for scoring and for users' own tools (pandas, polars, DuckDB); the JSONL log stays the
source of truth. Rows are in log order; string columns with few values come back
dictionary-encoded.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from pathlib import Path

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..core.keys import keys_by_judge, sorted_unique
from . import log
from .files import atomic_file
from .log import Record
from .rundir import PARQUET as PARQUET

_STAMP = b"babelrun.segments"
_FORMAT_KEY = b"babelrun.format"
_BAD_KEY = b"babelrun.bad_lines"
MAX_BAD_LINES = 1000
SCHEMA = log.RECORD_SCHEMA
# The Parquet file adds ``item_key``: the 60 bits of ``item_id`` that identify the item
# (``core.keys.item_bits``), computed once here so scoring groups by an integer, not a string.
# Its ``sample`` column is never null: 0 for a judge asked once (and for logs older than samples).
PARQUET_SCHEMA = SCHEMA.append(pa.field("item_key", pa.uint64()))
_FORMAT = b"9"  # bump when the Parquet layout changes: older files are rebuilt
# Columns with a handful of distinct values: read back as dictionaries (small, fast to group).
DICTIONARY_COLUMNS = ("judge_id", "judge", "order", "status", "kind", "lang", "ref_id", "perturbation",
                      "verdict", "slot", "served_model", "fingerprint", "error_kind")


def table(records: list[Record]) -> pa.Table:
    """Records already in memory (tests, small runs) as a table in the log's schema."""
    return pa.table({name: pa.array([getattr(r, name) for r in records], type=SCHEMA.field(name).type)
                     for name in SCHEMA.names})


class FirstOk:
    """Keeps each key's first ``ok`` row across the tables it is shown, in order, with its
    ``item_key``; remembers 8 bytes per key seen (the done-set's keys), not the rows."""

    def __init__(self) -> None:
        self._seen: dict[str, np.ndarray] = {}
        self.ok_keys: list[tuple[str, np.ndarray]] = []  # the last table's ok keys, by judge

    def __call__(self, records: pa.Table) -> pa.Table:
        ok = records.filter(pc.equal(records["status"], "ok"))
        keep = np.zeros(ok.num_rows, dtype=bool)
        item_key = np.zeros(ok.num_rows, dtype=np.uint64)
        self.ok_keys = []
        for jid, rows, bits in keys_by_judge(ok):
            self.ok_keys.append((jid, bits))
            item_key[rows] = bits >> np.uint64(1)  # the key without its order bit
            _, first = np.unique(bits, return_index=True)  # first row of each key here
            seen = self._seen.get(jid, np.zeros(0, dtype=np.uint64))
            fresh = first[~_member(bits[first], seen)]
            keep[rows[fresh]] = True
            self._seen[jid] = sorted_unique(np.concatenate([seen, bits[fresh]]))
        mask = pa.array(keep)
        kept = ok.filter(mask)
        if "sample" in kept.column_names:  # a record without one (sample 0, or an older log) reads 0
            at = kept.schema.get_field_index("sample")
            kept = kept.set_column(at, "sample", pc.fill_null(kept["sample"], 0))
        return kept.append_column("item_key", pa.array(item_key).filter(mask))


def _member(keys: np.ndarray, sorted_keys: np.ndarray) -> np.ndarray:
    if len(sorted_keys) == 0:
        return np.zeros(len(keys), dtype=bool)
    at = np.minimum(np.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)
    found: np.ndarray = sorted_keys[at] == keys
    return found


def counted(records: pa.Table) -> pa.Table:
    """One row per key: its first ``ok`` record."""
    return FirstOk()(records)


# A segment's hash, by its path and what stat says of it: an audit compacts its log, then
# scoring and the report ask whether the Parquet file is current three times more, and each
# asking hashed every segment again (~20 ms at 12,000 calls). A write changes the segment's
# ctime (its size or mtime aside), and a segment replaced by another file changes its inode.
@functools.lru_cache(maxsize=256)
def _digest(seg: Path, size: int, mtime_ns: int, ctime_ns: int, inode: int) -> str:
    with seg.open("rb") as f:
        return hashlib.file_digest(f, lambda: hashlib.blake2b(digest_size=16)).hexdigest()


def _segment_stamp(run_dir: Path) -> bytes:
    """What the Parquet file was built from: each segment's name, size and a hash of its
    content (an edit that keeps a segment's size still changes the stamp; hashing runs at
    about 1 GB/s, a few tens of milliseconds for a 130,000-call log)."""
    stamp = []
    for p in log.segments(run_dir):
        try:
            st = p.stat()
            digest = _digest(p.absolute(), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
            stamp.append([p.name, st.st_size, digest])
        except OSError:  # unreadable: the reader skips it, and names it
            stamp.append([p.name, -1, ""])
    return msgspec.json.encode(stamp)


def _metadata(path: Path) -> dict[bytes, bytes] | None:
    """The Parquet file's metadata; None when there is no readable file (garbage, cut short:
    it is only a cache of the log, so it is rebuilt)."""
    try:
        return pq.read_metadata(path).metadata or {}
    except (OSError, pa.ArrowInvalid):
        return None


def is_current(run_dir: str | Path) -> bool:
    run_dir = Path(run_dir)
    metadata = _metadata(run_dir / PARQUET)
    return (metadata is not None and metadata.get(_FORMAT_KEY) == _FORMAT
            and metadata.get(_STAMP) == _segment_stamp(run_dir))


def bad_lines(run_dir: Path) -> list[log.BadLine]:
    """The log lines the last compaction skipped (at most ``MAX_BAD_LINES`` named)."""
    metadata = _metadata(run_dir / PARQUET) or {}
    return msgspec.json.decode(metadata.get(_BAD_KEY, b"[]"), type=list[log.BadLine])


def write_parquet(run_dir: Path, *, index: bool = False,
                  observe: Callable[[pa.RecordBatch], None] | None = None) -> Path:
    """Stream the log's counted records into judgements.parquet, block by block. Invalid log
    lines are skipped; the file's metadata names them (``bad_lines``). ``index``: also write
    the keys index (``log.index_segment``'s) of each segment that has none, from this parse:
    the audit that wrote the log, under its run lock (its writer leaves the last segment to
    this). ``observe``: shown every block of valid records this parse reads (all of them, in
    log order), for a caller that would read the log again (the audit's report statistics)."""
    stamp = _segment_stamp(run_dir)  # before reading: a later append makes the file stale
    path = run_dir / PARQUET
    first_ok = FirstOk()
    bad: list[log.BadLine] = []
    with atomic_file(path) as f, pq.ParquetWriter(f, PARQUET_SCHEMA) as writer:  # never through a link
        for seg in log.segments(run_dir):
            before = _unindexed(seg) if index else None
            keys: dict[str, list[np.ndarray]] | None = {} if before is not None else None
            for batch in log.stream_segment(seg, SCHEMA, bad=bad):
                if observe is not None:
                    observe(batch)
                rows = first_ok(pa.Table.from_batches([batch]))
                if keys is not None:
                    for jid, bits in first_ok.ok_keys:
                        keys.setdefault(jid, []).append(bits)
                if rows.num_rows:
                    writer.write_table(rows)
            if keys is not None and before is not None:
                _index(seg, before, keys)
        writer.add_key_value_metadata({_STAMP: stamp, _FORMAT_KEY: _FORMAT,
                                       _BAD_KEY: msgspec.json.encode(bad[:MAX_BAD_LINES])})
    return path


def _unindexed(seg: Path) -> int | None:
    """The size of a segment worth an index (``log.INDEX_MIN_BYTES``) that has none, before
    it is parsed; None for the others."""
    try:
        size = seg.stat().st_size
        if size < log.INDEX_MIN_BYTES or log.index_path(seg).exists():
            return None
    except OSError:
        return None
    return size


def _index(seg: Path, before: int, keys: dict[str, list[np.ndarray]]) -> None:
    """Write the segment's index from the ok keys its parse collected, when it is still the
    size it was before the parse and ends in a whole line (``log.index_segment``'s rule)."""
    try:
        size, crc = log.checksum(seg)
        if size != before or not log.ends_whole(seg):
            return
    except OSError:
        return
    log.write_index(seg, size, crc, {jid: np.concatenate(parts) for jid, parts in keys.items()})


def load(run_dir: str | Path, columns: list[str] | None = None,
         where: Callable[[pa.Table], pa.Array | pa.ChunkedArray] | None = None) -> pa.Table:
    """The counted records of a run (``columns`` only, if given), from a current Parquet.
    ``where`` (a row group's columns -> a boolean mask) keeps only the rows it selects, read a
    row group at a time: memory holds the kept rows, never the whole file's."""
    run_dir = Path(run_dir)
    if where is not None:
        f = parquet_file(run_dir)
        parts = [t.filter(where(t)) for t in (f.read_row_group(i, columns=columns)
                                               for i in range(f.metadata.num_row_groups))]
        if parts:
            return pa.concat_tables(parts).replace_schema_metadata(None)
    else:
        _current(run_dir)
    data = pq.read_table(run_dir / PARQUET, columns=columns, read_dictionary=_dictionaries(columns))
    if where is not None:
        data = data.filter(where(data))
    return data.replace_schema_metadata(None)


def parquet_file(run_dir: str | Path) -> pq.ParquetFile:
    """The counted records' file, rebuilt first when stale, its dictionary columns
    (``DICTIONARY_COLUMNS``) read as ``load`` reads them: for readers that go one row group
    at a time (``read_row_group``), whose memory must not grow with the number of records."""
    run_dir = Path(run_dir)
    _current(run_dir)
    return pq.ParquetFile(run_dir / PARQUET, read_dictionary=list(DICTIONARY_COLUMNS))


def _current(run_dir: Path) -> None:
    if not is_current(run_dir):
        write_parquet(run_dir)


def _dictionaries(columns: list[str] | None) -> list[str]:
    wanted = PARQUET_SCHEMA.names if columns is None else columns
    return [c for c in DICTIONARY_COLUMNS if c in wanted]
