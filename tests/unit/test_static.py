"""The static checks, run by the test command so that CI runs them: ruff (its rules and the
line length pyproject.toml declares) over the package, tests and benchmarks, and mypy (strict
on errors, core, spec, store and engine). Each skips where
its tool is not installed (the ``dev`` extra installs both). And the size bounds of the
package's code: no module over 600 lines (no ``app`` module over 250), no function over 60."""

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT

MODULE_LINES = 600
APP_MODULE_LINES = 250  # the app layer's modules: each one part of the orchestration
FUNCTION_LINES = 60


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


def oversized(package: Path) -> list[str]:
    """Every module and function of ``package`` past its bound, each named with its length:
    a module by its lines, a function (or method, at any depth) from its ``def`` line to its
    last line, decorators not counted."""
    found = []
    for path in sorted(package.rglob("*.py")):
        name = path.relative_to(package.parent).as_posix()
        source = path.read_text(encoding="utf-8")
        bound = APP_MODULE_LINES if path.relative_to(package).parts[0] == "app" else MODULE_LINES
        if (lines := len(source.splitlines())) > bound:
            found.append(f"{name}: {lines} lines (at most {bound})")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1
                if length > FUNCTION_LINES:
                    found.append(f"{name}:{node.lineno} {node.name}: {length} lines (at most {FUNCTION_LINES})")
    return found


def test_sizes():
    offenders = oversized(ROOT / "babelrun")
    assert not offenders, "over the size bounds:\n" + "\n".join(offenders)


def test_sizes_name_the_offenders(tmp_path):
    """A package with a module, an app module and a method each one line past its bound."""
    package = tmp_path / "pkg"
    (package / "app").mkdir(parents=True)
    (package / "long.py").write_text("x = 1\n" * (MODULE_LINES + 1))
    (package / "short.py").write_text("x = 1\n" * MODULE_LINES)
    (package / "app" / "hub.py").write_text("x = 1\n" * (APP_MODULE_LINES + 1))
    body = "".join(f"        x{i} = {i}\n" for i in range(FUNCTION_LINES - 1))
    (package / "app" / "ok.py").write_text(f"class C:\n    @property\n    async def fits(self):\n{body}"
                                           f"    def over(self):\n{body}        return x0\n")
    assert oversized(package) == [
        f"pkg/app/hub.py: {APP_MODULE_LINES + 1} lines (at most {APP_MODULE_LINES})",
        f"pkg/app/ok.py:{FUNCTION_LINES + 3} over: {FUNCTION_LINES + 1} lines (at most {FUNCTION_LINES})",
        f"pkg/long.py: {MODULE_LINES + 1} lines (at most {MODULE_LINES})",
    ]
