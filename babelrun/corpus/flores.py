"""FLORES-200: ``{dev,devtest}/<lang_Script>.{dev,devtest}``, one sentence a line, the same
line in every file meaning the same thing.

Each target language gets translation tasks from the pivot language: ``lines_per_reference``
consecutive lines (sentences of one source document, in order) make one reference, and the
prompt asks, naming both languages by their English names, for that passage translated from
the pivot. Files are named by FLORES codes (``hin_Deva``); the language tag is their BCP-47
form (``hi``; ``ace-Arab`` where the script is not the language's usual one).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ..core import languages
from ..errors import ManifestError

_UNSPACED = {"Hans", "Hant", "Hani", "Jpan", "Thai", "Laoo", "Khmr", "Mymr", "Tibt"}


def _folder(spec) -> Path:
    return Path(spec.path) / spec.split


def _files(spec) -> dict[str, Path]:
    suffix = f".{spec.split}"
    return {f.name.removesuffix(suffix): f for f in sorted(_folder(spec).glob(f"*{suffix}"))}


def tag(code: str) -> str:
    return languages.normalize(code.replace("_", "-"))


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


SOURCE = ("FLORES-200 is github.com/facebookresearch/flores (flores200_dataset.tar.gz, CC BY-SA 4.0), "
          "or openlanguagedata/flores_plus on the Hugging Face hub")


def check(spec, where: str) -> None:
    if not _folder(spec).is_dir():
        raise ManifestError(f"{where}.path", f"no {spec.split}/ folder in {spec.path} ({SOURCE})")
    files = _files(spec)
    if spec.pivot not in files:
        raise ManifestError(f"{where}.pivot", f"no {spec.pivot}.{spec.split} in {_folder(spec)}")
    n = len(_lines(files[spec.pivot]))
    for code, path in files.items():
        try:
            tag(code)
        except ValueError as e:
            raise ManifestError(f"{where}.path", f"{path.name}: {e}") from None
        if len(_lines(path)) != n:
            raise ManifestError(f"{where}.path", f"{path.name} has {len(_lines(path))} lines, the "
                                f"pivot {n}: the files are not aligned")


def read(spec) -> Iterator:
    from ..core.items import Reference

    files = _files(spec)
    pivot = _lines(files[spec.pivot])
    pivot_name = languages.name(tag(spec.pivot))
    k = spec.lines_per_reference
    for code, path in files.items():
        if code == spec.pivot:
            continue
        lang = tag(code)
        joiner = "" if languages.script(lang) in _UNSPACED else " "
        target = _lines(path)
        for start in range(0, len(target) - k + 1, k):
            source = " ".join(pivot[start:start + k])
            yield Reference(
                lang=lang, ref_id=f"flores-{spec.split}-{start:04d}",
                prompt=f"Translate the following text from {pivot_name} into "
                       f"{languages.name(lang)}:\n\n{source}",
                response=joiner.join(target[start:start + k]),
            )
