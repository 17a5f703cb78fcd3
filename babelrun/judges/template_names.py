"""The names a user's template reads and how they bind, and the labels a verdict maps: the
parts of a judge's protocol (protocol.py, which calls these) that read a template as the user
wrote it — its own names (``fields:``), Jinja2's names and one trial render (jinja.py), the
Jinja2 messages of an item — and a verdict's labels as slots or as scores."""

from __future__ import annotations

import string
from collections.abc import Collection

import msgspec

from ..spec import VerdictSpec
from . import jinja
from .prompt import Template


class TemplateError(ValueError):
    """A template or verdict a judge cannot use; ``field`` names the spec field at fault."""

    def __init__(self, field: str, problem: str):
        super().__init__(problem)
        self.field = field


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


# ---- a verdict's labels ------------------------------------------------------------------------


def scored_labels(verdict: VerdictSpec, protocol: str) -> VerdictSpec:
    """A pointwise verdict whose ``labels`` map to scores (``{C: 1, I: 0}``) as the same map
    under ``values`` (its older name), so both spellings are one verdict and one judge_id;
    anything else as it is (``check_verdict`` says what is wrong)."""
    labels = verdict.labels
    if protocol != "pointwise" or not labels or not all(isinstance(v, (int, float)) for v in labels.values()):
        return verdict
    return msgspec.structs.replace(verdict, labels={}, values={**verdict.values,
                                                               **{k: float(v) for k, v in labels.items()}})


def slot_labels(verdict: VerdictSpec) -> dict[str, str]:
    """A pairwise verdict's labels (text -> A, B or tie)."""
    return {k: v for k, v in verdict.labels.items() if isinstance(v, str)}


def check_slot_labels(verdict: VerdictSpec) -> None:
    """A pairwise verdict's labels map to slots, some to A and some to B."""
    scored = next((k for k, v in verdict.labels.items() if not isinstance(v, str)), None)
    if scored is not None:
        raise TemplateError(f"verdict.labels.{scored}", "a pairwise label maps to A, B or tie; a label that maps "
                                                        "to a score is pointwise (protocol: pointwise)")
    if not {"A", "B"} <= set((slot_labels(verdict) or {"A": "A", "B": "B"}).values()):
        raise TemplateError("verdict.labels", "must map some label to A and some to B")


__all__ = ["TemplateError", "check_fields_map", "check_slot_labels", "raw_names", "render_jinja", "scored_labels",
           "slot_labels", "trial_render"]
