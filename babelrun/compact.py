"""Columnar form of the log: one row per key (its counted record), as an Arrow table.

``write_parquet`` puts it in ``RUN_DIR/judgements.parquet`` for scoring and for users' own
tools (pandas, polars, DuckDB). The JSONL log stays the source of truth.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pyarrow as pa
import pyarrow.parquet as pq

from . import log
from .log import Record

_FIELDS = tuple(f.name for f in msgspec.structs.fields(Record))
_TYPES = {
    "severity": pa.float64(), "ref_len": pa.int64(), "pert_len": pa.int64(),
    "latency_ms": pa.float64(), "attempts": pa.int64(), "tokens_in": pa.int64(),
    "tokens_out": pa.int64(), "ts": pa.float64(),
}


def table(records: list[Record]) -> pa.Table:
    columns = {
        name: pa.array([getattr(r, name) for r in records], type=_TYPES.get(name, pa.string()))
        for name in _FIELDS
    }
    return pa.table(columns)


def load(run_dir: Path) -> pa.Table:
    """The counted records of a run, read from its log."""
    return table(log.final_records(log.read(run_dir)))


def write_parquet(run_dir: Path, data: pa.Table | None = None) -> Path:
    data = load(run_dir) if data is None else data
    path = run_dir / "judgements.parquet"
    tmp = path.with_suffix(".parquet.tmp")
    pq.write_table(data, tmp)
    tmp.replace(path)
    return path
