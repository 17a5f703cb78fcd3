"""Prompts kept as string constants in a Python file, read by parsing it (``ast``), never
importing it: a prompt file is data (DESIGN.md, Trust), and importing would run its code.

``constant(text, name)`` is the module-level value assigned to ``name``: a string literal
(adjacent literals and ``+`` of literals joined, as Python joins them), another constant of
the same module by name, or a dict literal of those with string keys (a prompt entry such as
RewardBench's ``MTBENCH_V2 = {"system_prompt": prompt_v2, "prompt_template": "…"}``). Anything
computed — an f-string, a call, ``.format``, an attribute — is refused in one line naming the
variables it would need.
"""

from __future__ import annotations

import ast

MAX_DEPTH = 16  # constants naming constants


class PythonSourceError(ValueError):
    """A constant that cannot be read without running the file: one line saying why."""


def names(text: str) -> dict[str, ast.expr]:
    """The module-level assignments ``NAME = value`` (the last one wins, as when run)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        raise PythonSourceError(f"not Python that parses: {str(e)[:120]}") from None
    found: dict[str, ast.expr] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = stmt.value
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            found[stmt.target.id] = stmt.value
    return found


def text_constants(text: str) -> list[str]:
    """The names of the module's constants that are text (for an error that lists them)."""
    assigned = names(text)
    out = []
    for name, node in assigned.items():
        try:
            if isinstance(_value(node, assigned, 0), str):
                out.append(name)
        except PythonSourceError:
            continue
    return out


def constant(text: str, name: str) -> str | dict[str, object]:
    """The value of the module-level constant ``name`` (module docstring)."""
    assigned = names(text)
    if name not in assigned:
        raise PythonSourceError(f"no module-level constant {name!r}")
    return _value(assigned[name], assigned, 0, name)


def _value(node: ast.expr, assigned: dict[str, ast.expr], depth: int, name: str = "") -> str | dict[str, object]:
    if depth > MAX_DEPTH:
        raise PythonSourceError(f"{name or 'a constant'} names constants more than {MAX_DEPTH} deep")
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name) and node.id in assigned and node.id != name:
        return _value(assigned[node.id], assigned, depth + 1, node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _value(node.left, assigned, depth + 1, name), _value(node.right, assigned, depth + 1, name)
        if isinstance(left, str) and isinstance(right, str):
            return left + right
    if isinstance(node, ast.Dict) and all(isinstance(k, ast.Constant) and isinstance(k.value, str)
                                          for k in node.keys):
        out: dict[str, object] = {}
        for key, item in zip(node.keys, node.values, strict=True):
            assert isinstance(key, ast.Constant) and isinstance(key.value, str)
            try:
                out[key.value] = _value(item, assigned, depth + 1, name)
            except PythonSourceError:
                if isinstance(item, ast.Constant):  # a number, a flag: not text, kept out
                    continue
                raise
        return out
    raise PythonSourceError(_computed(node, assigned, name))


def _computed(node: ast.expr, assigned: dict[str, ast.expr], name: str) -> str:
    what = {ast.JoinedStr: "an f-string", ast.Call: "a call", ast.Attribute: "an attribute",
            ast.Name: "a name"}.get(type(node), "a computed value")
    needs: list[str] = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.FormattedValue):
            needs.append(ast.unparse(sub.value))
        elif isinstance(sub, ast.Name) and sub.id not in assigned:
            needs.append(sub.id)
    shown = ", ".join(dict.fromkeys(needs)) or "nothing in the file"
    return (f"{name or 'the value'} is {what}, computed when the module runs: babelrun reads the file without "
            f"running it; it would need {shown}; keep the prompt as a string literal")


__all__ = ["PythonSourceError", "constant", "names", "text_constants"]
