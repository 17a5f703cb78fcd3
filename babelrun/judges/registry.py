"""The backend registry: each backend's name, class, capabilities and options struct.

``babelrun.judges`` registers the built-in backends; plugins are found through the
entry-point group ``babelrun.judges``. The lookups here (``options_type``, ``options_of``,
``judge_spec``) are what the manifest, the engine and the backends read a judge's own options
through; none of them imports a backend's runtime.
"""

from __future__ import annotations

import functools
import importlib
from importlib import metadata
from typing import Any, TypeVar, overload

import msgspec

from ..spec import JudgeSpec
from ..spec.flat import COMMON_FIELDS, split_judge
from ..spec.options import JudgeOptions, UnresolvedOptions, typed_options

ENTRY_POINTS = "babelrun.judges"


class Capabilities(msgspec.Struct, frozen=True, kw_only=True):
    """What a backend can do, declared next to its registration.

    ``soft``: replies carry token log-probabilities (soft verdicts). ``batch_api``: the
    provider has a batch API (``engine/batches.py``). ``in_process``: the model runs in this
    process (no provider account or key; ``replicas`` makes Ray actors of it). ``remote``:
    an HTTP API (``endpoint``, ``api_key_env``). The backend's own manifest fields are its
    options struct (``register(..., options=...)``), not a capability. Checks of a backend's
    own (a model file, knobs, a rule) are its module's ``check(spec, environ)``
    (``Backend.checks``), called by the manifest's checks.
    """

    soft: bool = False
    batch_api: bool = False
    in_process: bool = False
    remote: bool = False
    model_required: bool = False  # a remote API's model name (Azure's deployment stands for it)


class Backend(msgspec.Struct, frozen=True):
    module: str  # under babelrun.judges; dotted: an absolute module (yours, or an entry-point plugin's)
    cls: str
    capabilities: Capabilities
    plugin: bool = False
    # The light module (under babelrun.judges) whose ``check(spec, environ) -> (field,
    # problem) | None`` validates what only this backend knows; None: nothing of its own.
    # A plugin's class may define ``check`` as a static method instead.
    checks: str | None = None
    # The name of the backend's options struct (a ``JudgeOptions`` subclass) in its module;
    # None: the judge takes no options beyond the common fields.
    options: str | None = None


BACKENDS: dict[str, Backend] = {}


def register(name: str, module: str, cls: str, capabilities: Capabilities, checks: str | None = None,
             options: str | None = None) -> None:
    BACKENDS[name] = Backend(module, cls, capabilities, checks=checks, options=options)


def _plugin(name: str) -> Backend | None:
    """A backend from the ``babelrun.judges`` entry points, registered on first lookup."""
    for ep in metadata.entry_points(group=ENTRY_POINTS, name=name):
        cls = ep.load()
        caps = getattr(cls, "capabilities", None)
        if not isinstance(caps, Capabilities):
            raise TypeError(f"entry point {ep.value!r} ({ENTRY_POINTS}) declares no capabilities = Capabilities(...)")
        module, _, attr = ep.value.partition(":")
        kind = getattr(cls, "options", JudgeOptions)
        if not (isinstance(kind, type) and issubclass(kind, JudgeOptions)):
            raise TypeError(f"entry point {ep.value!r} ({ENTRY_POINTS}): options must be a JudgeOptions subclass")
        BACKENDS[name] = Backend(module.strip(), attr.strip(), caps, plugin=True,
                                 options="options" if kind is not JudgeOptions else None)
        return BACKENDS[name]
    return None


def known(backend: str) -> bool:
    return backend in BACKENDS or _plugin(backend) is not None


def names() -> list[str]:
    """Registered backends and every installed plugin's name."""
    return [*BACKENDS, *sorted({ep.name for ep in metadata.entry_points(group=ENTRY_POINTS)} - set(BACKENDS))]


def _entry(backend: str) -> Backend:
    found = BACKENDS.get(backend) or _plugin(backend)
    if found is None:
        raise KeyError(backend)
    return found


def capabilities(backend: str) -> Capabilities:
    return _entry(backend).capabilities


def _absolute(module: str, plugin: bool) -> str:
    """A registered module's import name: under babelrun.judges unless dotted (a module of the
    user's own package) or a plugin's."""
    return module if plugin or "." in module else f".{module}"


@functools.cache
def options_type(backend: str) -> type[JudgeOptions]:
    """The options struct of ``backend`` (``JudgeOptions``: none of its own). Imports the
    backend's module, which is light (its runtime is imported when a judge is built)."""
    entry = _entry(backend)
    if entry.options is None:
        return JudgeOptions
    module = importlib.import_module(_absolute(entry.module, entry.plugin), __package__)
    found = getattr(getattr(module, entry.cls), entry.options) if entry.plugin else getattr(module, entry.options)
    return found if isinstance(found, type) and issubclass(found, JudgeOptions) else JudgeOptions


def option_fields(backend: str) -> list[str]:
    """Every field a judge of ``backend`` may set: the common ones and its own options."""
    return sorted(COMMON_FIELDS | set(options_type(backend).__struct_fields__))


def owners(field: str) -> list[str]:
    """The registered backends whose options have ``field`` (for a field given to another)."""
    return [name for name in BACKENDS if field in options_type(name).__struct_fields__]


_T = TypeVar("_T", bound=JudgeOptions)


@overload
def options_of(spec: JudgeSpec) -> JudgeOptions: ...


@overload
def options_of(spec: JudgeSpec, kind: type[_T]) -> _T: ...


def options_of(spec: JudgeSpec, kind: type[JudgeOptions] = JudgeOptions) -> JudgeOptions:
    """The judge's options, typed by its backend's struct (a run.yaml's untyped ones decoded);
    ``kind``: the struct (or shared base) the caller reads, checked."""
    found = spec.options
    wanted = options_type(spec.backend)
    if not isinstance(found, wanted):
        values = found.values if isinstance(found, UnresolvedOptions) else {}
        found = typed_options(spec.backend, values, options_type, legacy=True)
    if not isinstance(found, kind):
        raise TypeError(f"judge {spec.name!r} ({spec.backend}): its options are no {kind.__name__}")
    return found


def judge_spec(**fields: Any) -> JudgeSpec:
    """A judge spec from the manifest's flat fields (``judge_spec(name=..., backend="simulated",
    simulated=SimulatedKnobs(...), batch_size=4)``): the common ones and the backend's own."""
    common, own = split_judge(fields)
    spec = msgspec.convert(common, JudgeSpec)  # nested mappings (verdict, rate_limit, …) typed as a manifest's
    return msgspec.structs.replace(spec, options=typed_options(spec.backend, own, options_type))


def with_options(spec: JudgeSpec, **changes: Any) -> JudgeSpec:
    """``spec`` with some of its backend's options changed (``msgspec.structs.replace`` for them)."""
    return msgspec.structs.replace(spec, options=msgspec.structs.replace(options_of(spec), **changes))


