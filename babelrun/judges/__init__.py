"""Judge backends behind one protocol (``protocol.Judge``), each registered once with what it can do.

A backend is one class in one module, and one ``register`` line here: its name, where its
class lives (imported when a judge first needs it, so ``import babelrun.judges`` loads no HTTP
client and no model runtime) and its ``Capabilities``. Everything else reads the registry:
the manifest's checks (which options apply, soft verdicts, batch APIs, replicas), the rate
limiter (in-process backends have no provider account), the executor. Nothing above this
module keeps a list of backend names.

OpenAI-compatible providers are data (``presets.py``): each preset registers the ``openai``
class with the preset's own capabilities.

Third-party backends are found through the entry-point group ``babelrun.judges`` (looked up
the first time a name is not registered here): an entry point named NAME loads a class whose
constructor takes ``(spec, judge_id, seed)`` and that declares ``capabilities`` (a
``Capabilities``) as a class attribute.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from importlib import metadata

import msgspec

from ..spec import JudgeSpec
from .base import (
    ORDERS,
    FatalJudgeError,
    JudgeReply,
    JudgeRequest,
    Order,
    RejectedError,
    RetryableError,
)
from .identity import judge_id
from .presets import PRESETS
from .protocol import Judge

# The JudgeSpec fields every backend takes; a backend's ``Capabilities.options`` adds its own.
COMMON_OPTIONS = frozenset({
    "name", "backend", "model", "prompt", "prompt_language", "temperature", "max_tokens", "soft",
    "concurrency", "adaptive_concurrency", "rate_limit", "timeout_s", "retries", "max_consecutive_failures",
    "calls", "family", "price", "protocol", "verdict", "price_file",
})
HTTP_OPTIONS = frozenset({"endpoint", "api_key_env"})
BATCH_API_OPTIONS = frozenset({"batch", "batch_poll_s"})
LOCAL_OPTIONS = frozenset({"batch_size", "max_wait_ms", "threads", "context", "replicas"})
# The OpenAI client's conventions: reasoning models, extra and organisation/project headers.
OPENAI_OPTIONS = frozenset({"reasoning", "reasoning_effort", "headers", "headers_env", "organization", "project"})
ENTRY_POINTS = "babelrun.judges"


class Capabilities(msgspec.Struct, frozen=True, kw_only=True):
    """What a backend can do, declared next to its registration.

    ``soft``: replies carry token log-probabilities (soft verdicts). ``batch_api``: the
    provider has a batch API (``engine/batches.py``). ``in_process``: the model runs in this
    process (no provider account or key; ``replicas`` makes Ray actors of it). ``remote``:
    an HTTP API (``endpoint``, ``api_key_env``). ``options``: the JudgeSpec fields beyond
    ``COMMON_OPTIONS`` that apply; any other field set away from its default is refused.
    Checks of a backend's own (a model file, knobs, a rule) are its module's
    ``check(spec, environ)`` (``Backend.checks``), called by the manifest's checks.
    """

    soft: bool = False
    batch_api: bool = False
    in_process: bool = False
    remote: bool = False
    options: frozenset[str] = frozenset()
    model_required: bool = False  # a remote API's model name (Azure's deployment stands for it)

    def applies(self, option: str) -> bool:
        return option in COMMON_OPTIONS or option in self.options


class Backend(msgspec.Struct, frozen=True):
    module: str  # under babelrun.judges; dotted: an absolute module (yours, or an entry-point plugin's)
    cls: str
    capabilities: Capabilities
    plugin: bool = False
    # The light module (under babelrun.judges) whose ``check(spec, environ) -> (field,
    # problem) | None`` validates what only this backend knows; None: nothing of its own.
    # A plugin's class may define ``check`` as a static method instead.
    checks: str | None = None


BACKENDS: dict[str, Backend] = {}


def register(name: str, module: str, cls: str, capabilities: Capabilities, checks: str | None = None) -> None:
    BACKENDS[name] = Backend(module, cls, capabilities, checks=checks)


def _remote(*, soft: bool, batch_api: bool = False, extra: frozenset[str] = frozenset(),
            model_required: bool = True) -> Capabilities:
    return Capabilities(soft=soft, batch_api=batch_api, remote=True, model_required=model_required,
                        options=HTTP_OPTIONS | extra | (BATCH_API_OPTIONS if batch_api else frozenset()))


register("simulated", "simulated", "SimulatedJudge",
         Capabilities(soft=True, in_process=True, options=LOCAL_OPTIONS | {"simulated"}), checks="simulated")
register("llamacpp", "llamacpp", "LlamaCppJudge", Capabilities(soft=True, in_process=True, options=LOCAL_OPTIONS),
         checks="llamacpp")
register("mlx", "mlx", "MlxJudge", Capabilities(in_process=True, options=LOCAL_OPTIONS), checks="mlx")
register("anthropic", "anthropic", "AnthropicJudge",
         _remote(soft=False, batch_api=True, extra=frozenset({"reasoning", "reasoning_effort", "prompt_cache"})))
register("gemini", "gemini", "GeminiJudge", _remote(soft=False, extra=frozenset({"reasoning", "reasoning_effort"})))
# Judges that are code: the user's function, called in this process (python.py).
register("python", "python", "PythonJudge", Capabilities(in_process=True, options=frozenset({"callable"})),
         checks="python")
for _name, _preset in PRESETS.items():  # openai itself and the OpenAI-compatible providers
    register(_name, "openai", "OpenAIJudge", _remote(soft=_preset.logprobs, batch_api=_preset.batch_api,
                                                     extra=OPENAI_OPTIONS | _preset.options,
                                                     model_required=_preset.model_required),
             checks="presets")
# A deterministic scorer, no model: a cascade's cheap triage stage (rule.py).
register("rule", "rule", "RuleJudge", Capabilities(in_process=True, options=frozenset({"rule"})), checks="rule")
# Verdicts a judge already gave, read from a file: no call is made (replay.py).
register("replay", "replay", "ReplayJudge", Capabilities(in_process=True, options=frozenset({"replay"})),
         checks="replay")


def _plugin(name: str) -> Backend | None:
    """A backend from the ``babelrun.judges`` entry points, registered on first lookup."""
    for ep in metadata.entry_points(group=ENTRY_POINTS, name=name):
        cls = ep.load()
        caps = getattr(cls, "capabilities", None)
        if not isinstance(caps, Capabilities):
            raise TypeError(f"entry point {ep.value!r} ({ENTRY_POINTS}) declares no capabilities = Capabilities(...)")
        module, _, attr = ep.value.partition(":")
        BACKENDS[name] = Backend(module.strip(), attr.strip(), caps, plugin=True)
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


def check(spec: JudgeSpec, environ: Mapping[str, str]) -> tuple[str, str] | None:
    """What the judge's own backend finds wrong with it: (field under the judge, problem),
    or None. Imports only the backend's light ``checks`` module (no HTTP client, no model)."""
    entry = _entry(spec.backend)
    if entry.plugin:
        found = getattr(importlib.import_module(entry.module), entry.cls)
        hook = getattr(found, "check", None)
    elif entry.checks is not None:
        hook = importlib.import_module(_absolute(entry.checks, False), __package__).check
    else:
        return None
    result: tuple[str, str] | None = hook(spec, environ) if hook is not None else None
    return result


def build(spec: JudgeSpec, seed: int) -> Judge:
    """The backend object for a judge spec, with its protocol attached (``judge.protocol``:
    the one way its requests are rendered and its replies read). Every backend's constructor
    takes ``(spec, judge_id, seed)``; one that needs the protocol itself (the simulated judge
    writes replies in the declared format) may attach it first."""
    from .protocol import Judging

    entry = _entry(spec.backend)
    module = importlib.import_module(_absolute(entry.module, entry.plugin), __package__)
    judge: Judge = getattr(module, entry.cls)(spec, judge_id(spec), seed)
    if not isinstance(getattr(judge, "protocol", None), Judging):
        judge.protocol = Judging.of(spec)
    return judge


__all__ = [
    "BACKENDS", "ORDERS", "Backend", "Capabilities", "FatalJudgeError", "Judge", "JudgeReply", "JudgeRequest",
    "Order", "RejectedError", "RetryableError", "build", "capabilities", "check", "judge_id", "known", "names",
    "register",
]
