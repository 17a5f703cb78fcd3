"""The run directory's lock.

Shards and locking. A plan splits by key into N shards (``Shard``: a hash of (judge_id,
item_id, order) mod N), and several processes may write one run directory at once, each
running its own shard. ``RunLock`` is an ``flock`` on ``RUN_DIR/lock`` taken in one of
three ways:

- a whole-run ``audit`` (and ``merge``) takes it **exclusive**: no other writer is alive,
  so it may repair every segment;
- a shard takes it **shared**, plus an exclusive lock on ``RUN_DIR/locks/s<i>of<N>``: shards
  run side by side, a whole-run audit or merge is refused while any of them runs,
  and two processes never run the same shard. A shard's segments are named after it
  (``s<i>of<N>-host-pid-…``), and it repairs only those: under its own exclusive lock their
  writers are all dead, while other shards' segments may have live writers;
- the Ray driver takes it **shared** only; its workers lock their shards.

Readers never need a repair: they leave out a torn last line (a live writer's, or a dead
one's that no repair has cut yet). The kernel drops a lock when its process dies, however
it dies; on shared storage across hosts, ``flock`` must reach the server (NFSv4 and Lustre
do; otherwise give each host its own shards and never run one shard twice).
"""

from __future__ import annotations

import fcntl
import os
import socket
from pathlib import Path

from ..core.keys import Shard
from ..errors import RunDirBusy
from .files import open_nofollow, safe_dir


class RunLock:
    """The run directory's lock (see the module docstring): ``flock`` on ``RUN_DIR/lock``,
    exclusive for a whole-run audit, shared for a shard (which also locks
    ``RUN_DIR/locks/<shard tag>`` exclusively) or for the Ray driver (``shared=True``).

    The kernel drops the locks when the process dies, however it dies, so a killed run never
    leaves a stale lock behind. Each lock file names its holder for the error message.
    """

    def __init__(self, run_dir: Path, shard: Shard | None = None, *, shared: bool = False):
        self.path = run_dir / "lock"
        self.shard = shard
        self.shared = shared or shard is not None
        self._fds: list[tuple[int, int]] = []  # (descriptor, lock mode)

    def _take(self, path: Path, mode: int, busy: str) -> None:
        fd = open_nofollow(path, os.O_RDWR | os.O_CREAT, 0o644)  # a link at the name: refused, never followed
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 200).decode(errors="replace").strip() or "another process"
            os.close(fd)
            self.__exit__()
            raise RunDirBusy(busy.format(holder=holder)) from None
        self._fds.append((fd, mode))

    def _name_holder(self) -> None:
        """Write who holds each lock, once ALL are held: a process refused the second lock
        (a shard already running) must not have overwritten the first's holder text."""
        for fd, mode in self._fds:
            kind = "shards, e.g. " if mode == fcntl.LOCK_SH else ""  # shared holders overwrite each other
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"babelrun {kind}pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)

    def __enter__(self) -> RunLock:
        where = self.path.parent
        if not self.shared:
            self._take(self.path, fcntl.LOCK_EX, f"{where} is in use by {{holder}}; wait for it to "
                       "finish, or give this audit another output_dir")
            self._name_holder()
            return self
        self._take(self.path, fcntl.LOCK_SH, f"{where} is in use by {{holder}} (a whole-run audit "
                   "or merge); wait for it to finish")
        if self.shard is not None:
            self._take(safe_dir(where, "locks") / self.shard.tag, fcntl.LOCK_EX,
                       f"shard {self.shard.index}/{self.shard.count} of {where} is already running "
                       "in {holder}")
        self._name_holder()
        return self

    def __exit__(self, *exc: object) -> None:
        while self._fds:
            os.close(self._fds.pop()[0])  # closing releases the lock
