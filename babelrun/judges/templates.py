"""A judge's prompt as the user gives it, read in: a built-in name, inline ``{system, user}``
text, a plain text file (the user message), or ``{file, name}`` of a collection — a JSONL, JSON
or YAML file in MT-Bench's shape (``name``, ``type``, ``system_prompt``, ``prompt_template``;
or ``system``/``user``), whose ``type`` must agree with the judge's ``protocol``.

The manifest loader calls ``resolve`` once per judge and keeps the text in the spec, so a run
directory's ``run.yaml`` holds what the judge saw: ``show``, ``score`` and ``judge_id`` never
read the file again (it may have changed since the run).
"""

from __future__ import annotations

import difflib
import os
import stat
from pathlib import Path

import msgspec

from ..core import bounds
from ..spec import JudgeSpec, PromptSpec
from .prompt import TEMPLATES
from .protocol import TemplateError


def _did_you_mean(word: str, known: list[str]) -> str:
    close = difflib.get_close_matches(word, known, n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def resolve(judge: JudgeSpec, base: Path) -> str | PromptSpec:
    """The judge's ``prompt`` with its text read in: a built-in name as it is, a text file's
    text as the user message, a collection entry's system and user text, inline text as it is.
    ``TemplateError`` names the judge's field at fault. Paths are relative to ``base``."""
    prompt = judge.prompt
    if isinstance(prompt, str):
        if prompt in TEMPLATES:
            return prompt
        path = _path(prompt, base)
        if not path.is_file() and not path.exists():
            raise TemplateError("prompt", f"judge {judge.name!r}: {prompt!r} is neither a built-in template "
                                          f"({', '.join(TEMPLATES)}) nor a file")
        return PromptSpec(user=_text(path, "prompt"), source=path.name)
    if prompt.file is None:
        if prompt.name is not None:
            raise TemplateError("prompt.name", "name picks a template of a file: set file too")
        if prompt.user is None:
            raise TemplateError("prompt.user", f"judge {judge.name!r}: the template's user text is missing")
        return prompt
    if prompt.user is not None or prompt.system:
        raise TemplateError("prompt.file", "either file (+ name) or system/user text, not both")
    path = _path(prompt.file, base)
    if not path.is_file():
        raise TemplateError("prompt.file", f"file not found: {path}")
    system, user, kind = _from_collection(path, prompt.name, "prompt")
    if kind is not None and kind != judge.protocol:
        raise TemplateError("protocol", f"judge {judge.name!r}: template {prompt.name!r} is {kind}; "
                                        f"set protocol: {kind}")
    return PromptSpec(system=system, user=user, source=f"{path.name}#{prompt.name}" if prompt.name else path.name)


def _path(text: str, base: Path) -> Path:
    p = Path(text).expanduser()
    return p if p.is_absolute() else base / p


MAX_TEMPLATE_BYTES = 1 << 20  # a template file (or a collection of them): 1 MiB
_SPECIAL = ("/proc", "/sys", "/dev")  # files whose text is the system's, not a template


def _text(path: Path, field: str) -> str:
    """A template file's text: a regular file of at most ``MAX_TEMPLATE_BYTES``, refused
    before it is read otherwise (a 2 GB file, a FIFO, ``/proc/self/environ`` — a "regular"
    file whose size says 0 and whose text is the environment)."""
    real = os.path.realpath(path)
    if any(real == top or real.startswith(top + "/") for top in _SPECIAL):
        raise TemplateError(field, f"{path} is a system file ({real}), not a template")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO must not block the open
        with os.fdopen(fd, "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise TemplateError(field, f"{path} is not a regular file")
            if info.st_size > MAX_TEMPLATE_BYTES:
                raise TemplateError(field, f"{path} is {info.st_size:,} bytes: a template file holds at most "
                                           f"{MAX_TEMPLATE_BYTES:,}")
            data = f.read(MAX_TEMPLATE_BYTES + 1)
    except OSError as e:
        raise TemplateError(field, f"cannot read {path}: {e.strerror or e}") from None
    if len(data) > max(info.st_size, 0) or len(data) > MAX_TEMPLATE_BYTES:
        raise TemplateError(field, f"{path} holds more than its size says: not a template file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TemplateError(field, f"cannot read {path}: {e}") from None


# A collection's ``type`` (MT-Bench: pairwise, single) -> our protocol.
_KINDS = {"pairwise": "pairwise", "pair": "pairwise", "single": "pointwise", "pointwise": "pointwise"}


def _from_collection(path: Path, name: str | None, field: str) -> tuple[str, str, str | None]:
    """(system, user, protocol) of template ``name`` in a JSONL or YAML collection (MT-Bench's
    fields ``system_prompt``/``prompt_template``/``type``, or ``system``/``user``), or of a
    plain text file (the user message)."""
    text = _text(path, f"{field}.file")
    if path.suffix not in (".jsonl", ".yaml", ".yml", ".json"):
        if name is not None:
            raise TemplateError(f"{field}.name", f"{path.name} is a plain text template: it has no names")
        return "", text, None
    try:
        if path.suffix == ".jsonl":
            entries = [bounds.decode_json(msgspec.json.decode, line) for line in text.splitlines() if line.strip()]
        else:
            if path.suffix != ".json":
                bounds.check_yaml(text)  # aliases and depth, before the decoder expands them
            loaded = bounds.decode_json(msgspec.yaml.decode if path.suffix != ".json" else msgspec.json.decode, text)
            entries = ([{"name": k, **v} for k, v in loaded.items() if isinstance(v, dict)]
                       if isinstance(loaded, dict) else loaded)
    except msgspec.DecodeError as e:
        raise TemplateError(f"{field}.file", f"{path.name}: not valid {path.suffix[1:].upper()}: {e}") from None
    except bounds.BoundError as e:
        raise TemplateError(f"{field}.file", f"{path.name}: {e}") from None
    entries = [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []
    names = [str(e.get("name")) for e in entries]
    if name is None:
        if len(entries) != 1:
            raise TemplateError(f"{field}.name", f"{path.name} holds {len(entries)} templates: name one "
                                                 f"({', '.join(names[:8])})")
        entry = entries[0]
    else:
        found = [e for e in entries if str(e.get("name")) == name]
        if not found:
            raise TemplateError(f"{field}.name", f"no template {name!r} in {path.name}{_did_you_mean(name, names)}")
        entry = found[0]
    system = entry.get("system_prompt", entry.get("system", ""))
    user = entry.get("prompt_template", entry.get("user"))
    if not isinstance(user, str) or not isinstance(system, str):
        raise TemplateError(f"{field}.name", f"template {name!r} has no text prompt_template/user")
    kind = entry.get("type")
    return system, user, _KINDS.get(kind) if isinstance(kind, str) else None
