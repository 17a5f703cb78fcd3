"""Whole-file writes that a reader never sees half done."""

from __future__ import annotations

import os
from pathlib import Path


def write_atomic(path: Path, data: bytes, *, fsync: bool = False) -> None:
    """Replace ``path`` with ``data`` in one step: readers see the old file or the new one.

    The temporary file is named by the writing process, so processes that write the same
    file side by side (shards writing run.yaml and plan.json) never share one. ``fsync``:
    the bytes reach the disk before the rename, for files that must survive a power loss
    (a submitted provider batch's id)."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("wb") as f:
            f.write(data)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:  # a full disk: leave no temporary file, and name the file meant
        tmp.unlink(missing_ok=True)
        raise OSError(e.errno, e.strerror, str(path)) from None
