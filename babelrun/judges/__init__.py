"""Judge backends behind one protocol (``protocol.Judge``), each registered once with what it can do.

A backend is one module — its class and its options struct (a ``JudgeOptions`` subclass:
the manifest fields of that backend alone) — and one ``register`` line here: its name, where
its class lives, its ``Capabilities`` and the name of its options struct. ``import
babelrun.judges`` imports no backend module; decoding a manifest imports the judge's (light:
its HTTP client or model runtime is imported when a judge is built). Everything else reads the
registry (``registry.py``): the manifest's decoding and checks (the backend's own fields, soft
verdicts, batch APIs), the rate limiter (in-process backends have no provider account), the
executor. Nothing above this module keeps a list of backend names or of their options.

OpenAI-compatible providers are data (``presets.py``): each preset registers the ``openai``
class with the preset's own capabilities.

Third-party backends are found through the entry-point group ``babelrun.judges`` (looked up
the first time a name is not registered here): an entry point named NAME loads a class whose
constructor takes ``(spec, judge_id, seed)`` and that declares ``capabilities`` (a
``Capabilities``) and, for fields of its own, ``options`` (its ``JudgeOptions`` subclass) as
class attributes.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from ..spec import JudgeSpec
from ..spec.options import set_options_resolver
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
from .options import BatchApiOptions, LocalOptions, batch_of, local_of
from .presets import PRESETS
from .protocol import Judge
from .registry import (
    BACKENDS,
    ENTRY_POINTS,
    Backend,
    Capabilities,
    _absolute,
    _entry,
    capabilities,
    judge_spec,
    known,
    names,
    option_fields,
    options_of,
    options_type,
    owners,
    register,
    with_options,
)


def _remote(*, soft: bool, batch_api: bool = False, model_required: bool = True) -> Capabilities:
    return Capabilities(soft=soft, batch_api=batch_api, remote=True, model_required=model_required)




register("simulated", "simulated", "SimulatedJudge", Capabilities(soft=True, in_process=True), checks="simulated",
         options="SimulatedOptions")
register("llamacpp", "llamacpp", "LlamaCppJudge", Capabilities(soft=True, in_process=True), checks="llamacpp",
         options="LlamaCppOptions")
register("mlx", "mlx", "MlxJudge", Capabilities(in_process=True), checks="mlx", options="MlxOptions")
register("anthropic", "anthropic", "AnthropicJudge", _remote(soft=False, batch_api=True), options="AnthropicOptions")
register("gemini", "gemini", "GeminiJudge", _remote(soft=False), options="GeminiOptions")
# Judges that are code: the user's function, called in this process (python.py).
register("python", "python", "PythonJudge", Capabilities(in_process=True), checks="python", options="PythonOptions")
for _name, _preset in PRESETS.items():  # openai itself and the OpenAI-compatible providers
    register(_name, "openai", "OpenAIJudge", _remote(soft=_preset.logprobs, batch_api=_preset.batch_api,
                                                     model_required=_preset.model_required),
             checks="openai", options="OpenAIOptions")
# A deterministic scorer, no model: a cascade's cheap triage stage (rule.py).
register("rule", "rule", "RuleJudge", Capabilities(in_process=True), checks="rule", options="RuleOptions")
# Verdicts a judge already gave, read from a file: no call is made (replay.py).
register("replay", "replay", "ReplayJudge", Capabilities(in_process=True), checks="replay", options="ReplayOptions")


set_options_resolver(options_type)


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
    "BACKENDS", "ENTRY_POINTS", "ORDERS", "Backend", "BatchApiOptions", "Capabilities", "LocalOptions",
    "FatalJudgeError", "Judge", "JudgeReply", "JudgeRequest", "Order", "RejectedError", "RetryableError",
    "batch_of", "build", "capabilities", "check", "judge_id", "judge_spec", "known", "local_of", "names",
    "option_fields", "options_of", "options_type", "owners", "register", "with_options",
]
