"""Judge backends behind one protocol (``base.Judge``)."""

from __future__ import annotations

from ..manifest import JudgeSpec
from .base import (
    ORDERS,
    FatalJudgeError,
    Judge,
    JudgeReply,
    JudgeRequest,
    Order,
    RejectedError,
    RetryableError,
    judge_id,
)
from .presets import PRESETS

# backend name -> (module, class); a module is imported when a judge first needs it.
BACKENDS = {
    "simulated": ("simulated", "SimulatedJudge"),
    "llamacpp": ("llamacpp", "LlamaCppJudge"),
    "mlx": ("mlx", "MlxJudge"),
    "openai": ("openai", "OpenAIJudge"),
    "anthropic": ("anthropic", "AnthropicJudge"),
    "gemini": ("gemini", "GeminiJudge"),
}
BACKENDS.update({name: ("openai", "OpenAIJudge") for name in PRESETS})  # OpenAI-compatible


def build(spec: JudgeSpec, seed: int) -> Judge:
    """The backend object for a judge spec. Every backend's constructor takes
    ``(spec, judge_id, seed)``."""
    import importlib

    module, cls = BACKENDS[spec.backend]
    backend = getattr(importlib.import_module(f".{module}", __package__), cls)
    return backend(spec, judge_id(spec), seed)


__all__ = [
    "ORDERS", "FatalJudgeError", "Judge", "JudgeReply", "JudgeRequest", "Order",
    "RejectedError", "RetryableError", "build", "judge_id",
]
