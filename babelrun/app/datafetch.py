"""``babelrun data get``: download a data set of the catalogue (``corpus/data.py``), check every
file against its pinned sha256, unpack it, and only then move it into the data home.

Everything happens in a staging folder inside the data home (so the final move is one
rename on one file system); any failure — a wrong hash, a reply longer than the pinned size,
a tarball member that is a link or leaves its folder, a timeout — removes the staging folder
(and the data home itself where this call made it), so a refused fetch leaves nothing behind.

Not ``pooch``: its downloads are not bounded in size, and on Python < 3.12 its ``Untar``
extracts members as they come (links and ``../`` names included); the checks here are the
point of the command, and the standard library does the rest.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tarfile
import tempfile
import time
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import IO

from ..corpus.data import CATALOGUE, DataFile, DataSet, data_home
from ..errors import UserError

MARKER = ".babelrun-data.json"  # what a folder babelrun fetched records (and replaces only such folders)
MAX_MEMBERS = 5000
MAX_UNPACKED_BYTES = 256 << 20
READ_TIMEOUT_S = 30.0  # one read of the socket
TOTAL_TIMEOUT_S = 900.0  # one whole download
CHUNK = 1 << 16


class DataRefused(UserError):
    """A download that is not what the catalogue pins, or an unsafe archive: nothing kept."""

    exit_code = 2


Opener = Callable[[str, float], IO[bytes]]


def _open(url: str, timeout: float) -> IO[bytes]:
    if not url.startswith(("http://", "https://", "file:")):
        raise DataRefused(f"--from: {url!r} is not an http(s):// or file: URL")
    return urllib.request.urlopen(url, timeout=timeout)  # noqa: S310 (schemes checked above)


def url_of(dataset: DataSet, file: DataFile, mirror: str | None) -> str:
    """Where ``file`` is downloaded from: the catalogue's base, or the mirror's (``--from``: a
    base the file's name is appended to, or the file's own URL when it ends with its name)."""
    if mirror is None:
        return dataset.base_url + file.name
    if len(dataset.files) == 1 and mirror.rstrip("/").endswith("/" + PurePosixPath(file.name).name):
        return mirror
    return mirror.rstrip("/") + "/" + file.name


def download(url: str, file: DataFile, into: Path, opener: Opener = _open) -> Path:
    """``url`` streamed into ``into``, refused (DataRefused) unless it is exactly ``file.size``
    bytes with ``file.sha256``."""
    digest, got, started = hashlib.sha256(), 0, time.monotonic()
    try:
        with opener(url, READ_TIMEOUT_S) as reply, into.open("xb") as out:
            while chunk := reply.read(CHUNK):
                got += len(chunk)
                if got > file.size:
                    raise DataRefused(f"{url}: longer than the pinned {file.size} bytes")
                if time.monotonic() - started > TOTAL_TIMEOUT_S:
                    raise DataRefused(f"{url}: not downloaded within {TOTAL_TIMEOUT_S:.0f} s")
                digest.update(chunk)
                out.write(chunk)
    except OSError as e:  # refused connection, 404 (HTTPError), timeout
        raise DataRefused(f"{url}: {getattr(e, 'reason', None) or e}") from None
    if digest.hexdigest() != file.sha256:
        raise DataRefused(f"{url}: sha256 {digest.hexdigest()} is not the pinned {file.sha256} "
                          f"({got} bytes): refused, nothing kept")
    return into


def _member_path(member: tarfile.TarInfo, file: DataFile) -> PurePosixPath | None:
    """Where a tarball member goes under the data set's folder; None for a member not kept.
    Refuses links, devices and names that are absolute or climb out."""
    name = PurePosixPath(member.name)
    if name.is_absolute() or ".." in name.parts or "\\" in member.name:
        raise DataRefused(f"{file.name}: member {member.name!r} leaves its folder: refused, nothing kept")
    if not (member.isfile() or member.isdir()):
        raise DataRefused(f"{file.name}: member {member.name!r} is a link or a special file: refused, nothing kept")
    text = name.as_posix()
    if file.strip:
        if not (text + "/").startswith(file.strip):
            raise DataRefused(f"{file.name}: member {member.name!r} is outside {file.strip!r}")
        text = text[len(file.strip):]
    if not text or member.isdir():
        return None
    if file.keep and not any(text == k or text.startswith(k) for k in file.keep):
        return None
    return PurePosixPath(text)


def unpack_tgz(archive: Path, file: DataFile, root: Path) -> int:
    """The kept members of ``archive`` written under ``root``; checked member by member before
    any is written (a refused archive writes nothing). Returns the files written."""
    with tarfile.open(archive, "r:gz") as tar:
        members, total, chosen = 0, 0, []
        for member in tar:  # streams: a gzip bomb stops at the bounds
            members += 1
            total += max(member.size, 0)
            if members > MAX_MEMBERS or total > MAX_UNPACKED_BYTES:
                raise DataRefused(f"{file.name}: over {MAX_MEMBERS} members or {MAX_UNPACKED_BYTES >> 20} MiB")
            where = _member_path(member, file)
            if where is not None:
                chosen.append((member, where))
        for member, where in chosen:
            target = root.joinpath(*where.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            source = tar.extractfile(member)
            assert source is not None  # a regular file (checked above)
            try:
                with source, target.open("xb") as out:
                    shutil.copyfileobj(source, out)
            except (FileExistsError, NotADirectoryError):
                raise DataRefused(f"{file.name}: member {member.name!r} is given twice: refused, "
                                  "nothing kept") from None
    return len(chosen)


def get(name: str, mirror: str | None = None, environ: Mapping[str, str] | None = None,
        opener: Opener = _open) -> tuple[Path, int]:
    """Fetch data set ``name`` into the data home; returns (its folder, files written)."""
    dataset = CATALOGUE.get(name)
    if dataset is None:
        raise DataRefused(f"NAME: unknown data set {name!r}; known: {', '.join(sorted(CATALOGUE))}")
    home = data_home(environ)
    target = home / dataset.name
    if target.is_symlink() or (target.exists() and not (target / MARKER).is_file()):
        raise DataRefused(f"{target} exists and was not written by babelrun data get: move it away first")
    made_home = not home.exists()
    home.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dataset.name}-", dir=home))
    try:
        written = _fill(dataset, mirror, staging, opener)
        _replace(staging / "tree", target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        if made_home:
            shutil.rmtree(home, ignore_errors=True)
        raise
    shutil.rmtree(staging, ignore_errors=True)
    return target, written


def _fill(dataset: DataSet, mirror: str | None, staging: Path, opener: Opener) -> int:
    tree = staging / "tree"
    tree.mkdir()
    written = 0
    for i, file in enumerate(dataset.files):
        url = url_of(dataset, file, mirror)
        got = download(url, file, staging / f"download-{i}", opener)
        if file.unpack == "tgz":
            written += unpack_tgz(got, file, tree)
        else:
            target = tree.joinpath(*PurePosixPath(file.into).parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            got.replace(target)
            written += 1
    record = {"name": dataset.name, "files": {f.name: f.sha256 for f in dataset.files},
              "from": mirror or dataset.base_url}
    (tree / MARKER).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return written


def _replace(new: Path, target: Path) -> None:
    """``new`` renamed to ``target``; an older fetch of the same data set is removed after."""
    old = None
    if target.exists():
        old = target.with_name(f".{target.name}-old-{time.time_ns()}")
        target.rename(old)
    new.rename(target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def present(environ: Mapping[str, str] | None = None) -> dict[str, bool]:
    """Per data set of the catalogue: whether the data home holds a fetched copy."""
    home = data_home(environ)
    return {name: (home / name / MARKER).is_file() for name in sorted(CATALOGUE)}
