"""A judge in the manifest's flat shape: its common fields (``JudgeSpec``) and its backend's
own options side by side, split to decode and joined to write (run.yaml, lock files)."""

from __future__ import annotations

import re
import typing
from collections.abc import Mapping
from typing import Any

import msgspec

from . import FlatSection, JudgeSpec, Manifest
from .options import OptionsResolver, UnresolvedOptions, typed_options


def _sections() -> dict[str, type[FlatSection]]:
    hints = typing.get_type_hints(JudgeSpec)
    return {name: hints[name] for name in JudgeSpec.__struct_fields__
            if isinstance(hints[name], type) and issubclass(hints[name], FlatSection)}


# JudgeSpec's fields that are sections written flat (``limits``), and the section of each of their fields.
SECTIONS = _sections()
SECTION_OF = {field: name for name, kind in SECTIONS.items() for field in kind.__struct_fields__}
# The common fields as a manifest writes them, in JudgeSpec's order (a section's fields in its place).
COMMON_ORDER = tuple(field for name in JudgeSpec.__struct_fields__ if name != "options"
                     for field in (SECTIONS[name].__struct_fields__ if name in SECTIONS else (name,)))
COMMON_FIELDS = frozenset(COMMON_ORDER)
_IN_SECTION = re.compile(rf"^(judges\[\d+\])\.(?:{'|'.join(map(re.escape, SECTIONS))})(?=\.|$)")


def split_judge(raw: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A judge's flat mapping as (the common fields, a section's nested under its name; the
    backend's own). A section's own name is no manifest field: it goes with the backend's."""
    common: dict[str, Any] = {}
    own: dict[str, Any] = {}
    for key, value in raw.items():
        if key in SECTION_OF:
            common.setdefault(SECTION_OF[key], {})[key] = value
        elif key in COMMON_FIELDS:
            common[key] = value
        else:
            own[key] = value
    return common, own


def flat_path(path: str) -> str:
    """A field path of the decoded structs as the manifest writes it (``judges[1].limits.timeout_s``:
    ``judges[1].timeout_s``)."""
    return _IN_SECTION.sub(r"\1", path)


def decode_judges(raw: Any) -> tuple[Any, list[dict[str, Any]]]:
    """``raw`` (a decoded manifest mapping) with each judge's own options taken out, and those
    options, judge by judge; the common fields decode with ``Manifest``, the rest with
    ``typed_options``."""
    if not isinstance(raw, dict) or not isinstance(raw.get("judges"), list):
        return raw, []
    judges, extras = [], []
    for judge in raw["judges"]:
        if isinstance(judge, dict):
            common, own = split_judge(judge)
            judges.append(common)
            extras.append(own)
        else:
            judges.append(judge)
            extras.append({})
    return {**raw, "judges": judges}, extras


def with_options(extras: list[dict[str, Any]], manifest: Manifest, resolve: OptionsResolver | None = None, *,
                 legacy: bool = False) -> Manifest:
    """``manifest`` with each judge's own options decoded (``decode_judges``' second half)."""
    judges = [msgspec.structs.replace(j, options=typed_options(j.backend, own, resolve, legacy=legacy))
              for j, own in zip(manifest.judges, extras, strict=False)]
    return msgspec.structs.replace(manifest, judges=judges)


def flat_judge(judge: JudgeSpec) -> dict[str, Any]:
    """A judge as the manifest writes it: common fields and the backend's options side by side."""
    out: dict[str, Any] = {}
    for name, value in msgspec.to_builtins(judge).items():
        if name != "options":
            out.update(value if name in SECTIONS else {name: value})
    options = msgspec.to_builtins(judge.options.values if isinstance(judge.options, UnresolvedOptions)
                                  else judge.options)
    return {**out, **options}


def flat_manifest(manifest: Manifest) -> dict[str, Any]:
    """The manifest as builtins in its flat YAML shape (run.yaml)."""
    out: dict[str, Any] = msgspec.to_builtins(manifest)
    out["judges"] = [flat_judge(j) for j in manifest.judges]
    return out


def decode_manifest(data: bytes | Any, resolve: OptionsResolver | None = None, *, legacy: bool = False) -> Manifest:
    """A manifest from YAML bytes (or already-decoded builtins), judges' options included
    (``legacy``: a run.yaml, see ``typed_options``)."""
    raw = msgspec.yaml.decode(data) if isinstance(data, bytes) else data
    common, extras = decode_judges(raw)
    manifest = msgspec.convert(common, Manifest)
    return with_options(extras, manifest, resolve, legacy=legacy)
