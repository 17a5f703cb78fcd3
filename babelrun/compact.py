"""Columnar form of the log: one row per key (its counted record), as an Arrow table.

``write_parquet`` puts it in ``RUN_DIR/judgements.parquet`` for scoring and for users' own
tools (pandas, polars, DuckDB), stamped with the segments (name and size) it was built from.
``load`` reads that file when the stamp still matches the log — it is *current* — and
otherwise parses the JSONL segments with Arrow's multithreaded JSON reader. The JSONL log
stays the source of truth.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from . import log
from .log import Record

PARQUET = "judgements.parquet"
_STAMP = b"babelrun.segments"
_TYPES = {
    "severity": pa.float64(), "ref_len": pa.int64(), "pert_len": pa.int64(),
    "latency_ms": pa.float64(), "attempts": pa.int64(), "tokens_in": pa.int64(),
    "tokens_out": pa.int64(), "ts": pa.float64(),
}
SCHEMA = pa.schema([(f.name, _TYPES.get(f.name, pa.string())) for f in msgspec.structs.fields(Record)])


def table(records: list[Record]) -> pa.Table:
    """Records already in memory (tests, small runs) as a table in the log's schema."""
    return pa.table({name: pa.array([getattr(r, name) for r in records], type=SCHEMA.field(name).type)
                     for name in SCHEMA.names})


def _segment_stamp(run_dir: Path) -> bytes:
    return msgspec.json.encode([[p.name, p.stat().st_size] for p in log.segments(run_dir)])


def counted(records: pa.Table) -> pa.Table:
    """One row per key: its first ``ok`` record, rows sorted by key. One ``take`` of the
    table: dedupe and order are worked out on the key column alone."""
    ok_rows = np.flatnonzero(pc.equal(records["status"], "ok").to_numpy(zero_copy_only=False))
    if ok_rows.size == 0:
        return records.slice(0, 0)
    ok = records.select(["judge_id", "item_id", "order"]).take(pa.array(ok_rows))
    key = pc.binary_join_element_wise(ok["judge_id"], ok["item_id"], ok["order"], "\x1f")
    encoded = pc.dictionary_encode(key).combine_chunks()
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    _, first = np.unique(codes, return_index=True)  # first row of each code, by code
    by_key = pc.array_sort_indices(encoded.dictionary).to_numpy()
    return records.take(pa.array(ok_rows[first[by_key]]))


def is_current(run_dir: Path) -> bool:
    path = run_dir / PARQUET
    if not path.exists():
        return False
    metadata = pq.read_schema(path).metadata or {}
    return metadata.get(_STAMP) == _segment_stamp(run_dir)


def load(run_dir: Path) -> pa.Table:
    """The counted records of a run: from Parquet when current, else from the log."""
    if is_current(run_dir):
        return pq.read_table(run_dir / PARQUET).replace_schema_metadata(None)
    return counted(log.read_table(run_dir, SCHEMA))


def write_parquet(run_dir: Path, data: pa.Table | None = None) -> Path:
    """Write the counted records, stamped with the segments they came from."""
    stamp = _segment_stamp(run_dir)
    data = load(run_dir) if data is None else data
    path = run_dir / PARQUET
    tmp = path.with_suffix(".parquet.tmp")
    pq.write_table(data.replace_schema_metadata({_STAMP: stamp}), tmp)
    tmp.replace(path)
    return path
