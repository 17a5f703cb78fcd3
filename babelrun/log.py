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

Only one process writes a run directory at a time (``RunLock``); shards of one plan in
several processes are a later addition and will each take their own lock scope.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import socket
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Literal

import msgspec
import numpy as np

from .errors import UserError
from .judges.prompt import Slot

Status = Literal["ok", "error"]
Verdict = Literal["reference", "perturbed", "tie", "invalid"]


class Record(msgspec.Struct, frozen=True, omit_defaults=True):
    judge_id: str
    item_id: str
    order: str
    status: Status
    judge: str  # the judge's display name in the manifest
    kind: str
    lang: str
    perturbation: str
    severity: float
    ref_len: int
    pert_len: int
    verdict: Verdict | None = None
    slot: Slot | None = None  # what the judge named: A, B, tie or invalid
    raw: str | None = None
    latency_ms: float | None = None
    attempts: int = 1
    tokens_in: int | None = None
    tokens_out: int | None = None
    served_model: str | None = None
    fingerprint: str | None = None
    error_kind: str | None = None
    error: str | None = None
    ts: float = 0.0

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.judge_id, self.item_id, self.order)


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Record)


def segments(run_dir: Path) -> list[Path]:
    return sorted((run_dir / "log").glob("*.jsonl"))


def repair(run_dir: Path) -> int:
    """Cut a torn (unterminated) last line off every segment, and delete empty segments.
    Returns the bytes removed. Runs under the run lock: no segment has a live writer."""
    removed = 0
    for seg in segments(run_dir):
        size = seg.stat().st_size
        if size == 0:
            seg.unlink()  # a writer killed before its first record
            continue
        with seg.open("rb+") as f:
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


def read(run_dir: Path) -> Iterator[Record]:
    """Every record in every segment, in segment order; undecodable lines are skipped."""
    for seg in segments(run_dir):
        for line in _complete_lines(seg):
            try:
                yield _decoder.decode(line)
            except msgspec.DecodeError:  # includes ValidationError
                continue


class _KeyOnly(msgspec.Struct):
    judge_id: str
    item_id: str
    order: str
    status: str


def key_hash(judge_id: str, item_id: str, order: str) -> int:
    """64-bit hash of a record key (blake2b). Two different keys share one with probability
    about n² / 2⁶⁵ — for a million keys, 3 in 100 billion."""
    digest = hashlib.blake2b(f"{judge_id}\x1f{item_id}\x1f{order}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


class DoneSet:
    """The keys that have an ``ok`` record, as a sorted array of 64-bit key hashes: 8 bytes
    a key (a million keys in 8 MB), where a Python set of tuples takes about 200 bytes."""

    def __init__(self, hashes: Iterable[int] = ()):
        self._keys = np.unique(np.fromiter(hashes, dtype=np.uint64))

    @classmethod
    def from_log(cls, run_dir: Path) -> DoneSet:
        decode = msgspec.json.Decoder(_KeyOnly).decode

        def hashes() -> Iterator[int]:
            for seg in segments(run_dir):
                for line in _complete_lines(seg):
                    if b'"status":"ok"' not in line:
                        continue
                    try:
                        r = decode(line)
                    except msgspec.DecodeError:
                        continue
                    if r.status == "ok":
                        yield key_hash(r.judge_id, r.item_id, r.order)

        return cls(hashes())

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: tuple[str, str, str]) -> bool:
        return self.contains_hash(key_hash(*key))

    def contains_hash(self, h: int) -> bool:
        i = int(np.searchsorted(self._keys, np.uint64(h)))
        return i < len(self._keys) and int(self._keys[i]) == h

    @property
    def nbytes(self) -> int:
        return self._keys.nbytes


def final_records(records: Iterable[Record]) -> list[Record]:
    """One record per key: its first ``ok`` record; keys that never succeeded are left out."""
    seen: dict[tuple[str, str, str], Record] = {}
    for r in records:
        if r.status == "ok" and r.key not in seen:
            seen[r.key] = r
    return [seen[k] for k in sorted(seen)]


class LogWriter:
    """Appends records to this process's own segments. One task owns it (the engine's writer)."""

    def __init__(self, run_dir: Path, *, fsync: Literal["interval", "batch"] = "interval",
                 fsync_interval: float = 1.0, segment_bytes: int = 64 << 20):
        self._dir = run_dir / "log"
        self._dir.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        self._stem = f"{socket.gethostname()}-{os.getpid()}-{stamp}"
        self._fsync_every_batch = fsync == "batch"
        self._fsync_interval = fsync_interval
        self._segment_bytes = segment_bytes
        self._sequence = 0
        self._fd = -1
        self._size = 0
        self._last_sync = time.monotonic()
        self.written = 0
        self.paths: list[Path] = []  # opened on the first write: no empty segments

    def _open_next(self) -> None:
        self._sequence += 1
        path = self._dir / f"{self._stem}-{self._sequence:04d}.jsonl"
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
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
        while view:
            n = os.write(self._fd, view)
            view = view[n:]
        self._size += len(buf)
        self.written += len(records)
        return self._fsync_every_batch or time.monotonic() - self._last_sync >= self._fsync_interval

    def sync(self) -> None:
        if self._fd >= 0:
            os.fsync(self._fd)
        self._last_sync = time.monotonic()

    def close(self) -> None:
        self._close_current()


class RunLock:
    """An exclusive ``flock`` on ``RUN_DIR/lock``: one writing process per run directory.

    The kernel drops the lock when the process dies, however it dies, so a killed run never
    leaves a stale lock behind. The file names the holder for the error message.
    """

    def __init__(self, run_dir: Path):
        self.path = run_dir / "lock"
        self._fd = -1

    def __enter__(self) -> RunLock:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 200).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise UserError(
                f"{self.path.parent} is in use by {holder}; wait for it to finish, or give "
                "this audit another output_dir"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"babelrun pid {os.getpid()} on {socket.gethostname()}\n".encode())
        self._fd = fd
        return self

    def __exit__(self, *exc) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # closing releases the lock
            self._fd = -1
