"""The static checks, run by the test command so that CI runs them: ruff (its rules and the
line length pyproject.toml declares) over the package, tests and benchmarks, and mypy (strict
on errors, core, spec, store and engine). Each skips where
its tool is not installed (the ``dev`` extra installs both)."""

import shutil
import subprocess
import sys

import pytest

from helpers import ROOT


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(ROOT / ".venv" / "bin")) or shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (pip install -e '.[dev]')")
    return found


def test_ruff():
    out = subprocess.run([_tool("ruff"), "check", "babelrun", "tests", "bench"], cwd=ROOT, capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stdout[-4000:]


@pytest.mark.slow
def test_mypy():
    _tool("mypy")
    out = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-4000:]
