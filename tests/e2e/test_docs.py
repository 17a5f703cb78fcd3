"""The docs site and the code in it: ``mkdocs build --strict`` passes (no broken link, no
missing anchor, the CLI reference generated from the parser), every code block the README
or a docs page marks with ``<!-- run -->`` runs, in a temporary copy of ``examples/`` with no
network, and every YAML and JSON block is checked (the convention: docs/extending.md,
*Documentation code that runs*): a whole manifest (it has ``judges``) is validated as
``babelrun validate`` does; a fragment — its keys a manifest's top-level fields, or a judge's —
is merged into a minimal manifest and validated; a block marked ``<!-- not a manifest: what it
is -->`` (a cue file, a price file) must still parse; one marked ``<!-- alternatives -->`` holds a
fragment per line; JSON blocks must parse."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import msgspec
import pytest
import yaml

from helpers import ROOT, SHARED_DATA

MARK = "<!-- run -->"
NOT_A_MANIFEST = "<!-- not a manifest:"
ALTERNATIVES = "<!-- alternatives -->"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CHECKED = ("yaml", "yml", "json")


def fenced_blocks(path: Path) -> list[tuple[str, str, int, str]]:
    """(language, code, line number, the line before the fence) of every top-level fenced block;
    a block's lines lose the indentation of its fence (a block inside a list item)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out, i = [], 0
    while i < len(lines):
        stripped = lines[i].strip()
        if not stripped.startswith("```"):
            i += 1
            continue
        fence = stripped[:len(stripped) - len(stripped.lstrip("`"))]
        indent = len(lines[i]) - len(lines[i].lstrip())
        lang = stripped[len(fence):].strip().split()[0] if stripped[len(fence):].strip() else ""
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == fence)
        before = lines[i - 1].strip() if i else ""
        body = "\n".join(line[indent:] if line[:indent].strip() == "" else line for line in lines[i + 1:end])
        out.append((lang, body + "\n", i + 2, before))
        i = end + 1
    return out


def checked_blocks() -> list[tuple[str, str, str, str]]:
    """(where, language, code, the line before) of every YAML and JSON block of the pages."""
    return [(f"{page.name}:{line}", lang, code, before) for page in PAGES
            for lang, code, line, before in fenced_blocks(page) if lang in CHECKED]


def marked_blocks(path: Path) -> list[tuple[str, str, int]]:
    """(language, code, line number) of each fenced block right after a ``<!-- run -->`` line."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out = []
    fence = None  # the fence of the block we are in (a mark shown inside an example is no mark)
    for i, line in enumerate(lines):
        stripped = line.strip()
        if fence is not None:
            if stripped == fence:
                fence = None
            continue
        if stripped.startswith("```"):
            fence = stripped[:len(stripped) - len(stripped.lstrip("`"))]
            continue
        if stripped != MARK:
            continue
        fence = lines[i + 1].strip() if i + 1 < len(lines) else ""
        assert fence.startswith("```"), f"{path.name}:{i + 1}: {MARK} must be followed by a fenced block"
        lang = fence[3:].strip().split()[0] if fence[3:].strip() else ""
        end = next(j for j in range(i + 2, len(lines)) if lines[j].strip() == "```")
        out.append((lang, "\n".join(lines[i + 2:end]) + "\n", i + 3))
    return out


def _site_tools() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("mkdocs", "material"))


def _env(bin_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env["NO_MKDOCS_2_WARNING"] = "1"
    return env


@pytest.mark.skipif(not _site_tools(), reason="mkdocs-material not installed (the dev extra)")
def test_the_site_builds_strict_with_every_command_in_the_cli_reference(tmp_path):
    site = tmp_path / "site"
    # Not --quiet: it lowers the log level below the warnings that --strict counts.
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)], cwd=ROOT,
                          env=_env(tmp_path), capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    from babelrun.app import cli

    build = getattr(cli, "build_parser", None) or cli._parser
    sub = next(a for a in build()._actions if a.__class__.__name__ == "_SubParsersAction")
    page = (site / "cli" / "index.html").read_text(encoding="utf-8")
    for name, parser in sub.choices.items():
        assert f'id="{name}"' in page, name
        for action in parser._actions:
            for flag in action.option_strings:
                assert flag in page, (name, flag)


def test_the_marked_blocks_cover_the_quickstart_and_the_notebook():
    """The convention is in use where it matters, so the runner below cannot pass empty."""
    code = {p.name: "".join(c for _, c, _ in marked_blocks(p)) for p in PAGES}
    assert "babelrun validate examples/quickstart.yaml" in code["getting-started.md"]
    assert "babelrun audit examples/quickstart.yaml" in code["getting-started.md"]
    assert ".to_pandas()" in code["python-api.md"] and ".pivot(" in code["python-api.md"]


def test_the_readme_opens_with_the_two_commands_and_ci_runs_the_second():
    readme = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert readme[2] == "```sh" and readme[5] == "```", "the README opens with its two commands"
    quickstart, tests = readme[3], readme[4]
    assert quickstart.startswith("python3 -m venv .venv && .venv/bin/pip install -q -e . && ")
    # The first line's audit is the getting-started block's, which test_marked_blocks_run runs.
    audit = quickstart.rsplit(" && ", 1)[1].removeprefix(".venv/bin/")
    started = "".join(c for _, c, _ in marked_blocks(ROOT / "docs" / "getting-started.md"))
    assert audit in started
    assert tests.startswith("python3 -m venv .venv && .venv/bin/pip install -q -e '.[dev]' && ")
    assert tests.endswith(".venv/bin/python -m pytest")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert tests in ci, ".ci/run runs the README's test command verbatim"
    assert any("mkdocs build --strict" in line and "--quiet" not in line.split("#")[0] for line in ci)
    assert len(readme) <= 200


@pytest.mark.slow
@pytest.mark.parametrize("page", [p for p in PAGES if marked_blocks(p)], ids=lambda p: p.name)
def test_marked_blocks_run(page, tmp_path, monkeypatch):
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "babelrun"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m babelrun "$@"\n')
    shim.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__docs__"}
    for lang, code, line in marked_blocks(page):
        where = f"{page.name}:{line}"
        if lang in ("sh", "bash", "console"):
            done = subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=tmp_path, env=_env(bin_dir),
                                  capture_output=True, text=True, timeout=240)
            assert done.returncode == 0, f"{where}\n{code}\n{done.stdout}\n{done.stderr}"
        elif lang == "python":
            exec(compile(code, where, "exec"), namespace)  # noqa: S102 - the docs' own code
        else:
            pytest.fail(f"{where}: a marked block must be sh or python, not {lang!r}")


MINIMAL_JUDGE = {"name": "docs-judge", "backend": "simulated"}
JUDGE = {"backend": "openai", "model": "m", "api_key_env": "DOCS_KEY"}  # what a partial judge entry lacks
COMPOSITE_JUDGES = ("of", "cheap", "strong", "base")  # the fields by which a composite names its judges


def _strings(value: object, key: str = "") -> list[tuple[str, str]]:
    """Every (key, string) of a parsed snippet, nested ones too."""
    if isinstance(value, dict):
        return [pair for k, v in value.items() for pair in _strings(v, str(k))]
    if isinstance(value, list):
        return [pair for v in value for pair in _strings(v, key)]
    return [(key, value)] if isinstance(value, str) else []


def _merged(doc: dict) -> tuple[str, dict]:
    """A whole manifest (``name`` and ``judges``) as it is; a fragment in a minimal manifest:
    a manifest's top-level fields beside the minimal ones they leave unset (a partial judge
    entry completed, the judges a composite names added), a judge's fields in its judge."""
    from babelrun.spec import Manifest
    from babelrun.spec.flat import COMMON_FIELDS

    keys = {str(k).lower() if isinstance(k, bool) else str(k) for k in doc}  # a key YAML read as a boolean
    if {"name", "judges"} <= keys:
        return "whole", doc
    if keys <= COMMON_FIELDS:  # a judge's common fields, flat as a manifest writes them
        return "judge", {"name": "docs", "judges": [{"name": "docs-judge", **JUDGE, **doc}]}
    if not keys <= {f.encode_name for f in msgspec.structs.fields(Manifest)} | {"true", "false"}:
        raise AssertionError(f"keys {sorted(keys)} are neither a manifest's nor a judge's: "
                             f"mark the block {NOT_A_MANIFEST} … -->")
    judges = [({**JUDGE, **j} if j.get("backend", "openai") == "openai" else j) for j in doc.get("judges", [])]
    named = {j.get("name") for j in judges}
    for composite in doc.get("composites", []):
        for field in COMPOSITE_JUDGES:
            wanted = composite.get(field)
            for name in wanted if isinstance(wanted, list) else [wanted]:
                if name is not None and name not in named:
                    judges.append({"name": name, "backend": "simulated"})
                    named.add(name)
    return "top", {"name": "docs", **doc, "judges": judges or [MINIMAL_JUDGE]}


def _validate(text: str, folder: Path, where: str) -> None:
    """``text`` (one YAML document) validated as ``babelrun validate`` reads a manifest, with the
    environment variables it names set. The one error let pass: a file the snippet names that
    is the reader's own (absent here), named in the error."""
    from babelrun import manifest
    from babelrun.errors import ManifestError

    doc = yaml.safe_load(text)
    assert isinstance(doc, dict), f"{where}: a YAML block is a mapping, or is marked {NOT_A_MANIFEST} … -->"
    twice = manifest._duplicate_key(text.encode())  # the manifest's own rule, on the fragment's text
    assert twice is None, f"{where}: {'.'.join(filter(None, twice))} given twice (mark alternatives {ALTERNATIVES})"
    case, merged = _merged(doc)
    # The snippet's own lines wherever they can stay as written, so what YAML makes of them (a
    # bare ``on`` read as true) is what is validated; a fragment with partial judge entries is
    # rewritten (a key YAML read as a boolean would then be written as one, and fail).
    if case == "whole":
        full = text
    elif case == "judge":
        judge = "".join(f"    {k}: {json.dumps(v)}\n" for k, v in JUDGE.items() if k not in doc)
        full = f"name: docs\njudges:\n  - name: docs-judge\n{judge}" + textwrap.indent(text, "    ")
    elif "judges" not in doc:
        full = text + yaml.safe_dump({k: v for k, v in merged.items() if k not in doc}, allow_unicode=True)
    else:
        full = yaml.safe_dump(merged, allow_unicode=True)
    path = folder / "manifest.yaml"
    path.write_text(full, encoding="utf-8")
    strings = _strings(doc)
    environ = {v: "docs-placeholder" for k, v in strings if k.endswith("_env")} | {"DOCS_KEY": "docs-placeholder"}
    for entry in [j for j in merged.get("judges", []) if isinstance(j.get("headers_env"), dict)]:
        environ |= dict.fromkeys(entry["headers_env"].values(), "docs-placeholder")
    try:
        manifest.load(path, environ=environ)
    except ManifestError as e:
        absent = [v for _, v in strings if ("/" in v or "." in v) and not (folder / v).exists()
                  and (v in str(e) or os.path.normpath(folder / v) in str(e))]
        if not absent:
            pytest.fail(f"{where}: {e}\n{path.read_text(encoding='utf-8')}")


@pytest.fixture(scope="module")
def docs_folder(tmp_path_factory):
    """A folder laid out like the repository's: ``examples/`` beside the manifest, and
    ``../shared/data`` reachable from it."""
    root = tmp_path_factory.mktemp("docs")
    repo = root / "repo"
    shutil.copytree(ROOT / "examples", repo / "examples")
    if SHARED_DATA.exists():
        (root / "shared").mkdir()
        (root / "shared" / "data").symlink_to(SHARED_DATA)
    return repo


@pytest.mark.parametrize("where,lang,code,before", checked_blocks(), ids=[b[0] for b in checked_blocks()])
def test_every_yaml_and_json_block_is_checked(where, lang, code, before, docs_folder, monkeypatch):
    monkeypatch.chdir(docs_folder)
    if lang == "json":
        json.loads(code)
        return
    yaml.safe_load(code)  # every YAML block parses, marked or not
    if before.startswith(NOT_A_MANIFEST):
        return
    texts = [line for line in code.splitlines() if line.strip() and not line.lstrip().startswith("#")] \
        if before == ALTERNATIVES else [code]
    for text in texts:
        _validate(text + "\n", docs_folder, where)
