"""A template's fields: which a protocol takes, other tools' names for them, and the checks a
judge's template passes at validate (``protocol.py`` renders with them and reads replies)."""


from __future__ import annotations

import hashlib
import string

from ..spec import JudgeSpec
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
# Other tools' fields that have no babelrun counterpart, or would be bound to the wrong thing:
# refused at validate with the tool's name and the fix.
_MULTI_TURN = ("MT-Bench's multi-turn pointwise and reference-guided templates ({answer_1} of a turn, "
               "{ref_answer_2}) are not read: use pair-v2-multi-turn (pairwise, labelled pairs with turns) or "
               "a single-turn template (single-v1)")
SOURCE_FIELDS = {
    **{name: _MULTI_TURN for name in ("ref_answer_2",)},
    "answer_more": ("JudgeLM's {answer_more} (answers beyond two) has no counterpart: babelrun compares two "
                    "answers; use a JudgeLM template without it"),
    "rubric": ("promptfoo's {{ rubric }} is the assertion's rubric text: give it in the manifest, "
               "prompt: {file: …, vars: {rubric: \"…\"}} (it may use {question})"),
    "instructions": ("inspect_ai's {instructions} is its grading instructions: give them in the manifest, "
                     "prompt: {file: …, vars: {instructions: \"…\"}}"),
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
    digest = hashlib.blake2b(f"{prompt.system}\x1f{prompt.user}".encode(), digest_size=6).hexdigest()
    return Template(name=f"user:{digest}", version=0, system=prompt.system, user=prompt.user)


def builtin(spec: JudgeSpec) -> bool:
    return isinstance(spec.prompt, str)


def fields_of(text: str) -> list[str]:
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
        names.append(ALIASES.get(name, name))
    return names


def check_template(template: Template, protocol: str) -> set[str]:
    """The fields a template uses; ``TemplateError`` naming an unknown or missing one."""
    check_source_fields(template)
    if protocol == "pointwise" and multi_turn(template):
        raise TemplateError("prompt", _MULTI_TURN)
    used: set[str] = set()
    for part in (template.system, template.user):
        try:
            used.update(fields_of(part))
        except ValueError as e:
            raise TemplateError("prompt", f"not a valid template: {e}") from None
    other = "pointwise" if protocol == "pairwise" else "pairwise"
    if used & set(REQUIRED[other]) and not used & set(REQUIRED[protocol]):
        raise TemplateError("prompt", f"a {other} template ({{{REQUIRED[other][0]}}}) under protocol: {protocol}; "
                                      f"a {protocol} template needs {{{'}, {'.join(REQUIRED[protocol])}}}"
                                      + (" (built-in: prompt: pointwise)" if protocol == "pointwise" else ""))
    unknown = sorted(used - FIELDS[protocol])
    if unknown:
        raise TemplateError("prompt", f"unknown field {{{unknown[0]}}} in a {protocol} template "
                                      f"(known: {', '.join(sorted(FIELDS[protocol] | set(ALIASES)))})")
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
    names: set[str] = set()
    for part in (template.system, template.user):
        try:
            names.update(name for _, name, _, _ in string.Formatter().parse(part) if name)
        except ValueError:
            return False
    return bool(names & MULTI_TURN)


def check_source_fields(template: Template) -> None:
    """Refuse another tool's field that babelrun cannot bind, or would bind wrongly, naming
    the tool and the fix (``SOURCE_FIELDS``; JudgeLM's ``{prompt}`` beside ``{question}``)."""
    raw: set[str] = set()
    for part in (template.system, template.user):
        try:
            raw.update(name for _, name, _, _ in string.Formatter().parse(part) if name)
        except ValueError:
            return  # check_template says what is malformed
    for name in sorted(raw):
        if name in SOURCE_FIELDS:
            raise TemplateError("prompt", f"field {{{name}}}: {SOURCE_FIELDS[name]}")
    if "prompt" in raw and "question" in raw:  # JudgeLM's shape: {question} … [System] {prompt}
        raise TemplateError("prompt", "field {prompt} beside the question: JudgeLM's {prompt} is its instructions "
                                      "block, not the question; read its prompt file with its defaults "
                                      "(prompt: {file: …}) or give the text, prompt: {…, vars: {prompt: \"…\"}}")


# ---- verdicts ------------------------------------------------------------------------------
