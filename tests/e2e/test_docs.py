"""The docs site and the code in it: ``mkdocs build --strict`` passes (no broken link, no
missing anchor, the CLI reference generated from the parser), and every code block the README
or a docs page marks with ``<!-- run -->`` runs, in a temporary copy of ``examples/`` with no
network (the convention: docs/extending.md, *Documentation code that runs*)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT

MARK = "<!-- run -->"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


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
