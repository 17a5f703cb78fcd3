"""Judges that are code: ``backend: python`` calls the user's function with each request.

``callable: "package.module:function"`` names a function, sync or async, that takes one
``JudgeRequest`` (``messages``: the rendered template; ``item``: the item's attributes —
prompt, lang, perturbation, reference, perturbed, reference_answer; ``order``: the slot order,
or for a pointwise judge the answer shown, ``reference`` or ``degraded``) and returns:

- the reply text (``str``): read like any judge's, by the strict parser or ``verdict:``;
- a mapping with ``verdict`` (``A``, ``B`` or ``tie``; pairwise) or ``score`` (pointwise), and
  optionally ``raw`` (kept in the log), ``probs`` ([P(A), P(B), P(tie)]), ``tokens_in``,
  ``tokens_out`` and ``model``;
- or a ``JudgeReply``.

A sync function runs in a worker thread (the event loop never blocks); ``concurrency`` calls
run at once. Errors it raises follow the engine's rules: babelrun's own ``RetryableError`` /
``RejectedError`` / ``FatalJudgeError`` as they are; ``TimeoutError`` and ``ConnectionError``
are retried; anything else fails that call (recorded, never counted as done) and, after
``max_consecutive_failures`` in a row, stops the judge. A return value of another shape is a
failed call too. Naming a callable in a manifest runs that code: it is the user's own.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from typing import Any

import anyio

from ..spec import JudgeSpec
from .base import FatalJudgeError, JudgeReply, JudgeRequest, RejectedError, RetryableError


def load(target: str) -> Callable[..., Any]:
    """The object ``package.module:attr.path`` names; FatalJudgeError when it cannot be had."""
    module_name, _, attr = target.partition(":")
    try:
        obj = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as e:
        raise FatalJudgeError("not_found", f"cannot load callable {target!r}: {e}") from None
    if not callable(obj):
        raise FatalJudgeError("not_found", f"{target!r} is not callable")
    return obj


def to_reply(value: object) -> JudgeReply:
    """A callable's return value as a JudgeReply (module docstring)."""
    if isinstance(value, JudgeReply):
        return value
    if isinstance(value, str):
        return JudgeReply(raw=value)
    if isinstance(value, Mapping):
        slot, score = value.get("verdict"), value.get("score")
        if slot is not None and slot not in ("A", "B", "tie"):
            raise RejectedError("bad_response", f"verdict must be A, B or tie, got {str(slot)[:40]!r}")
        if score is not None and (isinstance(score, bool) or not isinstance(score, int | float)):
            raise RejectedError("bad_response", f"score must be a number, got {type(score).__name__}")
        probs = value.get("probs")
        if probs is not None:
            probs = tuple(float(p) for p in probs)
            if len(probs) != 3:
                raise RejectedError("bad_response", "probs must be [P(A), P(B), P(tie)]")
        raw = value.get("raw")
        return JudgeReply(raw=str(raw if raw is not None else (slot if slot is not None else score)),
                          served_model=value.get("model"), tokens_in=value.get("tokens_in"),
                          tokens_out=value.get("tokens_out"), probs=probs, slot=slot,
                          score=None if score is None else float(score))
    raise RejectedError("bad_response", f"the callable returned a {type(value).__name__}: expected str, "
                                        "a mapping with verdict/score, or a JudgeReply")


class PythonJudge:
    def __init__(self, spec: JudgeSpec, judge_id: str, seed: int = 0):
        self.spec = spec
        self.judge_id = judge_id
        self._fn: Callable[..., Any] | None = None
        self._async = False

    def _function(self) -> Callable[..., Any]:
        if self._fn is None:
            assert self.spec.callable is not None  # check() rejects a python judge without one before build
            self._fn = load(self.spec.callable)
            self._async = inspect.iscoroutinefunction(self._fn) or inspect.iscoroutinefunction(
                type(self._fn).__call__)  # an object with an async __call__
        return self._fn

    async def judge(self, request: JudgeRequest) -> JudgeReply:
        fn = self._function()
        try:
            if self._async:
                value = await fn(request)
            else:
                value = await anyio.to_thread.run_sync(fn, request)
        except (RetryableError, RejectedError, FatalJudgeError):
            raise
        except (TimeoutError, ConnectionError) as e:
            raise RetryableError("timeout" if isinstance(e, TimeoutError) else "connection",
                                 f"{type(e).__name__}: {e}"[:300]) from None
        except Exception as e:  # the user's code failed this call: recorded, not retried
            raise RejectedError("callable_error", f"{type(e).__name__}: {e}"[:300]) from None
        return to_reply(value)

    async def aclose(self) -> None:
        pass


def check(spec: JudgeSpec, environ: Mapping[str, str]) -> tuple[str, str] | None:
    """The manifest's check of a python judge: a callable named (imported only at the audit)."""
    if spec.callable is None:
        return "callable", f"judge {spec.name!r}: the python backend needs callable: 'package.module:function'"
    return None
