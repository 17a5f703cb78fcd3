"""Option groups several backends share, as bases their own options structs extend.

A backend's options are a ``JudgeOptions`` subclass in its own module, named on its
``register`` line; these are the groups more than one backend has: the in-process
micro-batcher and runtime (``LocalOptions``), reasoning models (``ReasoningOptions``) and a
provider's batch API (``BatchApiOptions``). Light: msgspec only, so decoding a manifest loads
no HTTP client and no model runtime.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from ..spec import MAX_BATCH_SIZE, MAX_POLL_S, MAX_TIMEOUT_S, MAX_WORKERS, JudgeOptions, JudgeSpec, PositiveInt
from .registry import options_of


def set_fields(options: JudgeOptions, names: tuple[str, ...]) -> dict[str, Any]:
    """The fields among ``names`` set (not None, not False, not empty), for ``identity``:
    options added after judge ids were first published join the identity only when set, so
    no id changes."""
    out: dict[str, Any] = {}
    for name in names:
        value = getattr(options, name)
        if value not in (None, False) and not (isinstance(value, str | dict | list | tuple) and not value):
            out[name] = msgspec.to_builtins(value)
    return out


class CodeOptions(JudgeOptions, frozen=True):
    """A judge that is code (``backend: python``, a ``kind: python`` rule): its code is part of
    the judge_id (``identity.code_identity``), as a hash of its module's source file or, when
    the user declares one, as ``version`` (code spread over several modules: say when it changed)."""

    version: Annotated[str, msgspec.Meta(min_length=1, max_length=200)] | None = None

    def code(self, module: str | None) -> dict[str, str]:
        """What the code of the function defined in ``module`` adds to the identity."""
        from .identity import code_identity

        return code_identity(module, self.version)


class LocalOptions(JudgeOptions, frozen=True):
    """A model run in this process behind a micro-batcher (``local.LocalJudge``): requests
    collected into one batch (``batch_size`` at most; the first waits ``max_wait_ms``), CPU
    ``threads`` (the runtime's default when unset), the ``context`` window in tokens, and under
    ``executor: ray`` this many ``replicas`` (Ray actors, each holding the model)."""

    batch_size: Annotated[int, msgspec.Meta(ge=1, le=MAX_BATCH_SIZE)] = 8
    max_wait_ms: Annotated[float, msgspec.Meta(ge=0, le=MAX_TIMEOUT_S * 1000)] = 20.0
    threads: Annotated[int, msgspec.Meta(ge=1, le=MAX_WORKERS)] | None = None
    context: PositiveInt = 4096
    replicas: Annotated[int, msgspec.Meta(ge=1, le=MAX_WORKERS)] = 1

    def identity(self) -> dict[str, Any]:
        return {}  # how fast verdicts come, not which


class ReasoningOptions(JudgeOptions, frozen=True):
    """Reasoning models: ``max_completion_tokens`` instead of ``max_tokens``, no
    ``temperature`` (OpenAI), a thinking budget (Anthropic, Gemini); ``reasoning_effort`` is sent
    as is and implies ``reasoning``."""

    reasoning: bool = False
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = None

    def identity(self) -> dict[str, Any]:
        return set_fields(self, ("reasoning", "reasoning_effort"))

    def hidden_reasoning(self) -> bool:
        return self.reasoning or self.reasoning_effort is not None


class BatchApiOptions(ReasoningOptions, frozen=True):
    """A provider batch API (``engine/batches.py``): with ``batch``, the pending keys go as one
    batch, polled every ``batch_poll_s`` seconds; an interrupted audit resumes polling it. A
    backend whose capabilities declare no batch API refuses ``batch: true``."""

    batch: bool = False
    batch_poll_s: Annotated[float, msgspec.Meta(gt=0, le=MAX_POLL_S)] = 30.0


def batch_of(spec: JudgeSpec) -> bool:
    """Whether the judge's keys go to its provider's batch API."""
    options = options_of(spec)
    return isinstance(options, BatchApiOptions) and options.batch


def local_of(spec: JudgeSpec) -> LocalOptions:
    """A judge's micro-batcher and runtime options (the defaults for a backend without them)."""
    options = options_of(spec)
    return options if isinstance(options, LocalOptions) else LocalOptions()
