"""The verdict log: the run's source of truth.

Append-only JSON Lines segments under ``RUN_DIR/log/``, one record per attempt outcome of a
(judge_id, item_id, order) key. Each process writes its own segment, named by its writer
(host, pid, start time), so segments from several processes merge by concatenation; a key's
first ``ok`` record is the one that counts, which makes merging idempotent.

Durability: the writer hands each batch of records to the OS with one ``write`` (so a
killed process loses at most the batch being written), fsyncs at most every
``fsync_interval`` seconds and at close. A crash can leave a torn last line; ``repair``
cuts it off before the next run appends. Errors are recorded but are never done: a resume
retries them.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Literal

import msgspec

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
    """Cut a torn (unterminated) last line off every segment. Returns bytes removed."""
    removed = 0
    for seg in segments(run_dir):
        size = seg.stat().st_size
        if size == 0:
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


def read(run_dir: Path) -> Iterator[Record]:
    """Every record in every segment, in segment order. Skips a line that does not decode
    (a torn line in a segment another process is still writing)."""
    for seg in segments(run_dir):
        with seg.open("rb") as f:
            for line in f:
                if line.endswith(b"\n"):
                    try:
                        yield _decoder.decode(line)
                    except msgspec.ValidationError:
                        continue
                    except msgspec.DecodeError:
                        continue


def done_keys(records: Iterable[Record]) -> set[tuple[str, str, str]]:
    return {r.key for r in records if r.status == "ok"}


def final_records(records: Iterable[Record]) -> list[Record]:
    """One record per key: its first ``ok`` record; keys that never succeeded are left out."""
    seen: dict[tuple[str, str, str], Record] = {}
    for r in records:
        if r.status == "ok" and r.key not in seen:
            seen[r.key] = r
    return [seen[k] for k in sorted(seen)]


class LogWriter:
    """Appends records to this process's own segment. One task owns it (the engine's writer)."""

    def __init__(self, run_dir: Path, fsync_interval: float = 1.0):
        log_dir = run_dir / "log"
        log_dir.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        name = f"{socket.gethostname()}-{os.getpid()}-{stamp}.jsonl"
        self.path = log_dir / name
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._fsync_interval = fsync_interval
        self._last_sync = time.monotonic()
        self.written = 0

    def write_batch(self, records: list[Record]) -> None:
        if not records:
            return
        buf = bytearray()
        for r in records:
            _encoder.encode_into(r, buf, len(buf))
            buf += b"\n"
        view = memoryview(buf)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]
        self.written += len(records)
        if time.monotonic() - self._last_sync >= self._fsync_interval:
            self.sync()

    def sync(self) -> None:
        os.fsync(self._fd)
        self._last_sync = time.monotonic()

    def close(self) -> None:
        if self._fd >= 0:
            self.sync()
            os.close(self._fd)
            self._fd = -1
            if self.written == 0:
                self.path.unlink(missing_ok=True)  # leave no empty segments behind
