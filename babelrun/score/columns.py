"""Columns of a records table as NumPy arrays: string columns as integer codes, and the
order that groups records by (cell, item). Every scorer (cards, agentic cards, composites,
paired comparisons, analyses) reads the table through these."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..core.keys import item_bits_column


def item_bits(data: pa.Table) -> np.ndarray:
    """Each record's 60 bits of item id: the compacted ``item_key`` column where the table
    has it, else parsed from ``item_id`` (records from elsewhere: tests, users' tables)."""
    if "item_key" in data.column_names:
        bits: np.ndarray = data["item_key"].to_numpy()
        return bits
    return item_bits_column(data["item_id"].combine_chunks())


def dictionary(column: pa.ChunkedArray | pa.Array) -> pa.DictionaryArray:
    """The column as one dictionary array: as read from Parquet, or encoded here."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    return array if pa.types.is_dictionary(array.type) else pc.dictionary_encode(array)


def codes(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, list[str]]:
    """Integer codes of a string column, numbered in sorted order of the values, so that
    nothing downstream depends on the order of the records."""
    encoded = dictionary(column)
    by_value = pc.array_sort_indices(encoded.dictionary).to_numpy()
    rank = np.empty(len(by_value), dtype=np.int64)
    rank[by_value] = np.arange(len(by_value))
    values = encoded.dictionary.take(pa.array(by_value)).to_pylist()
    return rank[encoded.indices.to_numpy(zero_copy_only=False)], values


def lookup(column: pa.ChunkedArray | pa.Array, values: list[str] | tuple[str, ...]) -> np.ndarray:
    """Each row's position in ``values`` (-1 where absent), looked up once per distinct value
    of the column rather than once per row; -1 where null too (a pointwise record's verdict)."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if not pa.types.is_dictionary(array.type):
        array = pc.dictionary_encode(array)
    position = pc.index_in(array.dictionary, value_set=pa.array(values, type=pa.string()))
    position = position.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    indices = array.indices
    if indices.null_count:  # one more position, past the dictionary's end, for the nulls
        position = np.append(position, -1)
        indices = indices.fill_null(len(array.dictionary))
    out: np.ndarray = position[indices.to_numpy(zero_copy_only=False)]
    return out


def by_cell_and_item(cell: np.ndarray, bits: np.ndarray) -> np.ndarray:
    """The order that sorts records by (cell, item): cells in card order, and within a cell
    each item's records adjacent. Items are told apart by the first 60 bits of their id
    (``core.keys.item_bits``, parsed straight from Arrow's buffer: no string sort). The order
    depends on the records' content only, never on their order in the log."""
    n_cells = int(cell.max()) + 1
    if n_cells <= 1 << 10:  # one 64-bit key: 10 bits of cell, the top 54 bits of the item
        return np.argsort((cell.astype(np.uint64) << np.uint64(54)) | (bits >> np.uint64(6)))
    return np.lexsort((bits, cell))
