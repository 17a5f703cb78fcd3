"""A judge in the manifest's flat shape: its common fields (``JudgeSpec``) and its backend's
own options side by side, split to decode and joined to write (run.yaml, lock files)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from . import JudgeSpec, Manifest
from .options import OptionsResolver, UnresolvedOptions, typed_options

COMMON_FIELDS = frozenset(JudgeSpec.__struct_fields__) - {"options"}


def split_judge(raw: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A judge's flat mapping as (the common fields, the backend's own)."""
    common = {k: v for k, v in raw.items() if k in COMMON_FIELDS}
    return common, {k: v for k, v in raw.items() if k not in COMMON_FIELDS}


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
    out: dict[str, Any] = msgspec.to_builtins(judge)
    options = out.pop("options", {}) or {}
    if isinstance(judge.options, UnresolvedOptions):
        options = msgspec.to_builtins(judge.options.values)
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
