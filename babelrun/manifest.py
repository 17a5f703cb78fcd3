"""Loading a manifest: decode the types of ``babelrun.spec`` from YAML, resolve paths, and
check what types alone cannot express through the registries of the stages below (corpus
loaders, perturbations, judge backends and their declared capabilities).

Relative paths in a manifest are resolved against the manifest file's own folder, so a
manifest means the same thing from whatever directory it is run.
"""

from __future__ import annotations

import difflib
import os
import re
import types
from pathlib import Path

import msgspec

from . import judges
from .agentic import AGENTIC_PERTURBATIONS
from .core import bounds, languages
from .corpus import available_languages, check_source, has_reference_answers, read_pairs
from .errors import ManifestError
from .judges import templates
from .judges.protocol import MULTI_TURN, Judging, TemplateError
from .perturb import TEXT_PERTURBATIONS, probes
from .spec import *  # noqa: F403 (the manifest's types, re-exported: babelrun.manifest.JudgeSpec)
from .spec import (
    AgenticSpec,
    CalibratedSpec,
    CascadeSpec,
    CorpusSpec,
    EnsembleSpec,
    FloresSource,
    JudgeSpec,
    LabelledPairsSource,
    Manifest,
    PerturbationSpec,
    Price,
    TrajectoriesSource,
    inner_judges,
)
from .store.rundir import MARKER, is_run_dir

_AT = re.compile(r"^(?P<msg>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.S)
_UNKNOWN = re.compile(r"Object contains unknown field `(?P<field>[^`]+)`")
_MISSING = re.compile(r"Object missing required field `(?P<field>[^`]+)`")


_NUMBER_AS_TEXT = re.compile(r"Expected `(?:int|float)[^`]*`, got `str`")


def fields_at(path: str, document: object = None) -> list[str]:
    """The field names valid at ``path`` of the manifest (``judges[0].simulated``: the
    simulated knobs; a union, such as a corpus source: every member's, or with the decoded
    ``document`` the member its tag names: a ``labelled_pairs`` source's own), the vocabulary
    of did-you-mean there; empty where the path leaves the manifest's structs."""
    import typing

    def members(tp: object) -> list[object]:
        if typing.get_origin(tp) in (typing.Union, types.UnionType):
            return [m for arg in typing.get_args(tp) for m in members(arg)]
        if typing.get_origin(tp) is typing.Annotated:
            return members(typing.get_args(tp)[0])
        return [] if tp is type(None) else [tp]

    current: list[object] = [Manifest]
    for part in re.findall(r"\[[^\]]*\]|[^.\[\]]+", path):
        step: list[object] = []
        for tp in current:
            if part.startswith("["):  # an element of a list, tuple or dict value
                origin, args = typing.get_origin(tp), typing.get_args(tp)
                if origin in (list, tuple, set, frozenset) and args:
                    step.extend(members(args[0]))
                elif origin is dict and len(args) == 2:
                    step.extend(members(args[1]))
            elif isinstance(tp, type) and issubclass(tp, msgspec.Struct) and part in tp.__struct_fields__:
                step.extend(members(typing.get_type_hints(tp)[part]))
        current = step
        document = _step(document, part)
    current = _tagged(current, document)
    return sorted({f for tp in current if isinstance(tp, type) and issubclass(tp, msgspec.Struct)
                   for f in tp.__struct_fields__})


def _step(document: object, part: str) -> object:
    """The decoded YAML under one path step (None where it is not there)."""
    if part.startswith("["):
        i = part[1:-1]
        return document[int(i)] if isinstance(document, list) and i.isdigit() and int(i) < len(document) else None
    return document.get(part) if isinstance(document, dict) else None


def _tagged(members: list[object], document: object) -> list[object]:
    """The union members whose tag the document's tag field names (all of them otherwise)."""
    if not isinstance(document, dict):
        return members
    chosen = [tp for tp in members if isinstance(tp, type) and issubclass(tp, msgspec.Struct)
              and tp.__struct_config__.tag_field is not None
              and document.get(tp.__struct_config__.tag_field) == tp.__struct_config__.tag]
    return chosen or members


def _field_path(error: msgspec.ValidationError, document: object = None) -> tuple[str, str]:
    """Split msgspec's message into (field path, problem) in the manifest's own terms."""
    m = _AT.match(str(error))
    msg, path = m.group("msg"), (m.group("path") or "").lstrip(".")
    found = _UNKNOWN.match(msg)
    if found:
        field = found.group("field")
        return (f"{path}.{field}" if path else field), "unknown field" + _did_you_mean(field, fields_at(path, document))
    found = _MISSING.match(msg)
    if found:
        field = found.group("field")
        return (f"{path}.{field}" if path else field), "required field is missing"
    if path == "corpus.languages" and msg.startswith("Invalid enum value"):
        return path, "a list of language codes (languages: [en, hi]) or all"
    if _NUMBER_AS_TEXT.match(msg):  # YAML reads 2e5 (no dot) as text
        msg += "; YAML reads forms like 2e5 as text: write 200000 or 2.0e+5"
    return path, msg[0].lower() + msg[1:] if msg else msg


def _duplicate_key(raw: bytes) -> tuple[str, str] | None:
    """The first mapping key given twice, as (field path, key): YAML loaders keep the last
    silently, so a manifest could say two things and mean one."""
    import yaml

    try:
        root = yaml.compose(raw, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        return None  # the decoder reports it
    stack = [(root, "")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, yaml.MappingNode):
            seen: set[str] = set()
            for key, value in node.value:
                name = str(key.value)
                if name in seen:
                    return path, name
                seen.add(name)
                stack.append((value, f"{path}.{name}" if path else name))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, f"{path}[{i}]") for i, item in enumerate(node.value))
    return None


def _plain(raw: bytes) -> object:
    """The manifest as plain YAML data (for the did-you-mean of an error; None if unreadable)."""
    try:
        return msgspec.yaml.decode(raw)
    except (msgspec.DecodeError, ValueError):
        return None


def load(path: str | os.PathLike, *, environ: dict[str, str] | None = None) -> Manifest:
    """Read, decode and check a manifest. Raises ``ManifestError`` naming the first problem."""
    path = Path(path)
    source = str(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise ManifestError("", f"cannot read manifest: {e.strerror}", source) from None
    try:
        bounds.check_yaml(raw)  # aliases, expansion and depth, before anything is composed
    except bounds.BoundError as e:
        raise ManifestError("", str(e), source) from None
    twice = _duplicate_key(raw)
    if twice is not None:
        path_, key = twice
        raise ManifestError(f"{path_}.{key}" if path_ else key, "given twice (the last would win silently)", source)
    try:
        manifest = msgspec.yaml.decode(raw, type=Manifest)
    except msgspec.ValidationError as e:
        field, problem = _field_path(e, _plain(raw))
        raise ManifestError(field, problem, source) from None
    except msgspec.DecodeError as e:
        problem = " ".join(str(e).split())
        raise ManifestError("", f"not valid YAML: {problem}", source) from None
    environ = os.environ if environ is None else environ
    manifest = with_defaults(manifest)
    try:
        manifest = _resolve_paths(manifest, path.parent.resolve())
        manifest = _resolve_judges(manifest, path.parent.resolve(), environ)
        check(manifest, environ)
    except ManifestError as e:
        e.source = source
        e.args = (f"{source}: {e}",)
        raise
    return manifest


def text_perturbations(manifest: Manifest) -> list[PerturbationSpec]:
    """The manifest's text perturbations: as given, or (unset) every one the registry
    (``perturb.TEXT_PERTURBATIONS``) holds, in its order, at the default severities."""
    given = manifest.perturbations
    return [PerturbationSpec(name=name) for name in TEXT_PERTURBATIONS] if given is None else given


def agentic_perturbations(agentic: AgenticSpec | None) -> list[PerturbationSpec]:
    """An agentic section's perturbations: as given, or (unset, or no section) every one the
    registry (``agentic.AGENTIC_PERTURBATIONS``) holds, in its order, at the default severities."""
    given = agentic.perturbations if agentic is not None else None
    return [PerturbationSpec(name=name) for name in AGENTIC_PERTURBATIONS] if given is None else given


def with_defaults(manifest: Manifest) -> Manifest:
    """``manifest`` with every perturbation list it leaves unset filled in from the registries
    (what run.yaml keeps: the lists the plan was made from). The types (``spec``) cannot do it:
    the registries live in layers above them."""
    agentic = manifest.agentic
    if agentic is not None and agentic.perturbations is None:
        agentic = msgspec.structs.replace(agentic, perturbations=agentic_perturbations(agentic))
    return msgspec.structs.replace(manifest, perturbations=text_perturbations(manifest), agentic=agentic)


def _resolve_paths(manifest: Manifest, base: Path) -> Manifest:
    """Make every path absolute, relative to the manifest's folder; fill ``{name}``."""

    def absolute(p: str) -> str:
        q = Path(p).expanduser()
        return os.path.normpath(q if q.is_absolute() else base / q)

    sources = [
        msgspec.structs.replace(s, path=absolute(s.path)) if getattr(s, "path", None) else s
        for s in manifest.corpus.sources
    ]
    sources = [msgspec.structs.replace(s, answers=absolute(s.answers)) if getattr(s, "answers", None) else s
               for s in sources]
    sources = [msgspec.structs.replace(s, join=[msgspec.structs.replace(j, path=absolute(j.path)) for j in s.join])
               if getattr(s, "join", None) else s for s in sources]  # a labelled table's joined files
    corpus = msgspec.structs.replace(manifest.corpus, sources=sources)
    if manifest.cache is not None:  # issue 29: the response cache and price files, like the rest
        manifest = msgspec.structs.replace(manifest, cache=msgspec.structs.replace(
            manifest.cache, dir=absolute(manifest.cache.dir)))
    if any(j.price_file for j in manifest.judges):
        manifest = msgspec.structs.replace(manifest, judges=[
            msgspec.structs.replace(j, price_file=absolute(j.price_file)) if j.price_file else j
            for j in manifest.judges])
    return msgspec.structs.replace(manifest, corpus=corpus, output_dir=absolute(_named(manifest.output_dir,
                                                                                      manifest.name)))


_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")


def _named(template: str, name: str) -> str:
    """``output_dir`` with ``{name}`` filled in: the one placeholder. Plain text substitution,
    never ``str.format`` (``{name.__class__}`` must not reach into objects)."""
    for m in _PLACEHOLDER.finditer(template):
        if m.group(1) != "name":
            raise ManifestError("output_dir", f"unknown placeholder {m.group()!r}: the only one is {{name}}")
    rest = _PLACEHOLDER.sub("", template)
    if "{" in rest or "}" in rest:
        raise ManifestError("output_dir", "unbalanced brace: the only placeholder is {name}")
    return template.replace("{name}", name)


def _resolve_judges(manifest: Manifest, base: Path, environ) -> Manifest:
    """Resolve each judge's template (``judges.templates``: a file's or a collection's text
    into the spec, so run.yaml keeps what the judge saw: the text, hashed, is its identity;
    the path is not) and apply the OpenAI client's environment defaults."""
    judges_ = []
    for i, judge in enumerate(manifest.judges):
        try:
            judge = templates.resolve_judge(judge, base)
        except TemplateError as e:
            raise ManifestError(f"judges[{i}].{e.field}", str(e)) from None
        judges_.append(_openai_defaults(judge, environ))
    return msgspec.structs.replace(manifest, judges=judges_)


def _openai_defaults(judge: JudgeSpec, environ) -> JudgeSpec:
    """The OpenAI client's conventions, where the manifest leaves a field unset (the
    manifest always wins): ``OPENAI_BASE_URL`` for ``endpoint`` and then ``OPENAI_API_KEY``
    for the key, ``OPENAI_ORG_ID`` / ``OPENAI_PROJECT_ID`` for the headers; Azure:
    ``AZURE_OPENAI_ENDPOINT`` and ``AZURE_OPENAI_API_KEY``."""
    from .judges.presets import ENV_DEFAULTS

    defaults = ENV_DEFAULTS.get(judge.backend)
    if defaults is None:
        return judge
    changes = {}
    if judge.endpoint is None and environ.get(defaults.endpoint_env):
        changes["endpoint"] = environ[defaults.endpoint_env]
        if judge.api_key_env is None and defaults.key_env in environ:
            changes["api_key_env"] = defaults.key_env
    for field, variable in (("organization", defaults.organization_env), ("project", defaults.project_env)):
        if variable and getattr(judge, field) is None and environ.get(variable):
            changes[field] = environ[variable]
    return msgspec.structs.replace(judge, **changes) if changes else judge


def check(manifest: Manifest, environ) -> None:
    """Checks that types alone cannot express: names, files, languages, knobs."""
    if not manifest.judges:
        raise ManifestError("judges", "at least one judge is required")
    seen: set[str] = set()
    protocols: list[Judging] = []
    for i, judge in enumerate(manifest.judges):
        where = f"judges[{i}]"
        if judge.name in seen:
            raise ManifestError(f"{where}.name", f"duplicate judge name {judge.name!r}")
        seen.add(judge.name)
        protocols.append(_check_judge(judge, where, environ))
    for i, judge in enumerate(manifest.judges):
        if judge.price is None and judge.price_file is not None:  # a manifest's own price wins over the file
            price_from_file(judge, f"judges[{i}].price_file")
    _check_identities(manifest)
    _check_output_dir(Path(manifest.output_dir))

    _check_composites(manifest)
    _check_reference_guided(manifest, protocols)
    _check_multi_turn(manifest, protocols)

    perturbations = text_perturbations(manifest)
    if not perturbations and manifest.agentic is None:
        raise ManifestError("perturbations", "at least one perturbation (or leave it out for all of them)")
    if manifest.corpus.languages != "all" and not manifest.corpus.languages:
        raise ManifestError("corpus.languages", "at least one language (or leave it out for all)")
    _check_perturbations(perturbations, "perturbations", {**TEXT_PERTURBATIONS, **probes.PROBES})
    _check_probes(perturbations)
    if manifest.agentic is not None:
        _check_perturbations(agentic_perturbations(manifest.agentic), "agentic.perturbations",
                             AGENTIC_PERTURBATIONS)
        if not any(isinstance(s, TrajectoriesSource) for s in manifest.corpus.sources):
            raise ManifestError("agentic", "needs a corpus source of kind: trajectories")

    for i, src in enumerate(manifest.corpus.sources):
        check_source(src, manifest, f"corpus.sources[{i}]")
    _check_pairs_sampling(manifest)
    parallel = manifest.corpus.parallel
    if parallel is not None:
        pivot = languages.checked(parallel.pivot, "corpus.parallel.pivot")
        chosen = manifest.corpus.languages
        if chosen != "all" and pivot not in {languages.normalize(c) for c in chosen if _valid(c)}:
            raise ManifestError("corpus.parallel.pivot", f"{parallel.pivot!r} is not among corpus.languages")
        _check_parallel(manifest, pivot)
    if manifest.corpus.languages != "all":
        offered = available_languages(manifest)
        for i, code in enumerate(manifest.corpus.languages):
            where = f"corpus.languages[{i}]"
            tag = languages.checked(code, where)
            if tag not in offered:
                have = ", ".join(sorted(offered))
                raise ManifestError(where, f"{code!r} is not in the corpus (it offers: {have})")


def _check_pairs_sampling(manifest: Manifest) -> None:
    """``references_per_language`` samples references (and trajectories), never labelled
    pairs: set on a corpus of labelled pairs alone it would be ignored, so it is refused and
    the pairs' own sample named (``pairs_per_set`` on the source)."""
    sources = manifest.corpus.sources
    if (sources and all(isinstance(s, LabelledPairsSource) for s in sources)
            and manifest.corpus.references_per_language != _CORPUS_DEFAULTS.references_per_language):
        raise ManifestError("corpus.references_per_language",
                            "samples references, and this corpus holds labelled pairs only: it would be ignored; "
                            "sample the pairs with pairs_per_set: N on the labelled_pairs source")


_CORPUS_DEFAULTS = CorpusSpec()


def _check_parallel(manifest: Manifest, pivot: str) -> None:
    """Every parallel option must be one the corpus can honour: a pivot with references (or
    labelled pairs), and units in the pivot and another language for code-switched items and
    tie probes. Silently generating nothing is the failure this prevents."""
    from .corpus import read, read_pairs

    parallel, sources = manifest.corpus.parallel, manifest.corpus.sources
    chosen = manifest.corpus.languages
    wanted = None if chosen == "all" else {languages.normalize(c) for c in chosen}
    units = {(r.lang, r.ref_id) for r in read(sources) if wanted is None or r.lang in wanted}
    pairs = {(p.condition or p.lang, p.pair_id) for p in read_pairs(sources) if wanted is None or p.lang in wanted}
    in_pivot = {u for lang, u in units if lang == pivot}
    pairs_in_pivot = {u for cond, u in pairs if cond == pivot}
    if not in_pivot and not pairs_in_pivot:
        have = ", ".join(sorted({lang for lang, _ in units} | {c for c, _ in pairs})) or "none"
        hint = "".join(f"; FLORES's pivot file ({s.pivot}) is the source of the prompts, not a target "
                       "language: choose one of the targets" for s in sources if isinstance(s, FloresSource))
        raise ManifestError("corpus.parallel.pivot", f"the corpus has no references or labelled pairs in "
                                                     f"{pivot!r} (it has: {have}){hint[:200]}")
    aligned = any(lang != pivot and u in in_pivot for lang, u in units)
    if parallel.code_switched and not aligned:
        raise ManifestError("corpus.parallel.code_switched", f"no reference is in both {pivot!r} and another "
                                                             "language (same id): nothing to code-switch")
    if parallel.tie_probes and not aligned and not any(c != pivot and u in pairs_in_pivot for c, u in pairs):
        raise ManifestError("corpus.parallel.tie_probes", f"no reference or labelled pair is in both {pivot!r} "
                                                          "and another language (same id): no tie probe to make")


def _check_output_dir(path: Path) -> None:
    """The run directory can be made and written: its nearest existing ancestor is a writable
    folder (a file in the way, or a read-only place, is named now, not after judging)."""
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        what = "is a file" if existing == path else f"cannot be made: {existing} is a file"
        raise ManifestError("output_dir", f"{path} {what}")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ManifestError("output_dir", f"{path} cannot be written: {existing} is not writable")
    if existing == path and not is_run_dir(path) and any(path.iterdir()):
        # A folder of the user's own files: an audit would replace its report.md, take its
        # `lock` and clean its *.tmp. Only a babelrun run directory (or an empty folder) is used.
        raise ManifestError("output_dir", f"{path} holds files and is not a babelrun run directory "
                            f"(no {MARKER}, no run.yaml + log/); name a new or empty folder")


def _check_identities(manifest: Manifest) -> None:
    """Two judges with one judge_id (the same backend, model, endpoint, prompt and sampling,
    e.g. one model through two key variables) would write to the same keys: the second
    would find the first's records done, and both names would share one card."""
    first: dict[str, int] = {}
    for i, judge in enumerate(manifest.judges):
        jid = judges.judge_id(judge)
        if jid in first:
            other = manifest.judges[first[jid]]
            raise ManifestError(f"judges[{i}]", f"{judge.name!r} is the same judge as judges[{first[jid]}] "
                                f"({other.name!r}): judge_id {jid} (same backend, model, endpoint, prompt and "
                                "sampling), so their verdicts would be merged; keep one of them")
        first[jid] = i


def _check_composites(manifest: Manifest) -> None:
    """Names unique across judges and composites; inner judges defined; soft where needed."""
    specs = {j.name: j for j in manifest.judges}
    seen = set(specs)
    for i, comp in enumerate(manifest.composites):
        where = f"composites[{i}]"
        if comp.name in seen:
            raise ManifestError(f"{where}.name", f"duplicate judge name {comp.name!r}")
        seen.add(comp.name)
        fields = {"cheap": comp.cheap, "strong": comp.strong} if isinstance(comp, CascadeSpec) else {"of": comp.of}
        for field, value in fields.items():
            for k, name in enumerate(value if isinstance(value, list) else [value]):
                if name not in specs:
                    at = f"{where}.{field}[{k}]" if isinstance(value, list) else f"{where}.{field}"
                    raise ManifestError(at, f"no judge named {name!r} under judges")
        inner = inner_judges(comp)
        for name in inner + ([comp.base] if comp.base else []):
            if specs[name].protocol != "pairwise":
                raise ManifestError(where, f"judge {name!r} is pointwise: composites combine pairwise verdicts")
        if len(set(inner)) < len(inner):
            raise ManifestError(where, "a composite's inner judges must be distinct")
        if comp.base is not None and comp.base not in specs:
            raise ManifestError(f"{where}.base", f"no judge named {comp.base!r} under judges")
        needs_soft = {
            CalibratedSpec: lambda c: [c.of],
            EnsembleSpec: lambda c: c.of if c.vote == "soft" else [],
            CascadeSpec: lambda c: [c.cheap] if c.margin is not None else [],
        }.get(type(comp), lambda c: [])(comp)
        for name in needs_soft:
            if not specs[name].soft:
                raise ManifestError(where, f"judge {name!r} must be a soft judge (soft: true) for this {comp.kind}")
        uses = inner if not isinstance(comp, CascadeSpec) else [comp.cheap]
        for name in uses + ([comp.base] if comp.base else []):
            if specs[name].calls == "escalations":
                raise ManifestError(where, f"judge {name!r} is only called on escalations: it can only be a "
                                           "cascade's strong judge")
    for i, judge in enumerate(manifest.judges):
        strong = {c.strong for c in manifest.composites if isinstance(c, CascadeSpec)}
        if judge.calls == "escalations" and judge.name not in strong:
            raise ManifestError(f"judges[{i}].calls", "escalations: the judge must be the strong judge of a cascade")
        if judge.calls == "escalations" and judge.batch:
            raise ManifestError(f"judges[{i}].calls", "escalations and batch cannot be combined")


def _check_reference_guided(manifest: Manifest, protocols: list[Judging]) -> None:
    """A template that uses {reference} needs a corpus whose every source gives a separate
    reference answer: binding it to the answer under judgement would hand the judge the gold."""
    for i, (judge, protocol) in enumerate(zip(manifest.judges, protocols, strict=True)):
        if "reference" not in protocol.fields:
            continue
        for k, source in enumerate(manifest.corpus.sources):
            if not has_reference_answers(source):
                raise ManifestError(f"judges[{i}].prompt", f"judge {judge.name!r}: the template uses {{reference}} "
                                                           f"but corpus.sources[{k}] has no reference_answer column")


def _check_multi_turn(manifest: Manifest, protocols: list[Judging]) -> None:
    """A two-turn template (MT-Bench's {answer_a_1} … {answer_b_2}) needs every item's earlier
    turn: references and their perturbations are one turn, labelled pairs give theirs in a
    ``turns`` column."""
    for i, (judge, protocol) in enumerate(zip(manifest.judges, protocols, strict=True)):
        if not protocol.fields & MULTI_TURN:
            continue
        for k, source in enumerate(manifest.corpus.sources):
            if not isinstance(source, LabelledPairsSource):
                raise ManifestError(f"judges[{i}].prompt", f"judge {judge.name!r}: MT-Bench's multi-turn template "
                                                           f"needs earlier turns, and corpus.sources[{k}] is one turn: "
                                                           "use labelled pairs with a turns column, or "
                                                           "the single-turn template (pair-v2)")
        one_turn = next((p for p in read_pairs(manifest.corpus.sources) if len(p.turns) != 1), None)
        if one_turn is not None:
            raise ManifestError(f"judges[{i}].prompt", f"judge {judge.name!r}: MT-Bench's multi-turn template needs "
                                                       f"one earlier turn per pair; pair {one_turn.pair_id!r} has "
                                                       f"{len(one_turn.turns)}: give it in its turns column "
                                                       "([{input, output_1, output_2}]), or use pair-v2")


def _check_probes(perturbations: list[PerturbationSpec]) -> None:
    """The robustness probes' own fields (perturb/probes.py): ``base`` on a cue probe only,
    naming a text degradation; ``cue_language`` and ``cues`` on probes only; a cue file that
    exists and has the bundled file's shape."""
    for i, pert in enumerate(perturbations):
        where = f"perturbations[{i}]"
        kind = probes.PROBES.get(pert.name)
        if pert.base is not None:
            if kind != "cue":
                raise ManifestError(f"{where}.base", f"{pert.name!r} takes no base degradation (only the cue "
                                                     f"probes: {', '.join(probes.CUE_PROBES)})")
            if pert.base.name not in TEXT_PERTURBATIONS:
                raise ManifestError(f"{where}.base.name", f"unknown degradation {pert.base.name!r} "
                                                          f"(known: {', '.join(TEXT_PERTURBATIONS)})")
        if kind is None and (pert.cue_language != "item" or pert.cues is not None):
            field = "cues" if pert.cues is not None else "cue_language"
            raise ManifestError(f"{where}.{field}", f"{pert.name!r} is not a robustness probe "
                                                    f"(probes: {', '.join(probes.PROBES)})")
        if pert.cues is not None:
            if not Path(pert.cues).is_file():
                raise ManifestError(f"{where}.cues", f"no such cue file: {pert.cues}")
            try:
                probes.cues(pert.cues)
            except (probes.CueFileError, ValueError, OSError) as e:
                raise ManifestError(f"{where}.cues", f"{pert.cues}: {e}") from None


def _check_perturbations(perturbations: list[PerturbationSpec], where: str, known: dict) -> None:
    for i, pert in enumerate(perturbations):
        if pert.name not in known:
            raise ManifestError(f"{where}[{i}].name",
                                f"unknown perturbation {pert.name!r} (known: {', '.join(known)})")
        if not pert.severities:
            raise ManifestError(f"{where}[{i}].severities", "at least one severity")


def _valid(code: str) -> bool:
    try:
        languages.normalize(code)
    except ValueError:
        return False
    return True


def _host(url: str) -> str | None:
    from urllib.parse import urlsplit

    try:
        return urlsplit(url).hostname
    except ValueError:
        return None


def _did_you_mean(word: str, known) -> str:
    close = difflib.get_close_matches(word, list(known), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _check_judge(judge: JudgeSpec, where: str, environ) -> Judging:
    """The judge's checks, through its backend's registration; returns its protocol."""
    if not judges.known(judge.backend):
        raise ManifestError(f"{where}.backend", f"unknown backend {judge.backend!r}"
                                                f"{_did_you_mean(judge.backend, judges.BACKENDS)} "
                                                f"(known: {', '.join(judges.names())})")
    caps = judges.capabilities(judge.backend)
    _check_options(judge, where, caps)
    try:
        protocol = Judging.of(judge)
    except TemplateError as e:
        raise ManifestError(f"{where}.{e.field}", f"judge {judge.name!r}: {e}") from None
    _check_protocol(judge, where)
    _warn_patterns(judge, where)
    wrong = judges.check(judge, environ)  # the backend's own checks (its module's ``check``)
    if wrong is not None:
        raise ManifestError(f"{where}.{wrong[0]}", wrong[1])
    _check_model(judge, where, environ, caps)
    if judge.soft and not caps.soft:
        raise ManifestError(f"{where}.soft", f"the {judge.backend} backend gives no token log-probabilities "
                                             f"(soft verdicts: {', '.join(_having('soft'))})")
    if judge.batch and judge.soft:
        raise ManifestError(f"{where}.batch", "batch and soft cannot be combined")
    return protocol


def _warn_patterns(judge: JudgeSpec, where: str) -> None:
    """One warning line per user pattern that nests quantifiers (``(a+)+``): it may backtrack
    for ever on some reply; the engine cuts each search off (``judges.safe_regex``)."""
    import sys

    from .judges import safe_regex

    patterns = {f"{where}.verdict.pattern": judge.verdict.pattern if judge.verdict is not None else None,
                f"{where}.rule.pattern": judge.rule.pattern if judge.rule is not None else None}
    for field, pattern in patterns.items():
        if pattern and safe_regex.risky(pattern):
            print(f"babelrun: warning: {field}: {pattern[:60]!r} nests quantifiers over the same text: it can "
                  f"backtrack exponentially; a search past {safe_regex.TIMEOUT_S:g} s reads invalid "
                  "(pattern_timeout)", file=sys.stderr)


def _check_protocol(judge: JudgeSpec, where: str) -> None:
    if judge.protocol == "pointwise" and judge.soft:
        raise ManifestError(f"{where}.soft", f"judge {judge.name!r}: soft verdicts are slot probabilities: "
                                             "pairwise only")
    if judge.verdict is not None and judge.soft and (judge.verdict.pattern or judge.verdict.scores is not None):
        raise ManifestError(f"{where}.verdict", f"judge {judge.name!r}: a soft judge reads probabilities, "
                                                "not a verdict pattern (its own label tokens: "
                                                "verdict: {labels: {m: A, M: B}}, no pattern)")
    if judge.callable is not None and not re.fullmatch(r"[\w.]+:[\w.]+", judge.callable):
        raise ManifestError(f"{where}.callable", f"judge {judge.name!r}: expected 'package.module:function'")


def _having(capability: str) -> list[str]:
    return [name for name, b in judges.BACKENDS.items() if getattr(b.capabilities, capability)]


_DEFAULTS = JudgeSpec(name="", backend="")


def _check_options(judge: JudgeSpec, where: str, caps: judges.Capabilities) -> None:
    """Refuse a field that does not apply to the judge's backend, set away from its default
    (it would be ignored, or worse: an ``endpoint`` on a simulated judge renames it)."""
    for field in judge.__struct_fields__:
        if caps.applies(field) or getattr(judge, field) == getattr(_DEFAULTS, field):
            continue
        takers = [n for n in judges.names() if judges.capabilities(n).applies(field)]
        raise ManifestError(f"{where}.{field}", f"does not apply to the {judge.backend} backend "
                                                f"(it applies to: {', '.join(takers)})")


def _check_model(judge: JudgeSpec, where: str, environ, caps: judges.Capabilities) -> None:
    """A remote judge's endpoint and key variables (every HTTP backend alike)."""
    if not caps.remote:
        return
    if not judge.model and caps.model_required:
        raise ManifestError(f"{where}.model", f"the {judge.backend} backend needs a model name")
    if judge.endpoint is not None and not re.match(r"^https?://", judge.endpoint):
        raise ManifestError(f"{where}.endpoint", "must start with http:// or https://")
    if judge.endpoint is not None and not _host(judge.endpoint):
        raise ManifestError(f"{where}.endpoint", f"{judge.endpoint!r} names no host")
    from .judges.presets import key_env

    variable = key_env(judge.backend, judge.api_key_env, judge.endpoint)
    if variable and variable not in environ:
        raise ManifestError(f"{where}.api_key_env", f"environment variable {variable} is not set")
    for name, var in judge.headers_env.items():
        if var not in environ:
            raise ManifestError(f"{where}.headers_env.{name}", f"environment variable {var} is not set")


MAX_PRICE_FILE_BYTES = 1 << 20  # a price table: 1 MiB


def price_from_file(judge: JudgeSpec, where: str = "price_file") -> Price:
    """The judge's entry in its ``price_file``: YAML (or JSON, a subset) mapping model names to
    prices, ``{model: {input_per_mtok: …, output_per_mtok: …, …}}`` (``Price``'s fields). Each
    problem is one ``ManifestError`` naming ``where`` (and the entry's field)."""
    import yaml

    assert judge.price_file is not None
    path = Path(judge.price_file).expanduser()
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_PRICE_FILE_BYTES + 1)
    except OSError as e:
        raise ManifestError(where, f"cannot read {str(path)!r}: {e.strerror or e}") from None
    if len(raw) > MAX_PRICE_FILE_BYTES:
        raise ManifestError(where, f"{str(path)!r} is larger than {MAX_PRICE_FILE_BYTES >> 20} MiB")
    try:
        table = yaml.safe_load(raw)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" (line {mark.line + 1})" if mark is not None else ""
        raise ManifestError(where, f"{str(path)!r} is not YAML or JSON{at}") from None
    if not isinstance(table, dict):
        raise ManifestError(where, f"{str(path)!r} must map model names to prices "
                                   "({model: {input_per_mtok: ..., output_per_mtok: ...}})")
    if judge.model not in table:
        raise ManifestError(where, f"{str(path)!r} has no entry for model {judge.model!r} "
                                   f"(judge {judge.name!r}; give the judge price: or add the model)")
    try:
        return msgspec.convert(table[judge.model], Price)
    except msgspec.ValidationError as e:
        m = _AT.match(str(e))
        msg, field = (m.group("msg"), m.group("path") or "") if m else (str(e), "")
        raise ManifestError(f"{where}[{judge.model!r}]{field}", f"{str(path)!r}: {msg[:1].lower()}{msg[1:]}") from None
