"""Columnar form of the log: one row per key (its counted record), in Parquet.

``write_parquet`` streams the log into ``RUN_DIR/judgements.parquet`` a few megabytes of
JSON at a time — peak memory stays flat however long the run — keeping each key's first ``ok``
record, and stamps the file with the segments (name and size) it was built from. ``load``
reads that file, rebuilding it first when the stamp no longer matches the log. The file is
for scoring and for users' own tools (pandas, polars, DuckDB); the JSONL log stays the
source of truth. Rows are in log order; string columns with few values come back
dictionary-encoded.
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..core.keys import keys_by_judge, sorted_unique
from . import log
from .log import Record

PARQUET = "judgements.parquet"
_STAMP = b"babelrun.segments"
_FORMAT_KEY = b"babelrun.format"
_TYPES = {
    "severity": pa.float64(), "ref_len": pa.int64(), "pert_len": pa.int64(),
    "latency_ms": pa.float64(), "attempts": pa.int64(), "tokens_in": pa.int64(),
    "tokens_out": pa.int64(), "ts": pa.float64(), "p_a": pa.float64(), "p_b": pa.float64(),
    "p_tie": pa.float64(), "score": pa.float64(),
}
SCHEMA = pa.schema([(f.name, _TYPES.get(f.name, pa.string())) for f in msgspec.structs.fields(Record)])
# The Parquet file adds ``item_key``: the 60 bits of ``item_id`` that identify the item
# (``core.keys.item_bits``), computed once here so scoring groups by an integer, not a string.
PARQUET_SCHEMA = SCHEMA.append(pa.field("item_key", pa.uint64()))
_FORMAT = b"5"  # bump when the Parquet layout changes: older files are rebuilt
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

    def __init__(self):
        self._seen: dict[str, np.ndarray] = {}

    def __call__(self, records: pa.Table) -> pa.Table:
        ok = records.filter(pc.equal(records["status"], "ok"))
        keep = np.zeros(ok.num_rows, dtype=bool)
        item_key = np.zeros(ok.num_rows, dtype=np.uint64)
        for jid, rows, bits in keys_by_judge(ok):
            item_key[rows] = bits >> np.uint64(1)  # the key without its order bit
            _, first = np.unique(bits, return_index=True)  # first row of each key here
            seen = self._seen.get(jid, np.zeros(0, dtype=np.uint64))
            fresh = first[~_member(bits[first], seen)]
            keep[rows[fresh]] = True
            self._seen[jid] = sorted_unique(np.concatenate([seen, bits[fresh]]))
        mask = pa.array(keep)
        return ok.filter(mask).append_column("item_key", pa.array(item_key).filter(mask))


def _member(keys: np.ndarray, sorted_keys: np.ndarray) -> np.ndarray:
    if len(sorted_keys) == 0:
        return np.zeros(len(keys), dtype=bool)
    at = np.minimum(np.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)
    return sorted_keys[at] == keys


def counted(records: pa.Table) -> pa.Table:
    """One row per key: its first ``ok`` record."""
    return FirstOk()(records)


def _segment_stamp(run_dir: Path) -> bytes:
    return msgspec.json.encode([[p.name, p.stat().st_size] for p in log.segments(run_dir)])


def is_current(run_dir: str | Path) -> bool:
    run_dir = Path(run_dir)
    path = run_dir / PARQUET
    if not path.exists():
        return False
    metadata = pq.read_schema(path).metadata or {}
    return metadata.get(_FORMAT_KEY) == _FORMAT and metadata.get(_STAMP) == _segment_stamp(run_dir)


def write_parquet(run_dir: Path) -> Path:
    """Stream the log's counted records into judgements.parquet, block by block."""
    stamp = _segment_stamp(run_dir)  # before reading: a later append makes the file stale
    path = run_dir / PARQUET
    tmp = path.with_name(f"{PARQUET}.{os.getpid()}.tmp")
    first_ok = FirstOk()
    with pq.ParquetWriter(tmp, PARQUET_SCHEMA.with_metadata({_STAMP: stamp, _FORMAT_KEY: _FORMAT})) as writer:
        for seg in log.segments(run_dir):
            for batch in log.stream_segment(seg, SCHEMA):
                rows = first_ok(pa.Table.from_batches([batch]))
                if rows.num_rows:
                    writer.write_table(rows)
    tmp.replace(path)
    return path


def load(run_dir: str | Path, columns: list[str] | None = None) -> pa.Table:
    """The counted records of a run (``columns`` only, if given), from a current Parquet."""
    run_dir = Path(run_dir)
    if not is_current(run_dir):
        write_parquet(run_dir)
    wanted = PARQUET_SCHEMA.names if columns is None else columns
    data = pq.read_table(run_dir / PARQUET, columns=columns,
                         read_dictionary=[c for c in DICTIONARY_COLUMNS if c in wanted])
    return data.replace_schema_metadata(None)
