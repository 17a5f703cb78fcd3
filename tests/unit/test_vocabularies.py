"""One vocabulary per fact. ``errors.ErrorKind`` is the one vocabulary of error kinds: every
kind the package raises, maps a status to, or records is a member (read from the source, so a
new literal fails here). The default perturbations are the registry's; the pointwise pad gain
reads what the perturbations declare."""

from __future__ import annotations

import ast
from pathlib import Path

import babelrun
from babelrun.errors import ErrorKind

PACKAGE = Path(babelrun.__file__).parent
RAISERS = {"RetryableError", "RejectedError", "FatalJudgeError", "JudgeError"}
TABLES = {"FATAL", "RETRYABLE", "fatal", "retryable"}  # status -> kind tables (judges/http.py and overrides)


def _name(node: ast.expr) -> str | None:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None


def _literals(expr: ast.expr) -> list[str]:
    """The strings an expression can evaluate to: a literal, either branch of ``a if c else
    b``, a call's arguments (``table.get(status, "server_error")``); not what it compares."""
    if isinstance(expr, ast.Constant):
        return [expr.value] if isinstance(expr.value, str) and expr.value else []
    if isinstance(expr, ast.IfExp):
        return _literals(expr.body) + _literals(expr.orelse)
    if isinstance(expr, ast.Call):
        return [k for arg in expr.args for k in _literals(arg)]
    return []


def kinds_in_source() -> dict[str, str]:
    """kind -> where it is written."""
    found: dict[str, str] = {}
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            where = f"{path.relative_to(PACKAGE)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Call):
                # the kind argument, and the literals inside it (``table.get(status, "server_error")``,
                # ``"spend_limit" if spent else None``)
                kinds = [node.args[0]] if _name(node.func) in RAISERS and node.args else []
                kinds += [kw.value for kw in node.keywords if kw.arg in ("error_kind", "fatal")]
                for expr in kinds:
                    for kind in _literals(expr):
                        found.setdefault(kind, where)
            targets = (node.targets if isinstance(node, ast.Assign)
                       else [node.target] if isinstance(node, ast.AnnAssign) else [])
            if any(_name(t) in TABLES for t in targets) and isinstance(node.value, ast.Dict):
                for value in node.value.values:
                    if isinstance(value, ast.Constant) and isinstance(value.value, str):
                        found.setdefault(value.value, where)
    return found


def test_every_kind_in_the_source_is_an_error_kind():
    found = kinds_in_source()
    assert len(found) >= 15  # the scan sees the raisers (a broken scan would pass vacuously)
    unknown = {kind: where for kind, where in found.items() if kind not in set(ErrorKind)}
    assert unknown == {}


def test_every_error_kind_is_used():
    """No member is dead: each is raised, mapped or recorded somewhere."""
    assert set(ErrorKind) - set(kinds_in_source()) == set()


def test_unset_perturbations_are_every_registered_one(monkeypatch):
    """No copied default list: a manifest that names no perturbations gets the registries'
    entries, in their order, a new entry included (the manifest layer fills them in)."""
    from babelrun import manifest, perturb
    from babelrun.agentic import AGENTIC_PERTURBATIONS
    from babelrun.spec import AgenticSpec, Manifest

    monkeypatch.setitem(perturb.TEXT_PERTURBATIONS, "extra", perturb.TEXT_PERTURBATIONS["truncate"])
    filled = manifest.with_defaults(Manifest(name="m", judges=[], agentic=AgenticSpec()))
    assert [p.name for p in filled.perturbations] == list(perturb.TEXT_PERTURBATIONS)
    assert filled.perturbations[-1].name == "extra"
    assert [p.name for p in filled.agentic.perturbations] == list(AGENTIC_PERTURBATIONS)
    assert all(p.severities == [0.3, 0.6] for p in filled.perturbations)
    given = Manifest(name="m", judges=[], perturbations=[manifest.PerturbationSpec(name="shuffle")])
    assert manifest.with_defaults(given).perturbations == given.perturbations
    assert [p.name for p in manifest.agentic_perturbations(None)] == list(AGENTIC_PERTURBATIONS)


def test_the_pointwise_pad_gain_reads_the_perturbations_that_lengthen():
    from babelrun.perturb import TEXT_PERTURBATIONS, lengthening
    from babelrun.score.pointwise import PAD

    assert lengthening() == ("repeat_pad",) and TEXT_PERTURBATIONS["repeat_pad"].lengthens
    assert PAD == ("repeat_pad", "cs:repeat_pad")
