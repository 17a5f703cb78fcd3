"""A response cache shared across run directories (``cache: {dir}`` in the manifest).

Key: a hash of the judge id (backend, model, endpoint, template, sampling: ``judges.identity``)
and the exact request (its messages, the order and the sampling it is sent with). Entries
of one judge id live under ``<dir>/<judge_id>/``, so two judge ids never share one. An entry
is the reply as msgspec JSON, written to a temporary file and renamed into place
(``os.replace`` is atomic): two processes writing one key leave one whole entry, never a torn
one, and a reader sees an entry whole or not at all. An unreadable entry is a miss. The
cache is bounded: ``prune`` removes the least recently used entries (by mtime, refreshed
on a hit) until it is under ``max_mb``.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec

_SUFFIX = ".json"


class CachedReply(msgspec.Struct, frozen=True):
    raw: str
    served_model: str | None = None
    fingerprint: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    probs: tuple[float, float, float] | None = None
    slot: str | None = None
    score: float | None = None


_encode = msgspec.json.Encoder(order="sorted").encode
_decode = msgspec.json.Decoder(CachedReply).decode


def request_key(judge_id: str, messages: Any, order: str, sampling: Any = None) -> str:
    blob = _encode({"judge_id": judge_id, "messages": messages, "order": order, "sampling": sampling})
    return hashlib.sha256(blob).hexdigest()


class ResponseCache:
    def __init__(self, root: str | Path, max_mb: float = 1024.0):
        self.root = Path(root).expanduser()
        self.max_bytes = int(max_mb * (1 << 20))
        self.hits = self.misses = self.writes = 0

    def _path(self, judge_id: str, key: str) -> Path:
        return self.root / judge_id / key[:2] / (key + _SUFFIX)

    def get(self, judge_id: str, key: str) -> CachedReply | None:
        path = self._path(judge_id, key)
        try:
            reply = _decode(path.read_bytes())
        except (OSError, msgspec.DecodeError):
            self.misses += 1
            return None
        try:
            os.utime(path)  # recently used: pruned last
        except OSError:
            pass
        self.hits += 1
        return reply

    def contains(self, judge_id: str, key: str) -> bool:
        return self._path(judge_id, key).is_file()

    def put(self, judge_id: str, key: str, reply: CachedReply) -> None:
        path = self._path(judge_id, key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as f:
                f.write(_encode(reply))
            os.replace(tmp, path)
            self.writes += 1
        except OSError:
            pass  # a cache that cannot be written is a cache that misses


def entries(root: str | Path) -> list[tuple[Path, int, float, str]]:
    """(path, bytes, mtime, judge_id) of every entry."""
    out: list[tuple[Path, int, float, str]] = []
    root = Path(root).expanduser()
    if not root.is_dir():
        return out
    for path in root.glob(f"*/*/*{_SUFFIX}"):
        try:
            st = path.stat()
        except OSError:
            continue
        out.append((path, st.st_size, st.st_mtime, path.parent.parent.name))
    return out


def stats(root: str | Path) -> dict[str, Any]:
    """Entries and bytes, in all and per judge id."""
    per: dict[str, dict[str, int]] = {}
    for _, size, _, jid in entries(root):
        row = per.setdefault(jid, {"entries": 0, "bytes": 0})
        row["entries"] += 1
        row["bytes"] += size
    return {"dir": str(Path(root).expanduser()), "entries": sum(r["entries"] for r in per.values()),
            "bytes": sum(r["bytes"] for r in per.values()), "judges": dict(sorted(per.items()))}


def prune(root: str | Path, max_mb: float | None = None, older_than_days: float | None = None,
          judge_id: str | None = None) -> int:
    """Remove entries: of one judge id, older than some days, and then the least recently
    used until the cache is under ``max_mb``. Returns how many were removed. Safe while runs
    use the cache: a removed entry is a miss."""
    found = sorted(entries(root), key=lambda e: e[2])
    now, removed, kept = time.time(), 0, []
    for e in found:
        if (judge_id is not None and e[3] == judge_id) or (
                older_than_days is not None and now - e[2] > older_than_days * 86400):
            removed += _unlink(e[0])
        else:
            kept.append(e)
    if max_mb is not None:
        total, limit = sum(e[1] for e in kept), int(max_mb * (1 << 20))
        for e in kept:
            if total <= limit:
                break
            removed += _unlink(e[0])
            total -= e[1]
    for tmp in Path(root).expanduser().glob("*/*/.tmp-*"):  # torn writes of killed processes
        if now - tmp.stat().st_mtime > 3600:
            _unlink(tmp)
    return removed


def _unlink(path: Path) -> int:
    try:
        path.unlink()
        return 1
    except OSError:
        return 0
