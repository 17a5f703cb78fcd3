"""Freed memory handed back to the operating system between an audit's phases."""

from __future__ import annotations


def return_freed_memory() -> None:
    """Hand the heap that judging and compaction freed back to the OS (glibc keeps it), so
    that the report's plotting (matplotlib: ~40 MB) does not stack on top of it: a full
    65-language plan then stays under its 300 MB peak (bench/full_plan.py)."""
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to ask
        pass
    import pyarrow as pa

    pa.default_memory_pool().release_unused()  # Arrow's allocator keeps its freed pages too
