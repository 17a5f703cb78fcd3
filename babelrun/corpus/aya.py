"""The Aya dataset: ``inputs`` (the prompt), ``targets`` (the reference), ``language``,
``language_code`` (ISO 639-3), ``annotation_type``, ``user_id``.

From local JSONL or Parquet files (a file, or a folder of them), or from the hub through the
``datasets`` package when the user is online. Offline (``HF_HUB_OFFLINE=1`` or
``HF_DATASETS_OFFLINE=1``) only a cached copy can load, and a missing one is a clear error at
validation, never a hang. A row's id is a hash of its text, so ids survive re-ordered or
re-split files.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

from ..core import languages
from ..errors import ManifestError
from .table import rows

COLUMNS = ("inputs", "targets", "language", "language_code")
_OFFLINE = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")


def _files(path: Path) -> list[tuple[Path, str]]:
    candidates = sorted(path.iterdir()) if path.is_dir() else [path]
    out = []
    for f in candidates:
        if f.suffix in (".jsonl", ".parquet"):
            out.append((f, f.suffix.lstrip(".")))
    return out


def _offline() -> bool:
    return any(os.environ.get(flag, "").strip().lower() in ("1", "true", "yes") for flag in _OFFLINE)


def _hub_rows(spec) -> Iterator[tuple[int, dict]]:
    try:
        import datasets
    except ImportError:
        raise ManifestError("", f"loading {spec.hub!r} needs the `datasets` package "
                                "(pip install datasets), or download the files and use `path:`") from None
    try:
        data = datasets.load_dataset(spec.hub, split=spec.split)
    except Exception as e:  # datasets raises many kinds; each is the same user problem here
        where = "offline and not in the local cache" if _offline() else "could not be loaded"
        raise ManifestError("", f"{spec.hub!r} {where} ({type(e).__name__}: {str(e)[:200]})") from None
    yield from enumerate(data, 1)


def _rows(spec) -> Iterator[tuple[str, int, dict]]:
    if spec.hub is not None:
        for number, row in _hub_rows(spec):
            yield spec.hub, number, row
        return
    for f, kind in _files(Path(spec.path)):
        for number, row in rows(f, kind):
            yield str(f), number, row


def _language(row: dict) -> str:
    code = row.get("language_code") or ""
    try:
        return languages.normalize(code)
    except ValueError:
        import langcodes

        return languages.normalize(langcodes.find(row.get("language") or "").to_tag())


SOURCE = ("the Aya dataset is CohereForAI/aya_dataset on the Hugging Face hub "
          "(download its .parquet files, or set `hub:`)")


def check(spec, where: str) -> None:
    if (spec.path is None) == (spec.hub is None):
        raise ManifestError(where, "give exactly one of `path` (local files) or `hub` (a dataset id)")
    if spec.path is not None:
        path = Path(spec.path)
        if not path.exists():
            raise ManifestError(f"{where}.path", f"not found: {path} ({SOURCE})")
        if not _files(path):
            raise ManifestError(f"{where}.path", f"no .jsonl or .parquet files in {path}")
    try:
        for source, number, row in _rows(spec):
            missing = [c for c in COLUMNS if c not in row]
            if missing:
                raise ManifestError(f"{where}.path", f"{source}:{number}: not Aya rows (missing {', '.join(missing)})")
            try:
                _language(row)
            except (ValueError, LookupError):
                raise ManifestError(f"{where}.path", f"{source}:{number}: unknown language "
                                    f"{row.get('language_code')!r} / {row.get('language')!r}") from None
    except ManifestError as e:
        if not e.path:
            raise ManifestError(f"{where}.hub", e.problem) from None
        raise


def read(spec) -> Iterator:
    from ..core.items import Reference

    for _, _, row in _rows(spec):
        prompt, target = row["inputs"], row["targets"]
        ref_id = hashlib.blake2b(f"{prompt}\x1f{target}".encode(), digest_size=8).hexdigest()
        yield Reference(lang=_language(row), ref_id=f"aya-{ref_id}", prompt=prompt, response=target)
