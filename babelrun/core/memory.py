"""Freed memory handed back to the operating system between an audit's phases."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

_SETTING_ASIDE = [0]  # depth of ``survivors_set_aside`` blocks


def return_freed_memory() -> None:
    """Hand the heap that judging and compaction freed back to the OS (glibc keeps it), so
    that the report's plotting (matplotlib: ~40 MB) does not stack on top of it: a full
    65-language plan then stays under its 300 MB peak (bench/full_plan.py). Inside
    ``survivors_set_aside``, what the collection leaves is set aside from the next ones."""
    import ctypes
    import gc

    gc.collect()
    if _SETTING_ASIDE[0]:
        gc.freeze()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to ask
        pass
    import pyarrow as pa

    pa.default_memory_pool().release_unused()  # Arrow's allocator keeps its freed pages too


@contextlib.contextmanager
def survivors_set_aside() -> Iterator[None]:
    """Within the block, each ``return_freed_memory`` moves what its collection left out of
    the collections to come (``gc.freeze``): the end of an audit collects before compaction,
    scoring and the report (and scoring twice more), and every pass walked all that the
    imports, the judges and the run's metadata left (~0.05–0.1 s a pass on a 2-core machine),
    none of it garbage. Objects are freed as ever when their last reference goes; a cycle
    among those set aside waits for the first collection after the block."""
    import gc

    _SETTING_ASIDE[0] += 1
    try:
        yield
    finally:
        _SETTING_ASIDE[0] -= 1
        if not _SETTING_ASIDE[0]:
            gc.unfreeze()
