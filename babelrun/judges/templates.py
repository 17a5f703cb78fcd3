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
import re
import stat
import string
from pathlib import Path
from typing import Any

import msgspec

from ..core import bounds
from ..spec import JudgeSpec, PromptPart, PromptSpec, VerdictSpec
from . import jinja, python_source
from .labels import scored_labels
from .prompt import TEMPLATES
from .protocol import FIELDS, TemplateError, check_source_fields, plain_format, template_of


def _did_you_mean(word: str, known: list[str]) -> str:
    close = difflib.get_close_matches(word, known, n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def resolve(judge: JudgeSpec, base: Path) -> str | PromptSpec:
    """The judge's ``prompt`` with its text read in: a built-in name as it is, a text file's
    text as the user message, a collection entry's system and user text, inline text as it is.
    ``TemplateError`` names the judge's field at fault. Paths are relative to ``base``."""
    prompt, _ = _resolve(judge, base)
    return prompt


def resolve_judge(judge: JudgeSpec, base: Path) -> JudgeSpec:
    """The judge with its prompt resolved (``resolve``) and, where the prompt is another
    tool's evaluator config that names its reply parser (alpaca_eval's ``configs.yaml``), the
    verdict that parser implies, unless the manifest declares one (the manifest wins)."""
    prompt, verdict = _resolve(judge, base)
    changes: dict[str, object] = {"prompt": prompt}
    if verdict is not None and judge.verdict is None:
        changes["verdict"] = verdict
    elif judge.verdict is not None:  # pointwise labels -> scores are values: one verdict, one judge_id
        changes["verdict"] = scored_labels(judge.verdict, judge.protocol)
    return msgspec.structs.replace(judge, **changes)


def inline(text: str) -> bool:
    """Whether a plain-string ``prompt:`` is inline text (a newline, a ``{field}``, or Jinja2
    syntax) rather than a built-in name or a file path."""
    return "\n" in text or _NAMED.search(text) is not None or jinja.marked(text)


def _resolve(judge: JudgeSpec, base: Path) -> tuple[str | PromptSpec, VerdictSpec | None]:
    used: set[str] = set()
    resolved = _resolve_into(judge, base, used)
    given = judge.prompt.vars if isinstance(judge.prompt, PromptSpec) else {}
    unused = sorted(set(given) - used)
    if unused:
        raise TemplateError(f"prompt.vars.{unused[0]}", f"judge {judge.name!r}: {{{unused[0]}}} is not a field of "
                                                        "the template: a var fills a field the template has")
    return resolved


def _resolve_into(judge: JudgeSpec, base: Path, used: set[str]) -> tuple[str | PromptSpec, VerdictSpec | None]:
    prompt = judge.prompt
    if isinstance(prompt, str):
        if prompt in TEMPLATES:
            return prompt, None
        if inline(prompt):
            return _finish(PromptSpec(), *read_text(prompt), {}, None, used), None
        path = _path(prompt, base)
        if not path.is_file() and not path.exists():
            raise TemplateError("prompt", f"judge {judge.name!r}: {prompt!r} is neither a built-in template "
                                          f"({', '.join(TEMPLATES)}) nor a file (inline text has a newline "
                                          "or a {field})")
        return _from_file(judge, path, PromptSpec(), used)
    if isinstance(prompt.system, PromptPart) or isinstance(prompt.user, PromptPart):
        if prompt.file is not None:
            raise TemplateError("prompt.file", "either file (+ name) or system/user parts, not both")
        system = _part(prompt.system, base, "prompt.system")
        user = _part(prompt.user, base, "prompt.user") if prompt.user is not None else None
        if user is None:
            raise TemplateError("prompt.user", f"judge {judge.name!r}: the template's user text is missing")
        return _finish(prompt, system, user, {}, None, used, source=_parts_source(prompt)), None
    if prompt.file is None:
        if prompt.name is not None:
            raise TemplateError("prompt.name", "name picks a template of a file: set file too")
        if prompt.user is None:
            raise TemplateError("prompt.user", f"judge {judge.name!r}: the template's user text is missing")
        system, user = read_text(prompt.user) if not prompt.system else (prompt.system, prompt.user)
        assert isinstance(system, str)  # PromptPart handled above
        finished = _finish(prompt, system, user, {}, None, used, source=prompt.source)
        if finished == msgspec.structs.replace(prompt, vars={}) and not prompt.vars:
            return prompt, None  # unchanged (the ids of existing inline templates stay the same)
        return finished, None
    if prompt.user is not None or prompt.system:
        raise TemplateError("prompt.file", "either file (+ name) or system/user text, not both")
    path = _path(prompt.file, base)
    if not path.is_file():
        raise TemplateError("prompt.file", f"file not found: {path}")
    return _from_file(judge, path, prompt, used)


def _from_file(judge: JudgeSpec, path: Path, prompt: PromptSpec,
               used: set[str]) -> tuple[PromptSpec, VerdictSpec | None]:
    name = prompt.name
    source = f"{path.name}#{name}" if name else path.name
    if path.suffix == ".json":
        messages = _message_array(path)
        if messages is not None:  # promptfoo: a JSON array of chat messages (its fields are Jinja-like)
            if name is not None:
                raise TemplateError("prompt.name", f"{path.name} is one prompt (a message array): it has no names")
            system, user = _two_messages([(m["role"], m["content"]) for m in messages], "promptfoo message array")
            return _finish(prompt, system, user, {}, "promptfoo", used, source=source), None
    if path.suffix in (".yaml", ".yml"):
        config = _alpaca_eval_config(path, name)
        if config is not None:
            return _from_alpaca_eval(judge, path, config, prompt, source, used)
    system, user, kind, defaults, tool = _from_collection(path, name, "prompt")
    if kind is not None and kind != judge.protocol:
        raise TemplateError("protocol", f"judge {judge.name!r}: template {name!r} is {kind}; "
                                        f"set protocol: {kind}")
    if not system and path.suffix not in (".jsonl", ".yaml", ".yml", ".json"):
        system, user = read_text(user)
    return _finish(prompt, system, user, defaults, tool, used, source=source), None


def _finish(prompt: PromptSpec, system: str, user: str, defaults: dict[str, str], tool: str | None,
            used: set[str], *, source: str | None = None) -> PromptSpec:
    """The prompt's two texts as babelrun keeps them: ``str.format`` text (a Jinja2 template
    that is only ``{{ name }}`` fields becomes one), or Jinja2 source that needs Jinja2, with
    its vars kept to fill at render; placeholders written out (``fields``/``vars`` keys that
    are not names) replaced as plain text. JudgeLM's ``defaults`` fill its names; the
    manifest's vars win."""
    values = {**defaults, **prompt.vars}
    fields = dict(prompt.fields)
    syntax = prompt.syntax
    written = [k for k in (*fields, *values) if not k.isidentifier()]
    if written:
        system, user = _replace_written(system, user, fields, values, used)
        fields = {k: v for k, v in fields.items() if k.isidentifier()}
        values = {k: v for k, v in values.items() if k.isidentifier()}
        syntax = "format"
    elif syntax == "auto" and jinja.is_jinja((system, user)):
        syntax = "jinja2"
    if syntax == "jinja2":
        try:
            plain = [jinja.as_format(t) for t in (system, user)]
        except jinja.JinjaError as e:
            raise TemplateError("prompt", str(e)) from None
        if all(p is not None for p in plain):  # only {{ name }} fields: the same str.format text
            system, user, syntax = plain[0] or "", plain[1] or "", "format"
    if syntax == "jinja2":
        names = _jinja_names(system, user)
        kept = {k: to_format(v) for k, v in values.items() if k in names}
        used.update(kept)
        spec = PromptSpec(system=system, user=user, source=source, fields=fields, vars=kept, syntax="jinja2")
    else:
        spec = PromptSpec(system=substitute(to_format(system), values, used),
                          user=substitute(to_format(user), values, used), source=source, fields=fields,
                          syntax="format" if prompt.syntax == "format" else "auto")
    if tool is not None:
        check_source_fields(template_of(JudgeSpec(name="", backend="", prompt=spec)), tool)
    return spec


def _jinja_names(system: str, user: str) -> set[str]:
    names: set[str] = set()
    for text in (system, user):
        try:
            names.update(jinja.check(text)[0])
        except jinja.JinjaError as e:
            raise TemplateError("prompt", str(e)) from None
    return names


def _replace_written(system: str, user: str, fields: dict[str, str], values: dict[str, str],
                     used: set[str]) -> tuple[str, str]:
    """The texts as ``str.format`` templates where only the placeholders written out (the
    keys of ``fields``/``vars`` that are not plain names: WildBench's ``{$user_query}``, filled
    by ``str.replace``) are fields or var text, and everything else is literal."""
    keys = sorted((k for k in (*fields, *values) if not k.isidentifier()), key=len, reverse=True)
    for key in keys:
        if key in fields and fields[key] not in _ALL_FIELDS:
            raise TemplateError(f"prompt.fields.{key}", f"{fields[key]!r} is not one of babelrun's fields "
                                                        f"({', '.join(sorted(_ALL_FIELDS))})")
    pattern = re.compile("|".join(re.escape(k) for k in keys))
    found: set[str] = set()

    def one(text: str) -> str:
        out, last = [], 0
        for m in pattern.finditer(text):
            key = m.group()
            found.add(key)
            out.append(_escape(text[last:m.start()]))
            out.append("{" + fields[key] + "}" if key in fields else to_format(values[key]))
            last = m.end()
        out.append(_escape(text[last:]))
        return "".join(out)

    texts = one(system), one(user)
    missing = [k for k in keys if k not in found and k in fields]
    if missing:
        raise TemplateError(f"prompt.fields.{missing[0]}", f"{missing[0]!r} is not in the template's text")
    used.update(found)
    return texts


_ALL_FIELDS = frozenset().union(*FIELDS.values())


def _part(part: str | PromptPart, base: Path, field: str) -> str:
    """One message's text: inline, a whole file, or one named text in a file (a ``.py`` file's
    string constant, parsed, never imported; a YAML/JSON mapping's key)."""
    if isinstance(part, str):
        return part
    if (part.text is None) == (part.file is None):
        raise TemplateError(field, "give text or file (+ name), one of them")
    if part.text is not None:
        if part.name is not None:
            raise TemplateError(f"{field}.name", "name picks a text of a file: set file, not text")
        return part.text
    assert part.file is not None
    path = _path(part.file, base)
    if not path.is_file():
        raise TemplateError(f"{field}.file", f"file not found: {path}")
    text = _text(path, f"{field}.file")
    if part.name is None:
        if path.suffix == ".py":
            raise TemplateError(f"{field}.name", f"{path.name} is Python: name the string constant "
                                                 f"({', '.join(_py_texts(text, f'{field}.file')[:8])})")
        return text
    if path.suffix == ".py":
        value = _py_constant(text, part.name, path, f"{field}.name")
    elif path.suffix in (".yaml", ".yml", ".json"):
        loaded = _mapping(path, text, f"{field}.file")
        if part.name not in loaded:
            raise TemplateError(f"{field}.name", f"no key {part.name!r} in {path.name}"
                                                 f"{_did_you_mean(part.name, [str(k) for k in loaded])}")
        value = loaded[part.name]
    else:
        raise TemplateError(f"{field}.name", f"{path.name} is a plain text template: it has no names")
    if not isinstance(value, str):
        raise TemplateError(f"{field}.name", f"{part.name!r} in {path.name} is not text (a message is one text; a "
                                             "prompt entry is prompt: {file, name})")
    return value


def _parts_source(prompt: PromptSpec) -> str | None:
    names = [f"{Path(p.file).name}#{p.name}" if p.name else Path(p.file).name
             for p in (prompt.system, prompt.user) if isinstance(p, PromptPart) and p.file is not None]
    return " + ".join(names) or None


def _py_constant(text: str, name: str, path: Path, field: str) -> str | dict[str, object]:
    try:
        return python_source.constant(text, name)
    except python_source.PythonSourceError as e:
        hint = ""
        if "no module-level constant" in str(e):
            hint = _did_you_mean(name, _py_texts(text, field))
        raise TemplateError(field, f"{path.name}: {e}{hint}") from None


def _py_texts(text: str, field: str) -> list[str]:
    try:
        return python_source.text_constants(text)
    except python_source.PythonSourceError as e:
        raise TemplateError(field, str(e)) from None


def _mapping(path: Path, text: str, field: str) -> dict[str, Any]:
    try:
        if path.suffix != ".json":
            bounds.check_yaml(text)
        loaded = bounds.decode_json(msgspec.json.decode if path.suffix == ".json" else msgspec.yaml.decode, text)
    except msgspec.DecodeError as e:
        raise TemplateError(field, f"{path.name}: not valid {path.suffix[1:].upper()}: {e}") from None
    except bounds.BoundError as e:
        raise TemplateError(field, f"{path.name}: {e}") from None
    if not isinstance(loaded, dict):
        raise TemplateError(field, f"{path.name} is not a mapping: it has no names")
    return loaded


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


def _from_collection(path: Path, name: str | None,
                     field: str) -> tuple[str, str, str | None, dict[str, str], str | None]:
    """(system, user, protocol, defaults, tool) of template ``name`` of a collection — JSONL,
    JSON or YAML entries (``_entries``), a ``.py`` file's constant (text, or a prompt dict in
    the same shape) — or of a plain text file (the user message). ``tool``: the tool whose
    entry shape it is (JudgeLM: ``defaults``; MT-Bench: ``type`` + ``prompt_template``), else None."""
    text = _text(path, f"{field}.file")
    if path.suffix == ".py":
        if name is None:
            raise TemplateError(f"{field}.name", f"{path.name} is Python: name the string constant "
                                                 f"({', '.join(_py_texts(text, f'{field}.file')[:8])})")
        value = _py_constant(text, name, path, f"{field}.name")
        if isinstance(value, str):
            return *read_text(value), None, {}, None
        return _entry(value, name, field)
    if path.suffix not in (".jsonl", ".yaml", ".yml", ".json"):
        if name is not None:
            raise TemplateError(f"{field}.name", f"{path.name} is a plain text template: it has no names")
        return "", text, None, {}, None
    entries = _entries(path, text, field)
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
    return _entry(entry, name, field)


# An entry's user text, by the keys tools give it (MT-Bench/JudgeLM, ours, OpenAI evals, others).
_USER_KEYS = ("prompt_template", "user", "prompt", "template")


def _entries(path: Path, text: str, field: str) -> list[dict[str, Any]]:
    """The entries of a JSONL file (one per line), a JSON/YAML list, a mapping of names to
    entries (``{pair-v2: {…}}``, OpenAI evals' ``{closedqa: {prompt: …}}``), or a mapping that
    is itself one entry (it has a prompt key or ``messages``: Phoenix's eval configs)."""
    try:
        if path.suffix == ".jsonl":
            loaded: Any = [bounds.decode_json(msgspec.json.decode, line) for line in text.splitlines() if line.strip()]
        else:
            if path.suffix != ".json":
                bounds.check_yaml(text)  # aliases and depth, before the decoder expands them
            loaded = bounds.decode_json(msgspec.yaml.decode if path.suffix != ".json" else msgspec.json.decode, text)
    except msgspec.DecodeError as e:
        raise TemplateError(f"{field}.file", f"{path.name}: not valid {path.suffix[1:].upper()}: {e}") from None
    except bounds.BoundError as e:
        raise TemplateError(f"{field}.file", f"{path.name}: {e}") from None
    if isinstance(loaded, dict):
        if any(k in loaded for k in (*_USER_KEYS, "messages")):
            return [loaded]
        loaded = [{"name": k, **v} for k, v in loaded.items() if isinstance(v, dict)]
    return [e for e in loaded if isinstance(e, dict)] if isinstance(loaded, list) else []


def _entry(entry: dict[str, Any], name: str | None,
           field: str) -> tuple[str, str, str | None, dict[str, str], str | None]:
    system = entry.get("system_prompt", entry.get("system", ""))
    user = next((entry[k] for k in _USER_KEYS if k in entry), None)
    messages = entry.get("messages", user if isinstance(user, list) else None)
    if isinstance(messages, list):  # a role/content message list (OpenAI evals, Phoenix)
        if not all(isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
                   for m in messages):
            raise TemplateError(f"{field}.name", f"template {name!r}: its messages are not {{role, content}} text")
        system, user = _two_messages([(m["role"], m["content"]) for m in messages], f"template {name!r}")
    if not isinstance(user, str) or not isinstance(system, str):
        raise TemplateError(f"{field}.name", f"template {name!r} has no text prompt_template/user/prompt/messages")
    kind = entry.get("type")
    defaults = entry.get("defaults")  # JudgeLM: the text of its {prompt} block
    defaults = {str(k): v for k, v in defaults.items() if isinstance(v, str)} if isinstance(defaults, dict) else {}
    tool = "JudgeLM" if defaults else "MT-Bench" if "type" in entry and "prompt_template" in entry else None
    return system, user, _KINDS.get(kind) if isinstance(kind, str) else None, defaults, tool


# ---- other tools' prompt files, read unchanged ------------------------------------------------

_NAMED = re.compile(r"\{([A-Za-z_]\w*)\}")
_FIELD_LIKE = re.compile(r"\{[A-Za-z_]\w*[.\[!:][^{}\n]*\}")
_CHAT_START, _CHAT_END = "<|im_start|>", "<|im_end|>"


def read_text(text: str) -> tuple[str, str]:
    """(system, user) of a prompt's text: ChatML markup (``<|im_start|>system … <|im_end|>``,
    alpaca_eval's and LLMBar's prompt files) split into its messages, each trimmed as
    alpaca_eval's ``prompt_to_chatml`` trims it; any other text is the user message."""
    stripped = text.strip()
    if not stripped.startswith(_CHAT_START):
        return "", text
    messages = []
    for part in stripped.split(_CHAT_START)[1:]:
        head, _, body = part.partition("\n")
        messages.append((head.strip(), body.split(_CHAT_END, 1)[0].strip()))
    return _two_messages(messages, "chat markup (<|im_start|>role … <|im_end|>)")


def _two_messages(messages: list[tuple[str, str]], what: str) -> tuple[str, str]:
    roles = [role for role, _ in messages]
    if roles == ["system", "user"]:
        return messages[0][1], messages[1][1]
    if roles == ["user"]:
        return "", messages[0][1]
    raise TemplateError("prompt", f"{what} with the messages {roles}: a judge's prompt is one system and one "
                                  "user message (or one user message); merge the others into them")


def to_format(text: str) -> str:
    """A prompt's text as babelrun's ``str.format`` template, the file left as it is.

    Text that already is one (plain ``{name}`` fields, ``{{``/``}}`` for a literal brace) is
    returned unchanged. Otherwise, the way alpaca_eval reads its prompt files, only a
    ``{name}`` is a field and every other brace is literal (a JSON example in a prompt):
    those are escaped. (Jinja2 text is read before this: ``_finish``, judges/jinja.py.)"""
    if plain_format(text) or _format_attempt(text):
        return text  # a template (the checks refuse its specs, conversions and attributes)
    attempt = _FIELD_LIKE.search(text)
    if attempt is not None:  # a field with an attribute, index, conversion or format spec
        raise TemplateError("prompt", f"not a valid template: field {attempt.group()} must be a plain name "
                                      "({name}); a literal brace is written {{ or }}")
    out, last = [], 0
    for m in _NAMED.finditer(text):
        out.append(_escape(text[last:m.start()]))
        out.append("{" + m.group(1) + "}")
        last = m.end()
    out.append(_escape(text[last:]))
    return "".join(out)


_ATTEMPT = re.compile(r"[A-Za-z_]\w*(?:[.\[].*)?", re.S)


def _format_attempt(text: str) -> bool:
    """Whether ``text`` parses as ``str.format`` with every field a name (perhaps with an
    attribute, index, conversion or spec): meant as a template, not literal braces."""
    try:
        names = [name for _, name, _, _ in string.Formatter().parse(text) if name is not None]
    except ValueError:
        return False
    return all(_ATTEMPT.fullmatch(name) for name in names)


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def substitute(text: str, values: dict[str, str], used: set[str] | None = None) -> str:
    """A ``str.format`` template with the fields named in ``values`` (``prompt: {vars: …}``,
    JudgeLM's defaults) replaced by their text, itself read as a template (it may use
    babelrun's fields); every other field and literal kept as it was."""
    if not values:
        return text
    out = []
    for literal, field, spec, conversion in string.Formatter().parse(text):
        out.append(_escape(literal))
        if field is None:
            continue
        if field in values:
            out.append(to_format(values[field]))
            if used is not None:
                used.add(field)
        else:
            out.append("{" + field + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}")
    return "".join(out)


def _message_array(path: Path) -> list[dict[str, str]] | None:
    try:
        loaded = bounds.decode_json(msgspec.json.decode, _text(path, "prompt.file"))
    except msgspec.DecodeError:
        return None
    except bounds.BoundError as e:
        raise TemplateError("prompt.file", f"{path.name}: {e}") from None
    if (isinstance(loaded, list) and loaded
            and all(isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
                    for m in loaded)):
        return loaded
    return None


# alpaca_eval's completion parsers -> a verdict (a generated ranking; a soft judge's tokens).
_RANKING = VerdictSpec(pattern=r"""['"]model['"]\s*:\s*['"]model_1['"]\s*,\s*['"]rank['"]\s*:\s*(\d+)""",
                       match="first", labels={"1": "A", "2": "B"})


def _alpaca_eval_config(path: Path, name: str | None) -> dict[str, Any] | None:
    """The annotator entry of an alpaca_eval ``configs.yaml`` (its ``prompt_template`` names a
    file, its ``fn_completion_parser`` how replies are read), or None: another YAML file."""
    text = _text(path, "prompt.file")
    try:
        bounds.check_yaml(text)  # aliases and depth, before the decoder expands them
        loaded = bounds.decode_json(msgspec.yaml.decode, text)
    except msgspec.DecodeError:
        return None
    except bounds.BoundError as e:
        raise TemplateError("prompt.file", f"{path.name}: {e}") from None
    if not isinstance(loaded, dict):
        return None
    entries = {k: v for k, v in loaded.items() if isinstance(v, dict) and isinstance(v.get("prompt_template"), str)
               and ("fn_completions" in v or "fn_completion_parser" in v)}
    if not entries:
        return None
    if name is None:
        if len(entries) != 1:
            raise TemplateError("prompt.name", f"{path.name} holds {len(entries)} annotators: name one "
                                               f"({', '.join(list(entries)[:8])})")
        return next(iter(entries.values()))
    if name not in entries:
        raise TemplateError("prompt.name", f"no annotator {name!r} in {path.name}{_did_you_mean(name, list(entries))}")
    return entries[name]


def _from_alpaca_eval(judge: JudgeSpec, path: Path, config: dict[str, Any], spec: PromptSpec,
                      source: str, used: set[str]) -> tuple[PromptSpec, VerdictSpec | None]:
    template = config["prompt_template"]
    # alpaca_eval names the prompt file relative to evaluators_configs/ (the config's parent's parent)
    # — and only there: the file names no path outside that folder (no absolute path, no ..).
    if Path(template).is_absolute() or ".." in Path(template).parts:
        raise TemplateError("prompt.file", f"alpaca_eval config {path.name}: its prompt_template {template!r} "
                                           "leaves its folder (a file under evaluators_configs/ only): refused")
    top = os.path.realpath(path.parent.parent)
    candidates = [path.parent.parent / template, path.parent / template, path.parent / Path(template).name]
    if not 1 <= len(Path(template).parts) <= 2:  # <evaluators_configs>/<annotator>/<file> at most
        raise TemplateError("prompt.file", f"alpaca_eval config {path.name}: its prompt_template {template!r} "
                                           "is not a file of an annotator's folder beside it: refused")
    found = next((p for p in candidates if p.is_file()
                  and os.path.realpath(p).startswith(top + os.sep)), None)
    if found is None:
        raise TemplateError("prompt.file", f"alpaca_eval config {path.name}: its prompt_template {template!r} "
                                           f"is not next to it ({candidates[0]})")
    system, user = read_text(_text(found, "prompt.file"))
    prompt = _finish(spec, system, user, {}, "alpaca_eval", used, source=f"{source}:{Path(template).name}")
    parser = config.get("fn_completion_parser", "regex_parser")
    kwargs = config.get("completion_parser_kwargs") or {}
    if parser == "ranking_parser":
        return prompt, _RANKING
    if parser == "logprob_parser":
        numerator = kwargs.get("numerator_token")
        others = [t for t in kwargs.get("denominator_tokens", []) if t != numerator]
        if not isinstance(numerator, str) or len(others) != 1 or not isinstance(others[0], str):
            raise TemplateError("verdict", f"alpaca_eval's logprob_parser in {path.name}: expected one numerator "
                                           "token and one other denominator token")
        if not judge.soft:
            raise TemplateError("soft", f"judge {judge.name!r}: alpaca_eval's logprob_parser reads the "
                                        f"probabilities of {numerator!r}/{others[0]!r}: set soft: true")
        return prompt, VerdictSpec(labels={numerator: "A", others[0]: "B"})
    if judge.verdict is None:
        raise TemplateError("verdict", f"judge {judge.name!r}: alpaca_eval's {parser} is not read for you: declare "
                                       "verdict: {pattern: …, labels: …} (docs/judges.md, from other tools)")
    return prompt, None
