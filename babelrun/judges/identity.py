"""``judge_id``: the short hash of everything that can change a judge's verdicts."""

from __future__ import annotations

import functools
import hashlib
import os
import stat
import sys
from typing import Any

import msgspec

from ..spec import JudgeSpec
from .protocol import identity as protocol_identity
from .protocol import max_tokens, template_of
from .registry import options_of

# The judge fields, by their manifest names, that say where a request goes, with which key and
# headers, and what code answers it. Each is part of ``judge_id``; the lock check
# (``app/recheck.py``) also compares them one by one, since a lock's judge_id is only a claim.
ROUTING_FIELDS = ("backend", "model", "endpoint", "api_key_env", "headers", "headers_env", "organization",
                  "project", "azure", "callable", "version")


def judge_id(spec: JudgeSpec) -> str:
    """Short hash of everything that can change a verdict, and nothing that cannot.

    In: backend, model, endpoint, prompt template name, version and language (a user's
    template: a hash of its text, never its file path), the verdict pattern and protocol
    (when declared), sampling parameters, reasoning options, the Azure deployment, the key
    variable, extra headers and the variables they come from (names, never values), the
    organisation and project, a code judge's callable and its code (``code_identity``), and
    the simulated judge's knobs. Out: the judge's display name, concurrency, rate limits,
    timeouts and retries, which change how fast verdicts come, not which. A field added after
    ids were first published joins only when set, so a judge that sets none keeps its id.
    """
    template = template_of(spec)
    identity = {
        "backend": spec.backend,
        "model": spec.model,
        "endpoint": (spec.endpoint or "").rstrip("/"),
        "prompt": f"{template.name}@v{template.version}",
        "prompt_language": spec.prompt_language,
        "temperature": spec.temperature,
        "max_tokens": max_tokens(spec),
        "soft": spec.soft,
        "simulated": None,  # a simulated judge's knobs (its options' identity); kept so no id changes
        **protocol_identity(spec),
        **options_of(spec).identity(),  # the backend's own options that can change a verdict
        **({} if spec.seed is None else {"seed": spec.seed}),  # absent when unset: no id changes
    }
    if spec.api_key_env:  # which account answers (a key may route to another deployment)
        identity["api_key_env"] = spec.api_key_env
    blob = msgspec.json.encode(identity, order="sorted")
    return hashlib.blake2b(blob, digest_size=6).hexdigest()


def replay_identity(replay: Any) -> dict[str, Any]:
    """A replay judge is its file's content (a hash, never its path) and the judge chosen."""
    from pathlib import Path

    try:
        stat = Path(replay.path).stat()
        digest = _file_digest(replay.path, stat.st_size, stat.st_mtime_ns)
    except OSError:
        digest = "unreadable"
    mapped = {k: msgspec.to_builtins(getattr(replay, k)) for k in ("columns", "label_map")
              if getattr(replay, k, None)}  # a mapped table's reading (absent: the ids of old runs)
    if getattr(replay, "join", None):  # joined files by content too, never by path
        mapped["join"] = [{"by": j.by, "columns": j.columns, "files": _digests(j.path)} for j in replay.join]
    return {"file": digest, "judge": replay.judge, **mapped}


def _digests(pattern: str) -> list[str]:
    from pathlib import Path

    from ..corpus.pairtable import TableError, files_of

    try:
        files = files_of(pattern)
    except TableError:
        return ["unreadable"]
    out = []
    for file in files:
        try:
            stat = Path(file).stat()
            out.append(_file_digest(str(file), stat.st_size, stat.st_mtime_ns))
        except OSError:
            out.append("unreadable")
    return out


@functools.lru_cache(maxsize=64)
def _file_digest(path: str, size: int, mtime_ns: int) -> str:
    """A file's content hash, read once per (path, size, mtime): judge ids are asked for often.
    Streamed; a FIFO or a device is never read ("unreadable")."""
    from pathlib import Path

    from ..corpus.pairtable import TableError, open_regular

    digest = hashlib.blake2b(digest_size=12)
    try:
        with open_regular(Path(path)) as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
    except TableError:
        return "unreadable"
    return digest.hexdigest()


def code_identity(module: str | None, version: str | None = None) -> dict[str, str]:
    """A code judge's code: its declared ``version`` when it has one (the user says when the
    code changed, e.g. code spread over several modules), else a hash of the bytes of the
    source file of ``module``, the module that defines the function (found as ``module_origin``
    finds it: never imported here). A module that cannot be found is named as such: such a
    judge fails when it is built."""
    if version is not None:
        return {"version": version}
    origin = module_origin(module) if module else None
    if origin is None:
        return {"source": "not found"}
    if not os.path.isabs(origin):  # "built-in", "frozen": the interpreter's own code, no file
        return {"source": origin}
    try:
        info = os.stat(origin)
    except (OSError, ValueError):
        return {"source": "not found"}
    if not stat.S_ISREG(info.st_mode):
        return {"source": "not a file"}
    try:  # read afresh each time (a few times per audit): an edit within the clock's grain still counts
        return {"source": _source_digest(origin)}
    except OSError:
        return {"source": "unreadable"}


def _source_digest(path: str) -> str:
    digest = hashlib.blake2b(digest_size=12)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 16), b""):
            digest.update(chunk)
    return digest.hexdigest()


def module_origin(name: str) -> str | None:
    """Where module ``name`` is (or would be) loaded from, without running any module's code:
    a module already imported gives its own spec's origin (or ``__file__``); otherwise each
    package on the way is looked up by the import system's finders with its parent's search
    path, as ``import`` would, but never imported (``importlib.util.find_spec`` imports the
    parents of a dotted name). None when it cannot be found."""
    parts = name.split(".")
    path: Any = None
    origin: str | None = None
    for i in range(1, len(parts) + 1):
        full = ".".join(parts[:i])
        loaded = sys.modules.get(full)
        spec = getattr(loaded, "__spec__", None) if loaded is not None else _find_spec(full, path)
        if spec is None and loaded is None:
            return None
        origin = getattr(spec, "origin", None) or getattr(loaded, "__file__", None)
        path = getattr(spec, "submodule_search_locations", None)
        if path is None:
            path = getattr(loaded, "__path__", None)
        if path is None and i < len(parts):  # not a package: it has no submodules
            return None
    return origin


def _find_spec(name: str, path: Any) -> Any:
    """The first spec the meta-path finders give for ``name`` (under ``path``, its parent's
    search locations), as ``importlib`` asks them; a finder that fails is skipped."""
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        if find is None:
            continue
        try:
            spec = find(name, path)
        except (ImportError, ValueError, OSError, TypeError, AttributeError):
            continue
        if spec is not None:
            return spec
    return None
