"""Every write babelrun makes inside a run directory, and how it never goes through a link.

A run directory may come from someone else (a colleague's run to ``report``, a CI artefact to
``merge``): a symbolic link in it, where babelrun writes, would make babelrun overwrite,
truncate or lock the link's target, a file outside the run. So every file babelrun writes,
truncates or locks is opened here:

- ``write_atomic`` / ``atomic_file``: a link at the name is refused; the bytes go to a
  temporary file created afresh (``O_CREAT | O_EXCL | O_NOFOLLOW``: never an existing file,
  never through a link) and are renamed over the name (a rename replaces a link planted
  meanwhile, never its target);
- ``open_nofollow``: a file written in place (a log segment, a lock, the torn-line repair) is
  opened with ``O_NOFOLLOW`` and must be a regular file;
- ``safe_dir``: a folder babelrun writes into (``log/``, ``plots/``, ``export/``, ``batches/``,
  ``locks/``) is made where missing and refused where it is a link.

A link where babelrun writes is refused with one line (``UnsafePath``, exit 2); nothing is
written through it. The run directory itself is the user's choice (``output_dir``, a path on
the command line) and is taken as given.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

from ..errors import UserError


class UnsafePath(UserError):
    """A symbolic link (or another non-regular file) where babelrun writes: refused, exit 2."""

    exit_code = 2


def _refuse(path: Path, what: str = "a symbolic link") -> UnsafePath:
    return UnsafePath(f"{path} is {what}; babelrun never writes through one (remove it and run again)")


def open_nofollow(path: Path, flags: int, mode: int = 0o644) -> int:
    """``os.open`` that refuses a symbolic link at ``path`` and anything but a regular file."""
    nonblock = getattr(os, "O_NONBLOCK", 0)  # a FIFO planted at the name never blocks the open
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC | nonblock, mode)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.EMLINK) and Path(path).is_symlink():  # EMLINK: the BSDs
            raise _refuse(Path(path)) from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise _refuse(Path(path), "not a regular file")
    if nonblock:
        os.set_blocking(fd, True)
    return fd


def safe_dir(root: Path, *names: str) -> Path:
    """``root/names…`` as a directory, made where missing; any of ``names`` that is a link (or
    not a directory) is refused. ``root`` itself is the user's and is made as given."""
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    for name in names:
        path = path / name
        try:
            os.mkdir(path)
        except FileExistsError:
            pass
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            raise _refuse(path)
        if not stat.S_ISDIR(st.st_mode):
            raise _refuse(path, "not a directory")
    return path


def check_not_link(path: Path) -> None:
    """Refuse a link at ``path`` (a folder babelrun is about to write into; absent is fine)."""
    if Path(path).is_symlink():
        raise _refuse(Path(path))


def tmp_name(path: Path) -> Path:
    """The temporary file of ``path`` for this process: ``name.<pid>.tmp``."""
    return path.with_name(f"{path.name}.{os.getpid()}.tmp")


@contextlib.contextmanager
def atomic_file(path: Path, *, fsync: bool = False) -> Iterator[BinaryIO]:
    """A file to write ``path``'s new content into; renamed over ``path`` when the block ends
    without an error, removed when it raises. The temporary file is created afresh (never an
    existing file, never through a link) and named by this process."""
    path = Path(path)
    check_not_link(path)  # a link where babelrun writes is refused, as everywhere else
    tmp = tmp_name(path)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)  # this process's own leftover (or a link planted under its name): unlinked, not followed
    fd = open_nofollow(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)  # a link planted since the check is replaced, its target untouched
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_atomic(path: Path, data: bytes | Sequence[bytes | memoryview], *, fsync: bool = False) -> None:
    """Replace ``path`` with ``data`` in one step: readers see the old file or the new one.
    ``data``: the bytes, or pieces written one after another (no joined copy of a large file).

    The temporary file is named by the writing process, so processes that write the same
    file side by side (shards writing run.yaml and plan.json) never share one. ``fsync``:
    the bytes reach the disk before the rename, for files that must survive a power loss
    (a submitted provider batch's id)."""
    try:
        with atomic_file(path, fsync=fsync) as f:
            for piece in (data,) if isinstance(data, bytes | bytearray | memoryview) else data:
                f.write(piece)
    except OSError as e:  # a full disk: leave no temporary file, and name the file meant
        raise OSError(e.errno, e.strerror, str(path)) from None


def read_bounded(path: str | os.PathLike[str], limit: int) -> bytes:
    """A data file's bytes: a regular file of at most ``limit`` bytes. A FIFO or a device is
    refused without blocking (opened ``O_NONBLOCK``, checked before any read), a larger file
    before it is read: ``ValueError`` with one line for the user; ``OSError`` as ``open`` gives it."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NONBLOCK", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"{os.fspath(path)} is not a regular file (a FIFO, a device or a folder): refused")
        if info.st_size > limit:
            raise ValueError(f"{os.fspath(path)} is {info.st_size:,} bytes, more than the {limit:,} allowed")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise ValueError(f"{os.fspath(path)} holds more than the {limit:,} bytes allowed")
        return b"".join(chunks)
    finally:
        os.close(fd)
