"""A response cache shared across run directories (``cache: {dir}`` in the manifest).

Key: a hash of the judge id (``judges.identity``) and the exact request (its messages, the
order and the sampling it is sent with). The cache is its own place, and what it holds is
not trusted (docs/trust.md):

- A cache folder carries a marker file (``MARKER``); a folder without one is refused, unless
  it is empty (then it is adopted and marked). So ``prune`` pointed at the wrong folder
  refuses instead of deleting.
- Only names laid out as entries are read, counted or removed: ``<judge id>/<2 hex>/<64
  hex>.json``, the two hex the key's first two. Anything else in the folder is left alone.
- No link is followed, for reads, writes or prunes: every folder below the root is opened
  with ``O_NOFOLLOW | O_DIRECTORY`` relative to its parent's descriptor, an entry with
  ``O_NOFOLLOW | O_NONBLOCK``; only a regular file of at most ``MAX_ENTRY_BYTES`` is read
  (a FIFO, a device or a link is a miss, counted, and never blocks).
- An entry is written to a temporary file in its folder and renamed into place (atomic): a
  reader sees it whole or not at all. It carries its key and judge id, checked on every hit:
  an entry under another name (copied, planted) is a miss, counted.
- An entry stores the reply (its text, soft probabilities, token counts, truncation), never a
  verdict: the record of a hit is the judge's own rule applied to the stored reply
  (``engine.records.from_cache``). A reply whose verdict the code judge named directly (a
  slot or a score) is not cached.

The cache is bounded: ``prune`` removes the least recently used entries (by mtime, refreshed
on a hit) until the blocks they take are under ``max_mb``; a process that writes prunes
whenever it has written a tenth of ``max_mb`` since its last prune, and at its end.
"""

from __future__ import annotations

import errno
import hashlib
import math
import os
import re
import secrets
import stat
import time
from array import array
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import msgspec

from ..errors import NotApplicable, UsageError

MARKER = ".babelrun-cache"
MARKER_TEXT = (b"babelrun response cache. Entries: <judge id>/<2 hex>/<64 hex>.json; "
               b"babelrun reads, counts and removes nothing else here.\n")
MAX_ENTRY_BYTES = 4 << 20  # a reply is read up to 1 MiB (judges.http.MAX_REPLY_BYTES); JSON escapes it
MAX_RAW_CHARS = 1 << 20
FORMAT = 1
TMP_PREFIX = ".tmp-"
TMP_STALE_S = 3600.0  # a temporary file older than this is a killed writer's: pruned
_JUDGE = re.compile(r"[0-9a-f]{8,64}")
_PREFIX = re.compile(r"[0-9a-f]{2}")
_ENTRY = re.compile(r"[0-9a-f]{64}\.json")
_KEY = re.compile(r"[0-9a-f]{64}")
_SUFFIX = ".json"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class CachedReply(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What a provider said: no verdict (that is the judge's rule, applied on every hit)."""

    raw: str
    served_model: str | None = None
    fingerprint: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    probs: tuple[float, float, float] | None = None
    tokens_cached: int | None = None
    tokens_cache_write: int | None = None
    truncated: bool = False


class Entry(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One cache file: the format, the key and judge id it answers, and the reply."""

    format: int
    judge_id: str
    key: str
    reply: CachedReply


_encode = msgspec.json.Encoder(order="sorted").encode
_decode = msgspec.json.Decoder(Entry).decode


def request_key(judge_id: str, messages: Any, order: str, sampling: Any = None) -> str:
    blob = _encode({"judge_id": judge_id, "messages": messages, "order": order, "sampling": sampling})
    return hashlib.sha256(blob).hexdigest()


def is_entry_name(judge_id: str, prefix: str, name: str) -> bool:
    """Whether ``<judge_id>/<prefix>/<name>`` is laid out as an entry."""
    return (_JUDGE.fullmatch(judge_id) is not None and _PREFIX.fullmatch(prefix) is not None
            and _ENTRY.fullmatch(name) is not None and name[:2] == prefix)


def _valid(entry: Entry) -> bool:
    r = entry.reply
    if len(r.raw) > MAX_RAW_CHARS or r.probs is not None and not all(math.isfinite(p) and 0 <= p <= 1
                                                                      for p in r.probs):
        return False
    return all(v is None or 0 <= v for v in (r.tokens_in, r.tokens_out, r.tokens_cached, r.tokens_cache_write))


def check_root(root: str | Path, *, create: bool) -> Path | None:
    """The cache folder, checked: marked (``MARKER``, a regular file), or empty and then
    adopted; absent, created and marked when ``create`` (else None). A folder holding other
    files and no marker is refused with one line (``NotApplicable``)."""
    path = Path(root).expanduser()
    try:
        st = path.stat()  # the root is the manifest's (trusted): a link to it is the user's choice
    except FileNotFoundError:
        if not create:
            return None
        path.mkdir(parents=True, exist_ok=True)
        st = path.stat()
    if not stat.S_ISDIR(st.st_mode):
        raise NotApplicable(f"cache.dir {str(path)!r} is not a folder")
    if _has_marker(path):
        return path
    # empty but for a marker another process is writing now (two audits starting on a new cache)
    if any(e.name != MARKER for e in os.scandir(path)) and not _has_marker(path):
        raise NotApplicable(f"cache.dir {str(path)!r} holds files and is not a babelrun cache (no {MARKER} marker): "
                        "refused, so nothing in it is read or removed; name a new or empty folder (a cache "
                        "written before the marker existed: delete it, its entries carry no key)")
    if create:
        _write_marker(path)
    return path


def _has_marker(path: Path) -> bool:
    try:
        marker = os.lstat(path / MARKER)
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(marker.st_mode):
        raise NotApplicable(f"cache.dir {str(path)!r}: its {MARKER} is not a regular file; refused")
    return True


def _write_marker(path: Path) -> None:
    fd = os.open(path / MARKER, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, MARKER_TEXT)
    finally:
        os.close(fd)


def _open_dir(name: str, parent: int, create: bool = False) -> int | None:
    """A folder below ``parent`` (a descriptor), never through a link; None if absent or not
    a real folder. ``create``: made first when absent."""
    for attempt in (0, 1):
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            if not create or attempt:
                return None
            try:
                os.mkdir(name, 0o755, dir_fd=parent)
            except FileExistsError:
                pass
        except OSError:  # ELOOP (a link), ENOTDIR (a file): not a cache folder
            return None
    return None


class ResponseCache:
    """The cache of one process, with its counts: ``hits``, ``misses``, ``writes`` and
    ``refused`` (entries a hit could not believe, by reason: ``link``, ``not_regular``,
    ``too_large``, ``unreadable``, ``mismatch`` …)."""

    def __init__(self, root: str | Path, max_mb: float = 1024.0, *, create: bool = True):
        if not (math.isfinite(max_mb) and max_mb > 0):
            raise UsageError(f"cache.max_mb must be a finite number above 0 (got {max_mb!r})")
        checked = check_root(root, create=create)
        self.root = Path(root).expanduser() if checked is None else checked
        self.present = checked is not None
        self.max_mb = max_mb
        self.max_bytes = int(max_mb * (1 << 20))
        self.hits = self.misses = self.writes = 0
        self.refused: Counter[str] = Counter()
        self._written_since_prune = 0
        self.prune_due = False  # written past a tenth of max_mb since the last prune (``put``)

    def _path(self, judge_id: str, key: str) -> Path:
        return self.root / judge_id / key[:2] / (key + _SUFFIX)

    def _folder(self, judge_id: str, key: str, create: bool) -> int | None:
        """The descriptor of the entry's folder, or None (absent, or a link: refused)."""
        if not (self.present and _JUDGE.fullmatch(judge_id) and _KEY.fullmatch(key)):
            return None
        try:
            root = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            judge = _open_dir(judge_id, root, create)
        finally:
            os.close(root)
        if judge is None:
            return None
        try:
            return _open_dir(key[:2], judge, create)
        finally:
            os.close(judge)

    def _read(self, folder: int, name: str) -> bytes | str:
        """The entry's bytes, or why not (a refusal reason, or ``absent``)."""
        try:
            fd = os.open(name, _READ_FLAGS, dir_fd=folder)
        except FileNotFoundError:
            return "absent"
        except OSError as e:
            return "link" if e.errno == errno.ELOOP else "unreadable"
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return "not_regular"
            if st.st_size > MAX_ENTRY_BYTES:
                return "too_large"
            data = os.read(fd, MAX_ENTRY_BYTES + 1)
            if len(data) > MAX_ENTRY_BYTES:
                return "too_large"
            try:
                os.utime(fd)  # recently used: pruned last
            except OSError:
                pass
            return data
        except OSError:
            return "unreadable"
        finally:
            os.close(fd)

    def get(self, judge_id: str, key: str) -> CachedReply | None:
        """The reply cached for this key, or None (a miss). An entry that is not a whole,
        regular, bounded file naming this key and judge id is a miss, counted in ``refused``."""
        folder = self._folder(judge_id, key, create=False)
        got: bytes | str = "absent"
        if folder is not None:
            try:
                got = self._read(folder, key + _SUFFIX)
            finally:
                os.close(folder)
        if isinstance(got, str):
            return self._miss(got)
        try:
            entry = _decode(got)
        except (msgspec.DecodeError, RecursionError):
            return self._miss("malformed")
        if entry.format != FORMAT or entry.key != key or entry.judge_id != judge_id:
            return self._miss("mismatch")
        if not _valid(entry):
            return self._miss("malformed")
        self.hits += 1
        return entry.reply

    def _miss(self, why: str) -> CachedReply | None:
        self.misses += 1
        if why != "absent":
            self.refused[why] += 1
        return None

    def contains(self, judge_id: str, key: str) -> bool:
        """Whether a regular file is in the entry's place (``estimate``: not read, not believed)."""
        folder = self._folder(judge_id, key, create=False)
        if folder is None:
            return False
        try:
            return stat.S_ISREG(os.stat(key + _SUFFIX, dir_fd=folder, follow_symlinks=False).st_mode)
        except OSError:
            return False
        finally:
            os.close(folder)

    def put(self, judge_id: str, key: str, reply: CachedReply, prune_now: bool = True) -> None:
        """Write one entry (atomically). Past a tenth of ``max_mb`` written since the last
        prune, prune (``prune_now``) or mark it due (``prune_due``: the audit's log writer
        prunes off the event loop, since a walk of a large cache takes seconds)."""
        folder = self._folder(judge_id, key, create=True)
        if folder is None:  # a link or a file where a folder should be: no write
            if self.present:
                self.refused["folder"] += 1
            return
        tmp = f"{TMP_PREFIX}{secrets.token_hex(8)}"
        data = _encode(Entry(FORMAT, judge_id, key, reply))
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                         dir_fd=folder)
            try:
                os.write(fd, data)
                taken = max(len(data), os.fstat(fd).st_blocks * 512)  # blocks, as prune counts them
            finally:
                os.close(fd)
            os.replace(tmp, key + _SUFFIX, src_dir_fd=folder, dst_dir_fd=folder)  # replaces a link, never follows it
            self.writes += 1
            self._written_since_prune += taken
        except OSError:
            try:
                os.unlink(tmp, dir_fd=folder)
            except OSError:
                pass
            return  # a cache that cannot be written is a cache that misses
        finally:
            os.close(folder)
        if self._written_since_prune * 10 > self.max_bytes:  # bounded during a run, not only at its end
            self.prune_due = True
            if prune_now:
                self.prune()

    def prune(self) -> int:
        """Prune to ``max_mb`` now (``prune``); what was written since is no longer due."""
        self._written_since_prune, self.prune_due = 0, False
        return prune(self.root, self.max_mb)

    def refused_line(self) -> str | None:
        """One line for the run's summary when entries were refused; None when none was."""
        if not self.refused:
            return None
        why = ", ".join(f"{n} {reason}" for reason, n in sorted(self.refused.items()))
        return (f"response cache {self.root}: {sum(self.refused.values())} entr(ies) not believed ({why}); "
                "each was a miss and its call was made")


class Found(NamedTuple):
    path: Path
    bytes: int  # blocks taken (st_blocks × 512), what the disk gives up when it is removed
    mtime: float
    judge_id: str


def _scan(folder: int) -> Iterator[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as it:
            yield from it
    except OSError:
        return


def _walk(root: Path, tmp_files: list[tuple[int, str, float]] | None = None) -> Iterator[Found]:
    """Every entry: a regular file laid out as one, in real folders (no link followed)."""
    try:
        top = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        for j in _scan(top):
            if _JUDGE.fullmatch(j.name) is None or not j.is_dir(follow_symlinks=False):
                continue
            judge = _open_dir(j.name, top)
            if judge is None:
                continue
            try:
                for p in _scan(judge):
                    if _PREFIX.fullmatch(p.name) is None or not p.is_dir(follow_symlinks=False):
                        continue
                    yield from _entries_in(root, judge, j.name, p.name, tmp_files)
            finally:
                os.close(judge)
    finally:
        os.close(top)


def _entries_in(root: Path, judge: int, judge_id: str, prefix: str,
                tmp_files: list[tuple[int, str, float]] | None) -> Iterator[Found]:
    folder = _open_dir(prefix, judge)
    if folder is None:
        return
    try:
        for e in _scan(folder):
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:  # removed meanwhile (a concurrent prune or rename)
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            if e.name.startswith(TMP_PREFIX):
                if tmp_files is not None:
                    tmp_files.append((os.dup(folder), e.name, st.st_mtime))
            elif is_entry_name(judge_id, prefix, e.name):
                yield Found(root / judge_id / prefix / e.name, st.st_blocks * 512, st.st_mtime, judge_id)
    finally:
        os.close(folder)


def _marked(root: str | Path) -> Path | None:
    """The folder when it is a cache (or absent: None); refused with one line when it is not."""
    return check_root(root, create=False)


def entries(root: str | Path) -> list[Found]:
    """Every entry of the cache (path, blocks in bytes, mtime, judge id)."""
    path = _marked(root)
    return [] if path is None else list(_walk(path))


def stats(root: str | Path) -> dict[str, Any]:
    """Entries and bytes (blocks taken), in all and per judge id."""
    per: dict[str, dict[str, int]] = {}
    for e in entries(root):
        row = per.setdefault(e.judge_id, {"entries": 0, "bytes": 0})
        row["entries"] += 1
        row["bytes"] += e.bytes
    return {"dir": str(Path(root).expanduser()), "entries": sum(r["entries"] for r in per.values()),
            "bytes": sum(r["bytes"] for r in per.values()), "judges": dict(sorted(per.items()))}


def _unlink(e: Found) -> int:
    """Remove one entry, through real folders only (its path was found without links, but a
    folder may have been swapped for a link since)."""
    try:
        top = os.open(e.path.parent.parent.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return 0
    try:
        judge = _open_dir(e.judge_id, top)
        if judge is None:
            return 0
        try:
            folder = _open_dir(e.path.parent.name, judge)
            if folder is None:
                return 0
            try:
                st = os.stat(e.path.name, dir_fd=folder, follow_symlinks=False)
                if not stat.S_ISREG(st.st_mode):
                    return 0
                os.unlink(e.path.name, dir_fd=folder)
                return 1
            finally:
                os.close(folder)
        finally:
            os.close(judge)
    except OSError:  # removed meanwhile: a concurrent prune
        return 0
    finally:
        os.close(top)


def prune(root: str | Path, max_mb: float | None = None, older_than_days: float | None = None,
          judge_id: str | None = None) -> int:
    """Remove entries: of one judge id, older than some days, and then the least recently
    used until the cache is under ``max_mb``. Returns how many were removed. Safe while runs
    use the cache: a removed entry is a miss, and a writer's temporary file is left alone
    unless it is older than ``TMP_STALE_S`` (a killed writer's). Its memory is 16 bytes an
    entry kept (its time and blocks), never the entries themselves: an audit prunes as it
    writes, beside everything else it holds."""
    for name, value in (("max_mb", max_mb), ("older_than_days", older_than_days)):
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise UsageError(f"{name} must be a finite number of at least 0 (got {value!r})")
    path = _marked(root)
    if path is None:
        return 0
    tmp_files: list[tuple[int, str, float]] = []
    now, removed = time.time(), 0
    times, blocks = array("d"), array("q")  # of the entries kept
    for e in _walk(path, tmp_files):
        if (judge_id is not None and e.judge_id == judge_id) or (
                older_than_days is not None and now - e.mtime > older_than_days * 86400):
            removed += _unlink(e)
        elif max_mb is not None:
            times.append(e.mtime)
            blocks.append(e.bytes)
    if max_mb is not None:
        removed += _prune_to(path, times, blocks, int(max_mb * (1 << 20)))
    for folder, name, mtime in tmp_files:  # torn writes of killed processes
        try:
            if now - mtime > TMP_STALE_S:
                os.unlink(name, dir_fd=folder)
        except OSError:  # renamed into place or removed meanwhile
            pass
        finally:
            os.close(folder)
    return removed


def _prune_to(path: Path, times: array[float], blocks: array[int], limit: int) -> int:
    """Remove the least recently used entries until the rest take at most ``limit`` bytes:
    the cut-off time found from the entries' times and blocks, then a second walk removes
    those before it (and as many at it as the cut needs). An entry used or written between
    the walks is kept: pruning frees a little less, never a fresher entry."""
    excess = sum(blocks) - limit
    if excess <= 0:
        return 0
    oldest_first = sorted(range(len(times)), key=times.__getitem__)
    cut = 0
    for i in oldest_first:
        excess -= blocks[i]
        cut += 1
        if excess <= 0:
            break
    cutoff = times[oldest_first[cut - 1]]
    at_cutoff = sum(1 for i in oldest_first[:cut] if times[i] == cutoff)
    removed = 0
    for e in _walk(path):
        if e.mtime < cutoff or (e.mtime == cutoff and at_cutoff > 0):
            at_cutoff -= e.mtime == cutoff
            removed += _unlink(e)
    return removed
