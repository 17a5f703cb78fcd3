"""Decoding a manifest: YAML to the types of ``babelrun.spec``, each judge's own options by its
backend's struct, and msgspec's errors said in the manifest's terms (the field path, the
did-you-mean of the fields valid there)."""

from __future__ import annotations

import difflib
import re
import types

import msgspec

from .. import judges
from ..errors import ManifestError
from ..spec import JudgeSpec, Manifest
from ..spec.flat import COMMON_FIELDS, SECTION_OF, SECTIONS, decode_judges, flat_path
from ..spec.options import OptionsError, typed_options

_AT = re.compile(r"^(?P<msg>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.S)
_UNKNOWN = re.compile(r"Object contains unknown field `(?P<field>[^`]+)`")
_MISSING = re.compile(r"Object missing required field `(?P<field>[^`]+)`")


_NUMBER_AS_TEXT = re.compile(r"Expected `(?:int|float)[^`]*`, got `str`")


def fields_at(path: str, root: type[msgspec.Struct] = Manifest) -> list[str]:
    """The field names valid at ``path`` of the manifest (``judges[0].simulated``: the
    simulated knobs; a union, such as a corpus source: every member's), the vocabulary of
    did-you-mean there; empty where the path leaves the manifest's structs."""
    import typing

    def members(tp: object) -> list[object]:
        if typing.get_origin(tp) in (typing.Union, types.UnionType):
            return [m for arg in typing.get_args(tp) for m in members(arg)]
        if typing.get_origin(tp) is typing.Annotated:
            return members(typing.get_args(tp)[0])
        return [] if tp is type(None) else [tp]

    current: list[object] = [root]
    for part in re.findall(r"\[[^\]]*\]|[^.\[\]]+", path):
        step: list[object] = []
        for tp in current:
            if part.startswith("["):  # an element of a list, tuple or dict value
                origin, args = typing.get_origin(tp), typing.get_args(tp)
                if origin in (list, tuple, set, frozenset) and args:
                    step.extend(members(args[0]))
                elif origin is dict and len(args) == 2:
                    step.extend(members(args[1]))
            elif isinstance(tp, type) and issubclass(tp, msgspec.Struct) and part in tp.__struct_fields__:
                step.extend(members(typing.get_type_hints(tp)[part]))
            elif tp is JudgeSpec and part in SECTION_OF:  # a field of a section written flat (timeout_s)
                step.extend(members(typing.get_type_hints(SECTIONS[SECTION_OF[part]])[part]))
            elif tp is JudgeSpec:  # a backend's own option: every backend's struct that has it
                kinds = {judges.options_type(name) for name in judges.BACKENDS}
                step.extend(m for kind in kinds if part in kind.__struct_fields__
                            for m in members(typing.get_type_hints(kind)[part]))
        current = step
    return sorted({f for tp in current if isinstance(tp, type) and issubclass(tp, msgspec.Struct)
                   for f in (COMMON_FIELDS if tp is JudgeSpec else tp.__struct_fields__)})  # a judge's: flat


def _field_path(error: msgspec.ValidationError) -> tuple[str, str]:
    """Split msgspec's message into (field path, problem) in the manifest's own terms (a
    judge's section written flat: ``judges[1].timeout_s``, not ``judges[1].limits.timeout_s``)."""
    m = _AT.match(str(error))
    msg, path = m.group("msg"), flat_path((m.group("path") or "").lstrip("."))
    found = _UNKNOWN.match(msg)
    if found:
        field = found.group("field")
        return (f"{path}.{field}" if path else field), "unknown field" + _did_you_mean(field, fields_at(path))
    found = _MISSING.match(msg)
    if found:
        field = found.group("field")
        return (f"{path}.{field}" if path else field), "required field is missing"
    if path == "corpus.languages" and msg.startswith("Invalid enum value"):
        return path, "a list of language codes (languages: [en, hi]) or all"
    if _NUMBER_AS_TEXT.match(msg):  # YAML reads 2e5 (no dot) as text
        msg += "; YAML reads forms like 2e5 as text: write 200000 or 2.0e+5"
    return path, msg[0].lower() + msg[1:] if msg else msg


def decode(raw: object) -> Manifest:
    """A manifest from its decoded YAML: the common fields of each judge by ``JudgeSpec``, the
    rest by its backend's options struct. A field no struct of the judge has is refused, naming
    it (``judges[1].batch_size``), with the did-you-mean drawn from that backend's fields, or
    the backends whose field it is."""
    common, extras = decode_judges(raw)
    manifest = msgspec.convert(common, Manifest)
    typed = []
    for i, (judge, own) in enumerate(zip(manifest.judges, extras, strict=True)):
        where = f"judges[{i}]"
        if not judges.known(judge.backend):
            raise ManifestError(f"{where}.backend", f"unknown backend {judge.backend!r}"
                                                    f"{_did_you_mean(judge.backend, judges.BACKENDS)} "
                                                    f"(known: {', '.join(judges.names())})")
        try:
            typed.append(msgspec.structs.replace(judge, options=typed_options(judge.backend, own,
                                                                                judges.options_type)))
        except OptionsError as e:
            raise _option_error(judge, where, e) from None
    return msgspec.structs.replace(manifest, judges=typed)


def _option_error(judge: JudgeSpec, where: str, e: OptionsError) -> ManifestError:
    """A judge option its backend refuses, in the manifest's terms: a field of another
    backend's says whose it is; an unknown one gets the did-you-mean of this backend's fields."""
    m = _AT.match(e.message)
    msg, path = (m.group("msg"), (m.group("path") or "").lstrip(".")) if m else (e.message, "")
    found = _UNKNOWN.match(msg)
    if found is None:
        return ManifestError(f"{where}.{path}", msg[:1].lower() + msg[1:])
    field = found.group("field")
    if path:  # inside one of the backend's own sections (``simulated: {acuracy: …}``)
        return ManifestError(f"{where}.{path}.{field}", "unknown field" + _did_you_mean(field, fields_at(path, e.kind)))
    owners = judges.owners(field)
    if owners:
        return ManifestError(f"{where}.{field}", f"does not apply to the {judge.backend} backend "
                                                 f"(it is an option of: {', '.join(owners)})")
    suggestion = _did_you_mean(field, judges.option_fields(judge.backend))
    return ManifestError(f"{where}.{field}", "unknown field" + suggestion)


def _duplicate_key(raw: bytes) -> tuple[str, str] | None:
    """The first mapping key given twice, as (field path, key): YAML loaders keep the last
    silently, so a manifest could say two things and mean one."""
    import yaml

    try:
        root = yaml.compose(raw, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        return None  # the decoder reports it
    stack = [(root, "")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, yaml.MappingNode):
            seen: set[str] = set()
            for key, value in node.value:
                name = str(key.value)
                if name in seen:
                    return path, name
                seen.add(name)
                stack.append((value, f"{path}.{name}" if path else name))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, f"{path}[{i}]") for i, item in enumerate(node.value))
    return None



def _did_you_mean(word: str, known) -> str:
    close = difflib.get_close_matches(word, list(known), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""
