"""The layer rule of ``babelrun/__init__.py``, enforced: every import inside babelrun goes to
the same layer or one below (imports inside functions count; ``if TYPE_CHECKING:`` blocks,
which never run, do not), and the import graph has no cycles.

The graph is read from the source (AST), so a test also shows the rule failing on a
deliberate violation.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import babelrun

PACKAGE = Path(babelrun.__file__).parent

# Lowest first. A module belongs to the first entry that is a prefix of its dotted name
# (after "babelrun."); the longest prefix wins.
LAYERS = [
    ["errors"],
    ["core"],
    ["spec"],
    ["store"],
    ["perturb"],
    ["agentic"],
    ["corpus"],
    ["judges"],
    ["manifest"],
    ["plan"],
    ["engine"],
    ["score"],
    ["analyses"],
    ["report"],
    ["app", "testing", "__main__"],
]
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer(module: str) -> int | None:
    """The layer of a babelrun module; None for the package itself (``import babelrun`` is
    lazy and loads nothing: any module may use ``babelrun.__version__``)."""
    parts = module.split(".")[1:]
    if not parts:
        return None
    return RANK[parts[0]]


def _type_checking(node: ast.If) -> bool:
    return isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def imports(source: str, module: str, is_package: bool, modules: set[str]) -> set[str]:
    """The babelrun modules ``module`` imports, at any depth of its code."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:  # ``from . import x``: the module x, where x is one
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in modules else target)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(source))
    return {m for m in found if m.split(".")[0] == "babelrun" and m != module}


def graph(root: Path) -> dict[str, set[str]]:
    files = {module_name(p, root): p for p in root.rglob("*.py")}
    modules = set(files)
    return {m: imports(p.read_text(), m, p.name == "__init__.py", modules) & modules for m, p in files.items()}


def violations(edges: dict[str, set[str]]) -> list[str]:
    out = []
    for module, targets in sorted(edges.items()):
        for target in sorted(targets):
            low, high = layer(module), layer(target)
            if low is not None and high is not None and high > low:
                out.append(f"{module} (layer {LAYERS[low][0]}) imports {target} (layer {LAYERS[high][0]})")
    return out


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            strong(v)
    return found


def test_every_module_has_a_layer():
    for module in graph(PACKAGE):
        assert module == "babelrun" or layer(module) is not None, module


def test_imports_go_down():
    assert violations(graph(PACKAGE)) == []


def test_no_import_cycles():
    edges = graph(PACKAGE)
    edges.pop("babelrun", None)  # its imports are lazy strings (PEP 562), not edges
    assert cycles(edges) == []


def test_rule_fails_on_a_violation(tmp_path):
    """A copy of the package where the store imports the engine: the test catches it."""
    root = tmp_path / "babelrun"
    for path in PACKAGE.rglob("*.py"):
        dest = root / path.relative_to(PACKAGE)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(path.read_text())
    files = root / "store" / "files.py"
    files.write_text(files.read_text() + "\n\ndef _late():\n    from ..engine import limits  # noqa\n")
    assert violations(graph(root)) == ["babelrun.store.files (layer store) imports babelrun.engine.limits "
                                       "(layer engine)"]


def test_rule_written_in_the_package_docstring():
    doc = babelrun.__doc__
    for names in LAYERS:
        assert f"\n    {names[0]} " in doc or f"\n    {names[0]}\n" in doc, names[0]


@pytest.mark.parametrize("module", ["babelrun.judges.prompt", "babelrun.core.items", "babelrun.spec"])
def test_leaves_import_no_heavy_dependency(module):
    """A leaf module loads none of the engine's, the log's or the scorer's libraries."""
    code = (f"import sys, {module}; heavy = [m for m in ('aiohttp', 'pyarrow', 'numpy', 'tenacity') "
            "if m in sys.modules]; print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
