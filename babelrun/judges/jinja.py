"""Jinja2 prompt templates (``{{ x }}``, ``{% if %}``, ``{% for %}``, ``{# … #}``), read as data.

A prompt file is untrusted (DESIGN.md, Trust), so a Jinja2 template is rendered by the
``jinja2`` package's ``ImmutableSandboxedEnvironment`` with no loader and no globals, and
checked before it is used:

- no tag but ``if`` and ``for`` (``include``, ``import``, ``extends`` would read other files;
  ``set``, ``macro``, ``call``, ``block`` … build values or recursion a template does not need);
- no attribute or item whose name starts with ``_`` (``''.__class__.__mro__``), no call
  (``x.center(10**9)``, ``loop.cycle()``), only the filters in ``FILTERS`` (each one's output
  is at most linear in its input);
- ``*``, ``%`` on text and large ``**`` refused when evaluated; each render runs at most
  ``MAX_ITERATIONS`` loop iterations and writes at most the template's text plus every value
  once per output expression — as large as a ``str.format`` template of the same size can be;
- a name the template reads that is not given is an error when it is checked (StrictUndefined).

A template whose only Jinja2 syntax is plain ``{{ name }}`` fields (and comments) is the same
text as a ``str.format`` one; ``as_format`` gives that text, which babelrun renders the fast way.

``jinja2`` is imported on the first template that is Jinja2 (``is_jinja`` and ``marked`` do not
need it): a run of ``str.format`` prompts never loads it (~20 ms of every command's start).
"""

from __future__ import annotations

import functools
import re
import string
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import jinja2
    from jinja2 import nodes
    from jinja2.sandbox import ImmutableSandboxedEnvironment

# Jinja2 syntax: a tag, a comment, or an expression that starts like one (a name, a literal).
_MARK = re.compile(r"\{%|\{#|\{\{-?\s*[A-Za-z_'\"(\[]")
FILTERS = ("abs", "capitalize", "count", "d", "default", "first", "float", "int", "last", "length", "list", "lower",
           "reverse", "round", "string", "striptags", "title", "trim", "truncate", "upper", "wordcount")
MAX_ITERATIONS = 10_000  # loop iterations in one render
MAX_POWER = 64  # the largest exponent of **
_LOOP = "babelrun_bounded_loop"  # the name each for loop's iterable is wrapped in (added after the checks)
# Tags the checks name when they refuse them (nodes.Stmt subclasses -> how a template writes them).
_TAGS = {"Assign": "set", "AssignBlock": "set", "Macro": "macro", "CallBlock": "call", "FilterBlock": "filter",
         "With": "with", "Block": "block", "Include": "include", "Import": "import", "FromImport": "from … import",
         "Extends": "extends", "ScopedEvalContextModifier": "autoescape", "EvalContextModifier": "autoescape",
         "ExprStmt": "do", "Continue": "continue", "Break": "break"}
_READS_FILES = {"Include", "Import", "FromImport", "Extends"}


class JinjaError(ValueError):
    """A Jinja2 template that cannot be used: one line saying why."""


@functools.cache
def _sandbox() -> type[ImmutableSandboxedEnvironment]:
    from jinja2.exceptions import SecurityError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Sandbox(ImmutableSandboxedEnvironment):
        """The sandbox, with text repetition and formatting refused where they are evaluated
        (the optimizer does not fold intercepted operators, so a constant ``'x' * 10**9`` is not
        computed when the template is compiled either)."""

        intercepted_binops = frozenset({"*", "%", "**"})

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            if operator in ("*", "%") and any(isinstance(v, (str, list, tuple)) for v in (left, right)):
                raise SecurityError(f"{operator!r} on text or lists is refused in a prompt template")
            if operator == "**" and not (isinstance(right, (int, float)) and abs(right) <= MAX_POWER
                                         and isinstance(left, (int, float)) and abs(left) <= 1 << 32):
                raise SecurityError(f"** with an exponent over {MAX_POWER} is refused in a prompt template")
            return super().call_binop(context, operator, left, right)

    return Sandbox


@functools.cache
def environment() -> jinja2.Environment:
    import jinja2

    env = _sandbox()(loader=None, undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)
    env.globals.clear()  # no range, dict, lipsum, cycler, joiner, namespace
    env.filters = {name: env.filters[name] for name in FILTERS}
    return env


def marked(text: str) -> bool:
    """Whether ``text`` has something that looks like Jinja2 syntax."""
    return _MARK.search(text) is not None


def is_jinja(texts: Iterable[str]) -> bool:
    """Whether a prompt's texts are Jinja2 rather than ``str.format``: some text has a Jinja2
    tag, comment or ``{{ expression }}``, and the texts are not a ``str.format`` template with
    a field (``Q: {question} JSON: {{"w": 1}}`` is one: its ``{{`` is a literal brace)."""
    texts = [t for t in texts if t]
    if not any(marked(t) for t in texts):
        return False
    fields = [_format_fields(t) for t in texts]
    return any(f is None for f in fields) or not any(fields)


def _format_fields(text: str) -> list[str] | None:
    """The fields of ``text`` read as a ``str.format`` template of plain ``{name}`` fields,
    or None where it is not one."""
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError:
        return None
    if any(name is not None and (not name.isidentifier() or spec or conversion)
           for _, name, spec, conversion in parsed):
        return None
    return [name for _, name, _, _ in parsed if name is not None]


def parse(source: str) -> nodes.Template:
    import jinja2

    try:
        return environment().parse(source)
    except jinja2.TemplateSyntaxError as e:
        raise JinjaError(f"not a valid Jinja2 template (line {e.lineno}): {e.message}") from None


@functools.lru_cache(maxsize=256)
def check(source: str) -> tuple[frozenset[str], int]:
    """(the names the template reads, its number of output expressions); ``JinjaError`` for
    what the sandbox does not allow (module docstring)."""
    from jinja2 import meta, nodes

    tree = parse(source)
    outputs = 0
    for node in tree.find_all(nodes.Node):
        kind = type(node).__name__
        if kind in _READS_FILES:
            raise JinjaError(f"{{% {_TAGS[kind]} %}} reads another file: a prompt template is one file, "
                             "read as data (no loader)")
        if isinstance(node, nodes.Stmt) and not isinstance(node, (nodes.Output, nodes.If, nodes.For)):
            raise JinjaError(f"{{% {_TAGS.get(kind, kind.lower())} %}} is not read in a prompt template: "
                             "{{ }}, {% if %}, {% for %} and comments are")
        if isinstance(node, nodes.For) and node.recursive:
            raise JinjaError("{% for … recursive %} is not read in a prompt template")
        if isinstance(node, nodes.Getattr) and node.attr.startswith("_"):
            raise JinjaError(f"attribute {node.attr!r}: names that start with _ are refused (a template cannot "
                             "reach Python objects)")
        if (isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const)
                and isinstance(node.arg.value, str) and node.arg.value.startswith("_")):
            raise JinjaError(f"item {node.arg.value!r}: names that start with _ are refused (a template cannot "
                             "reach Python objects)")
        if isinstance(node, nodes.Call):
            raise JinjaError("a call (…()) is not read in a prompt template: use a filter (|trim, |upper, …)")
        if isinstance(node, nodes.Filter) and node.name not in FILTERS:
            raise JinjaError(f"filter |{node.name} is not read in a prompt template (filters: {', '.join(FILTERS)})")
        if isinstance(node, nodes.Output):
            outputs += sum(not isinstance(n, nodes.TemplateData) for n in node.nodes)
    names = frozenset(meta.find_undeclared_variables(tree))
    if _LOOP in names:
        raise JinjaError(f"{_LOOP} is babelrun's own name")
    compiled(source)  # unknown tests and the like fail here, when the template is checked
    return names, outputs


def as_format(source: str) -> str | None:
    """The ``str.format`` text of a template whose only Jinja2 syntax is ``{{ name }}``
    fields and comments (the same text, rendered the same way), or None."""
    from jinja2 import nodes

    tree = parse(source)
    out = []
    for node in tree.body:
        if not isinstance(node, nodes.Output):
            return None
        for part in node.nodes:
            if isinstance(part, nodes.TemplateData):
                out.append(part.data.replace("{", "{{").replace("}", "}}"))
            elif isinstance(part, nodes.Name):
                out.append("{" + part.name + "}")
            else:
                return None
    return "".join(out)


@functools.lru_cache(maxsize=64)
def compiled(source: str) -> jinja2.Template:
    """The checked template compiled, each ``for`` loop's iterable counted (``_Budget``)."""
    import jinja2
    from jinja2 import nodes

    env = environment()
    tree = parse(source)
    for loop in tree.find_all(nodes.For):
        loop.iter = nodes.Call(nodes.Name(_LOOP, "load", lineno=loop.lineno), [loop.iter], [], None, None,
                               lineno=loop.lineno)
    try:
        return env.from_string(tree)
    except jinja2.TemplateError as e:
        raise JinjaError(f"not a valid Jinja2 template: {e}") from None


class _Budget:
    """The loop iterations one render may still run."""

    def __init__(self) -> None:
        self.left = MAX_ITERATIONS

    def __call__(self, iterable: Iterable[Any]) -> Iterator[Any]:
        for value in iterable:
            self.left -= 1
            if self.left < 0:
                from jinja2.exceptions import SecurityError

                raise SecurityError(f"more than {MAX_ITERATIONS:,} loop iterations in one render")
            yield value


def render(source: str, values: Mapping[str, Any], outputs: int) -> str:
    """The template rendered with ``values`` (text, or lists of text mappings), at most its
    text plus every value once per output expression; ``JinjaError`` otherwise."""
    size = sum(len(v) if isinstance(v, str) else sum(len(str(x)) for x in v) for v in values.values())
    limit = len(source) + max(outputs, 1) * size
    import jinja2

    parts, total = [], 0
    try:
        for chunk in compiled(source).generate({**values, _LOOP: _Budget()}):
            total += len(chunk)
            if total > limit:
                raise JinjaError(f"the rendered prompt passed {limit:,} characters (the template's text and each "
                                 "value once per output expression)")
            parts.append(chunk)
    except (jinja2.TemplateError, TypeError, ValueError, ArithmeticError, RecursionError) as e:
        if isinstance(e, JinjaError):
            raise
        raise JinjaError(f"cannot render the Jinja2 template: {str(e)[:200]}") from None
    return "".join(parts)


__all__ = ["FILTERS", "MAX_ITERATIONS", "JinjaError", "as_format", "check", "environment", "is_jinja", "marked",
           "render"]
