"""A template's fields: which a protocol takes, other tools' names for them, and the checks a
judge's template passes at validate (``protocol.py`` renders with them and reads replies)."""


from __future__ import annotations

import hashlib
import string
from collections.abc import Collection

from ..spec import JudgeSpec
from . import jinja
from .prompt import TEMPLATES, Template

# MT-Bench's two-turn pairwise fields: the earlier turn (``_1``, from the item's ``turns``) and
# the last (``_2``: the item's own question and answers).
MULTI_TURN = frozenset({"question_1", "answer_a_1", "answer_b_1", "question_2", "answer_a_2", "answer_b_2"})
FIELDS = {
    "pairwise": frozenset({"question", "answer_a", "answer_b", "reference", "language"} | MULTI_TURN),
    "pointwise": frozenset({"question", "answer", "reference", "language"}),
}
REQUIRED = {"pairwise": ("answer_a", "answer_b"), "pointwise": ("answer",)}
# Other tools' names for our fields, so their templates work unchanged: MT-Bench
# (ref_answer_1), alpaca_eval (instruction, output_1, output_2), inspect_ai's
# model_graded_qa (criterion), and the built-in templates' own {prompt}.
ALIASES = {"prompt": "question", "ref_answer_1": "reference", "instruction": "question", "output_1": "answer_a",
           "output_2": "answer_b", "output": "answer", "criterion": "reference",
           # LLMBar ({input}, {output_1}, {output_2}); JudgeLM ({answer_1}, {answer_2}; its {prompt} is
           # its instructions block, filled by the loader from the prompt file's defaults)
           "input": "question", "answer_1": "answer_a", "answer_2": "answer_b"}
# Other tools' fields that have no babelrun counterpart, or would be bound to the wrong thing,
# in a file of that tool's shape (the loader, templates.py, knows which): refused at validate
# with the tool's name and the fix. In any other file such a name is an unknown field.
_MULTI_TURN = ("MT-Bench's multi-turn pointwise and reference-guided templates ({answer_1} of a turn, "
               "{ref_answer_2}) are not read: use pair-v2-multi-turn (pairwise, labelled pairs with turns) or "
               "a single-turn template (single-v1)")
TOOL_FIELDS = {
    "MT-Bench": {"ref_answer_2": _MULTI_TURN},
    "JudgeLM": {"answer_more": ("JudgeLM's {answer_more} (answers beyond two) has no counterpart: babelrun "
                                "compares two answers; use a JudgeLM template without it")},
    "promptfoo": {"rubric": ("promptfoo's {{ rubric }} is the assertion's rubric text: give it in the manifest, "
                             "prompt: {file: …, vars: {rubric: \"…\"}} (it may use {question})")},
}
class TemplateError(ValueError):
    """A template or verdict a judge cannot use; ``field`` names the spec field at fault."""

    def __init__(self, field: str, problem: str):
        super().__init__(problem)
        self.field = field


def template_of(spec: JudgeSpec) -> Template:
    """The judge's template: a built-in by name, or the user's text (read into the spec by
    the manifest loader; a bare path string left unread is an error here)."""
    prompt = spec.prompt
    if isinstance(prompt, str):
        if prompt not in TEMPLATES:
            raise TemplateError("prompt", f"unknown prompt template {prompt!r} "
                                          f"(built-in: {', '.join(TEMPLATES)}; or a file path, or "
                                          "{system, user}, or {file, name})")
        return TEMPLATES[prompt]
    if prompt.user is None:
        raise TemplateError("prompt", "needs `user` text (or `file`)")
    if not isinstance(prompt.user, str) or not isinstance(prompt.system, str):
        raise TemplateError("prompt", "the prompt's parts are read by the manifest loader (manifest.load)")
    jinja2_ = prompt.syntax == "jinja2"
    text = f"{prompt.system}\x1f{prompt.user}"  # the text alone, as before, where nothing else is set
    if jinja2_:
        text += "\x1fjinja2" + "".join(f"\x1e{k}={v}" for k, v in sorted(prompt.vars.items()))
    if prompt.fields:
        text += "\x1ffields" + "".join(f"\x1e{k}={v}" for k, v in sorted(prompt.fields.items()))
    digest = hashlib.blake2b(text.encode(), digest_size=6).hexdigest()
    return Template(name=f"user:{digest}", version=0, system=prompt.system, user=prompt.user,
                    syntax="jinja2" if jinja2_ else "format", fields=dict(prompt.fields),
                    vars=dict(prompt.vars) if jinja2_ else {})


def builtin(spec: JudgeSpec) -> bool:
    return isinstance(spec.prompt, str)


def fields_of(text: str, aliases: dict[str, str] = ALIASES) -> list[str]:
    """The ``str.format`` field names of ``text``, aliases resolved; raises ValueError on a
    malformed template or a field that is not a plain name."""
    names = []
    for _, name, spec, conversion in string.Formatter().parse(text):
        if name is None:
            continue
        if not name.isidentifier():
            raise ValueError(f"field {{{name}}} must be a plain name")
        if spec or conversion:  # widths, nested fields, conversions: refused (docs: "Bounds")
            shown = f"{{{name}{'!' + conversion if conversion else ''}{':' + spec if spec else ''}}}"
            raise ValueError(f"field {shown[:60]} has a format spec or conversion: write the field plain, "
                             f"{{{name}}}")
        names.append(aliases.get(name, name))
    return names


def aliases_of(template: Template) -> dict[str, str]:
    """The template's names for babelrun's fields: the other tools' aliases, then its own
    ``fields`` map (which wins)."""
    return {**ALIASES, **template.fields} if template.fields else ALIASES


def check_template(template: Template, protocol: str) -> set[str]:
    """The fields a template uses; ``TemplateError`` naming an unknown or missing one."""
    check_source_fields(template)
    if protocol == "pointwise" and multi_turn(template):
        raise TemplateError("prompt", _MULTI_TURN)
    aliases = aliases_of(template)
    raw = raw_names(template)
    used: set[str] = set()
    if template.syntax == "jinja2":
        used.update(aliases.get(name, name) for name in raw - set(template.vars))
        texts = list(template.vars.values())  # a var's text is babelrun's str.format text
    else:
        texts = [template.system, template.user]
    for part in texts:
        try:
            used.update(fields_of(part, aliases))
        except ValueError as e:
            raise TemplateError("prompt", f"not a valid template: {e}") from None
    check_fields_map(template, raw, FIELDS[protocol], protocol)
    if template.syntax == "jinja2":
        trial_render(template, raw)
    other = "pointwise" if protocol == "pairwise" else "pairwise"
    if used & set(REQUIRED[other]) and not used & set(REQUIRED[protocol]):
        raise TemplateError("prompt", f"a {other} template ({{{REQUIRED[other][0]}}}) under protocol: {protocol}; "
                                      f"a {protocol} template needs {{{'}, {'.join(REQUIRED[protocol])}}}"
                                      + (" (built-in: prompt: pointwise)" if protocol == "pointwise" else ""))
    unknown = sorted(used - FIELDS[protocol])
    if unknown:
        name = unknown[0]
        raise TemplateError("prompt", f"unknown field {{{name}}} in a {protocol} template "
                                      f"(known: {', '.join(sorted(FIELDS[protocol] | set(ALIASES)))}); a name of the "
                                      f"template's own: map it, fields: {{{name}: question}}, or give its text, "
                                      f"vars: {{{name}: \"…\"}}")
    for field in REQUIRED[protocol]:
        if field not in used and f"{field}_2" not in used:  # a two-turn template judges {answer_a_2} …
            raise TemplateError("prompt", f"a {protocol} template needs the field {{{field}}}")
    return used


def plain_format(text: str) -> bool:
    """Whether ``text`` is a ``str.format`` template of plain ``{name}`` fields (a literal
    brace doubled), as babelrun's own templates are."""
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError:
        return False
    return all(name is None or (name.isidentifier() and not spec and conversion is None)
               for _, name, spec, conversion in parsed)


def multi_turn(template: Template) -> bool:
    """Whether a template uses MT-Bench's two-turn fields ({question_1} … {answer_b_2})."""
    try:
        names = raw_names(template)
    except TemplateError:
        return False
    aliases = aliases_of(template)
    return bool({aliases.get(name, name) for name in names} & MULTI_TURN)


def check_source_fields(template: Template, tool: str | None = None) -> None:
    """Refuse a field that babelrun would bind wrongly, and, in a file of a tool's shape
    (``tool``, known to the loader), that tool's fields babelrun cannot bind, naming the tool
    and the fix (``TOOL_FIELDS``)."""
    try:
        raw = raw_names(template)
    except TemplateError:
        return  # check_template says what is malformed
    own = TOOL_FIELDS.get(tool or "", {})
    for name in sorted(raw - set(template.fields) - set(template.vars)):
        if name in own:
            raise TemplateError("prompt", f"field {{{name}}}: {own[name]}")
    bound = set(template.fields) | set(template.vars)
    if "prompt" in raw and "question" in raw and "prompt" not in bound:  # JudgeLM's {prompt} block
        judgelm = "JudgeLM's {prompt} is its instructions block; read its prompt file with its defaults " \
                  "(prompt: {file: …}), or " if tool == "JudgeLM" else ""
        raise TemplateError("prompt", "field {prompt} beside {question}: both would read the question; "
                                      f"{judgelm}give its text, vars: {{prompt: \"…\"}}, or map it, fields:")


def raw_names(template: Template) -> set[str]:
    """The names the template's texts read, as written (before aliases); for Jinja2, the
    names it reads that it does not set itself. ``TemplateError`` on a malformed template."""
    names: set[str] = set()
    for part in (template.system, template.user):
        if template.syntax == "jinja2":
            try:
                names.update(jinja.check(part)[0])
            except jinja.JinjaError as e:
                raise TemplateError("prompt", str(e)) from None
            continue
        try:
            names.update(name for _, name, _, _ in string.Formatter().parse(part) if name)
        except ValueError as e:
            raise TemplateError("prompt", f"not a valid template: {e}") from None
    return names


def check_fields_map(template: Template, raw: set[str], known: Collection[str], protocol: str) -> None:
    """Each ``fields`` entry names a name the template reads and one of babelrun's fields
    (``known``: the protocol's)."""
    for name, field in template.fields.items():
        if name not in raw:
            raise TemplateError(f"prompt.fields.{name}", f"{{{name}}} is not a name the template reads "
                                                         f"(it reads: {', '.join(sorted(raw)) or 'none'})")
        if field not in known:
            raise TemplateError(f"prompt.fields.{name}", f"{field!r} is not a field of a {protocol} template "
                                                         f"(babelrun's: {', '.join(sorted(known))})")
        if name in template.vars:
            raise TemplateError(f"prompt.fields.{name}", f"{{{name}}} is in both fields and vars: keep one")


def trial_render(template: Template, raw: set[str]) -> None:
    """A Jinja2 template rendered once with a word for every name, so what only rendering
    shows (``'x' * 10**9``, an attribute a text has not) is an error at validate."""
    sample = {name: "text" for name in raw}
    for text in (template.system, template.user):
        try:
            jinja.render(text, sample, jinja.check(text)[1])
        except jinja.JinjaError as e:
            raise TemplateError("prompt", str(e)) from None


def render_jinja(template: Template, every: dict[str, str], aliases: dict[str, str]) -> list[dict[str, str]]:
    """A Jinja2 template's messages (jinja.py's sandbox): each name it reads bound to its
    field's text (``every``: each field under each of its names), or to its var's text filled
    with the fields."""
    messages = []
    for role, text in (("system", template.system), ("user", template.user)):
        if not text:
            continue
        names, outputs = jinja.check(text)
        bound = {name: (template.vars[name].format_map(every) if name in template.vars
                        else every[aliases.get(name, name)]) for name in names}
        try:
            messages.append({"role": role, "content": jinja.render(text, bound, outputs)})
        except jinja.JinjaError as e:
            raise TemplateError("prompt", str(e)) from None
    return messages
