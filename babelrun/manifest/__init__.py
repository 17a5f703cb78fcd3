"""Loading a manifest: decode the types of ``babelrun.spec`` from YAML, resolve paths, and
check what types alone cannot express through the registries of the stages below (corpus
loaders, perturbations, judge backends and their declared capabilities).

Relative paths in a manifest are resolved against the manifest file's own folder, so a
manifest means the same thing from whatever directory it is run.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import msgspec

from .. import judges
from ..agentic import AGENTIC_PERTURBATIONS
from ..core import bounds, languages, yaml_keys
from ..corpus import available_languages, check_source, data, has_reference_answers, read_pairs
from ..errors import ManifestError, UserError
from ..judges import templates
from ..judges.options import batch_of
from ..judges.protocol import MULTI_TURN, Judging, TemplateError
from ..perturb import TEXT_PERTURBATIONS, probes
from ..spec import *  # noqa: F403 (the manifest's types, re-exported: babelrun.manifest.JudgeSpec)
from ..spec import (
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
    SampledSpec,
    TrajectoriesSource,
    inner_judges,
)
from ..store.rundir import MARKER, is_run_dir
from .decode import _duplicate_key, _field_path
from .decode import decode as decode
from .decode import fields_at as fields_at
from .judge_checks import MAX_PRICE_FILE_BYTES as MAX_PRICE_FILE_BYTES
from .judge_checks import _check_judge
from .judge_checks import price_from_file as price_from_file


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
        # YAML 1.1 reads a bare ``on`` key (stopping: {on: verdict}) as true: keys read as written
        document = yaml_keys.load(raw)
        manifest = decode(document)
    except msgspec.ValidationError as e:
        field, problem = _field_path(e, document)  # decoded before anything can fail validation
        raise ManifestError(field, problem, source) from None
    except msgspec.DecodeError as e:
        problem = " ".join(str(e).split())
        raise ManifestError("", f"not valid YAML: {problem}", source) from None
    except ManifestError as e:
        e.source = source
        e.args = (f"{source}: {e}",)
        raise
    environ = os.environ if environ is None else environ
    manifest = with_defaults(manifest)
    try:
        manifest = _resolve_paths(manifest, path.parent.resolve(), environ)
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


def _resolve_paths(manifest: Manifest, base: Path, environ: dict[str, str] | None = None) -> Manifest:
    """Make every path absolute, relative to the manifest's folder; fill ``{name}``; find
    ``data:NAME`` source paths (``corpus/data.py``)."""

    def absolute(p: str) -> str:
        q = Path(p).expanduser()
        return os.path.normpath(q if q.is_absolute() else base / q)

    for name in manifest.corpus.data_dirs:
        if name not in data.CATALOGUE:
            raise ManifestError(f"corpus.data_dirs.{name}",
                                f"unknown data set (known: {', '.join(sorted(data.CATALOGUE))})")
    copies = {name: absolute(folder) for name, folder in manifest.corpus.data_dirs.items()}
    sources = [
        msgspec.structs.replace(s, path=_data_path(s.path, copies, environ, i) if data.is_reference(s.path)
                                else absolute(s.path)) if getattr(s, "path", None) else s
        for i, s in enumerate(manifest.corpus.sources)
    ]
    sources = [msgspec.structs.replace(s, answers=absolute(s.answers)) if getattr(s, "answers", None) else s
               for s in sources]
    sources = [msgspec.structs.replace(s, join=[msgspec.structs.replace(j, path=absolute(j.path)) for j in s.join])
               if getattr(s, "join", None) else s for s in sources]  # a labelled table's joined files
    corpus = msgspec.structs.replace(manifest.corpus, sources=sources)
    if manifest.cache is not None:  # the response cache and price files resolve like every other path
        manifest = msgspec.structs.replace(manifest, cache=msgspec.structs.replace(
            manifest.cache, dir=absolute(manifest.cache.dir)))
    if any(j.price_file for j in manifest.judges):
        manifest = msgspec.structs.replace(manifest, judges=[
            msgspec.structs.replace(j, price_file=absolute(j.price_file)) if j.price_file else j
            for j in manifest.judges])
    return msgspec.structs.replace(manifest, corpus=corpus, output_dir=absolute(_named(manifest.output_dir,
                                                                                      manifest.name)))


def _data_path(reference: str, copies: dict[str, str], environ: dict[str, str] | None, i: int) -> str:
    name, _ = data.split(reference)
    if name not in data.CATALOGUE:
        raise ManifestError(f"corpus.sources[{i}].path", f"{reference}: unknown data set {name!r} "
                                                          f"(known: {', '.join(sorted(data.CATALOGUE))})")
    found = data.locate(reference, copies, environ)
    if found is None:
        places = " or ".join(str(p) for p in data.candidates(reference, copies, environ))
        raise ManifestError(f"corpus.sources[{i}].path", f"{reference} is not in {places}: "
                                                          f"`babelrun data get {name}` fetches it")
    return os.path.normpath(found.resolve())


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
    from ..judges.presets import ENV_DEFAULTS

    defaults = ENV_DEFAULTS.get(judge.backend)
    if defaults is None:
        return judge
    changes = {}
    if judge.endpoint is None and environ.get(defaults.endpoint_env):
        changes["endpoint"] = environ[defaults.endpoint_env]
        if judge.api_key_env is None and defaults.key_env in environ:
            changes["api_key_env"] = defaults.key_env
    options = judges.options_of(judge)
    own = {}
    for field, variable in (("organization", defaults.organization_env), ("project", defaults.project_env)):
        if variable and getattr(options, field, None) is None and environ.get(variable):
            own[field] = environ[variable]
    if own:
        changes["options"] = msgspec.structs.replace(options, **own)
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
    _check_cache(manifest)

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
    _check_romanised(manifest)
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
    from ..corpus import read, read_pairs

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


def _check_cache(manifest: Manifest) -> None:
    """A cache folder is a babelrun cache (marked) or empty (store/cache.py): refused here,
    before anything is written, never emptied of another tool's files."""
    if manifest.cache is None:
        return
    from ..store.cache import check_root

    try:
        check_root(manifest.cache.dir, create=False)
    except UserError as e:
        raise ManifestError("cache.dir", str(e).removeprefix("cache.dir ")) from None


def _check_identities(manifest: Manifest) -> None:
    """Two judges with one judge_id (the same backend, model, endpoint, prompt, sampling, key
    variable and headers, e.g. one model under two names) would write to the same keys: the second
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
        if isinstance(comp, SampledSpec) and specs[comp.of].samples < 2:
            raise ManifestError(f"{where}.of", f"judge {comp.of!r} is asked once (samples: 1): a sampled "
                                               "composite needs samples: 2 or more")
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
        if judge.calls == "escalations" and batch_of(judge):
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


def _check_romanised(manifest: Manifest) -> None:
    """The ``romanised`` probe: no cue language or cue file (its cue is the script), and every
    language of the corpus in a script it can transliterate (perturb/romanise.py), named."""
    from ..perturb import romanise

    for i, pert in enumerate(manifest.perturbations or []):
        if pert.name != probes.ROMANISED:
            continue
        if pert.cue_language != "item" or pert.cues is not None:
            field = "cues" if pert.cues is not None else "cue_language"
            raise ManifestError(f"perturbations[{i}].{field}", "romanised has no cue text: its cue is the script")
        chosen = manifest.corpus.languages
        wanted = (sorted(available_languages(manifest)) if chosen == "all"
                  else [languages.normalize(c) for c in chosen if _valid(c)])
        refused = [why for lang in wanted if (why := romanise.problem(lang)) is not None]
        if refused:
            raise ManifestError(f"perturbations[{i}]", "romanised: " + "; ".join(refused)
                                + " — leave these languages out (corpus.languages)")


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
