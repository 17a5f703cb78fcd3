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

A sync function runs on a thread of its own (the event loop never blocks); ``concurrency`` calls
run at once. ``timeout_s`` bounds every call, sync or async: past it the call is a ``timeout``
(retried), and a sync call that never returns is abandoned, never waited on: a drain (the
first Ctrl-C / SIGTERM) ends the calls in flight without a record, and the process exits.
Errors it raises follow the engine's rules: babelrun's own ``RetryableError`` /
``RejectedError`` / ``FatalJudgeError`` as they are; ``TimeoutError`` and ``ConnectionError``
are retried; anything else fails that call (recorded, never counted as done) and, after
``max_consecutive_failures`` in a row, stops the judge. A return value of another shape, or a
field of the wrong type (``tokens_in: "lots"``, ``model: 12345``), is a failed call too
(``bad_response``, one line per bad field); so is ``SystemExit`` raised by the function.
Naming a callable in a manifest runs that code: it is the user's own.
"""

from __future__ import annotations

import importlib
import inspect
import math
import re
import threading
from collections.abc import Callable, Mapping
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel

from ..spec import JudgeSpec
from .base import FatalJudgeError, JudgeReply, JudgeRequest, RejectedError, RetryableError
from .options import CodeOptions, set_fields
from .registry import options_of


class PythonOptions(CodeOptions, frozen=True):
    """A python judge's options: ``callable``, "package.module:function", called with each
    JudgeRequest (the manifest names code, never holds it), and ``version`` (``CodeOptions``).
    The judge_id holds the callable's name and its code: a hash of the named module's source
    file (found, not imported), or the declared version."""

    callable: str | None = None

    def identity(self) -> dict[str, Any]:
        if self.callable is None:
            return {}
        return {**set_fields(self, ("callable",)), "code": self.code(self.callable.partition(":")[0])}


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


_FIELDS = ("verdict", "score", "raw", "probs", "tokens_in", "tokens_out", "model")


def _problems(value: Mapping[Any, Any]) -> list[str]:
    """One line per field of a returned mapping that is not of its documented type."""
    out = []
    slot, score, probs = value.get("verdict"), value.get("score"), value.get("probs")
    if slot is not None and slot not in ("A", "B", "tie"):
        out.append(f"verdict must be A, B or tie, got {str(slot)[:40]!r}")
    if score is not None and not _number(score):
        out.append(f"score must be a finite number, got {_shown(score)}")
    if probs is not None and not (isinstance(probs, list | tuple) and len(probs) == 3
                                  and all(_number(p) and 0 <= p <= 1 for p in probs)):
        out.append(f"probs must be [P(A), P(B), P(tie)], three numbers in [0, 1], got {_shown(probs)}")
    for field in ("tokens_in", "tokens_out"):
        tokens = value.get(field)
        if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0):
            out.append(f"{field} must be a whole number >= 0, got {_shown(tokens)}")
    for field in ("raw", "model"):
        text = value.get(field)
        if text is not None and not isinstance(text, str):
            out.append(f"{field} must be text, got {_shown(text)}")
    return out


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _shown(value: object) -> str:
    return f"{type(value).__name__} {repr(value)[:40]}"


def to_reply(value: object) -> JudgeReply:
    """A callable's return value as a JudgeReply (module docstring); a value of another shape,
    or a mapping with a field of the wrong type, is ``RejectedError`` (``bad_response``) naming
    each bad field on a line of its own."""
    if isinstance(value, JudgeReply):  # a struct is not checked when built: check it as a mapping
        wrong = _problems({"verdict": value.slot, "score": value.score, "probs": value.probs, "raw": value.raw,
                           "tokens_in": value.tokens_in, "tokens_out": value.tokens_out,
                           "model": value.served_model})
        if wrong or not isinstance(value.raw, str):
            raise RejectedError("bad_response", "the callable's reply: " + "\n".join(wrong or ["raw must be text"]))
        return value
    if isinstance(value, str):
        return JudgeReply(raw=value)
    if isinstance(value, Mapping):
        wrong = _problems(value)
        if wrong:
            raise RejectedError("bad_response", "the callable's reply: " + "\n".join(wrong))
        slot, score, probs, raw = value.get("verdict"), value.get("score"), value.get("probs"), value.get("raw")
        return JudgeReply(raw=raw if raw is not None else str(slot if slot is not None else score),
                          served_model=value.get("model"), tokens_in=value.get("tokens_in"),
                          tokens_out=value.get("tokens_out"),
                          probs=None if probs is None else tuple(float(p) for p in probs),  # type: ignore[arg-type]
                          slot=slot, score=None if score is None else float(score))
    raise RejectedError("bad_response", f"the callable returned a {type(value).__name__}: expected str, "
                                        "a mapping with verdict/score, or a JudgeReply")


async def _in_thread(fn: Callable[..., Any], request: JudgeRequest, timeout_s: float) -> Any:
    """``fn(request)`` on a daemon thread of its own, awaited at most ``timeout_s``
    (``TimeoutError`` past it). A call that never returns is abandoned, not joined: the thread
    cannot be stopped, but nothing waits on it, neither the run nor the interpreter's exit."""
    done = anyio.Event()
    box: dict[str, Any] = {}
    token = anyio.lowlevel.current_token()

    def target() -> None:
        try:
            box["value"] = fn(request)
        except BaseException as e:  # noqa: BLE001 (SystemExit too: carried to the loop, recorded there)
            box["error"] = e
        try:
            anyio.from_thread.run_sync(done.set, token=token)
        except Exception:  # noqa: BLE001 (the run has ended: nobody is waiting)
            pass

    threading.Thread(target=target, name="babelrun-python-judge", daemon=True).start()
    with anyio.fail_after(timeout_s):
        await done.wait()
    if "error" in box:
        raise box["error"]
    return box.get("value")


class PythonJudge:
    # A call may never return (a sync function stuck): a drain abandons it (engine.pipeline).
    abandon_on_drain = True

    def __init__(self, spec: JudgeSpec, judge_id: str, seed: int = 0):
        self.spec = spec
        self.judge_id = judge_id
        self._fn: Callable[..., Any] | None = None
        self._async = False

    def _function(self) -> Callable[..., Any]:
        if self._fn is None:
            name = options_of(self.spec, PythonOptions).callable
            assert name is not None  # check() rejects a python judge without one before build
            self._fn = load(name)
            self._async = inspect.iscoroutinefunction(self._fn) or inspect.iscoroutinefunction(
                type(self._fn).__call__)  # an object with an async __call__
        return self._fn

    async def judge(self, request: JudgeRequest) -> JudgeReply:
        fn = self._function()
        try:
            if self._async:
                with anyio.fail_after(self.spec.timeout_s):
                    value = await fn(request)
            else:
                value = await _in_thread(fn, request, self.spec.timeout_s)
        except (RetryableError, RejectedError, FatalJudgeError):
            raise
        except (TimeoutError, ConnectionError) as e:
            raise RetryableError("timeout" if isinstance(e, TimeoutError) else "connection",
                                 f"{type(e).__name__}: {e or f'no reply in {self.spec.timeout_s:g} s'}"[:300]) from None
        except (Exception, SystemExit) as e:  # the user's code failed this call: recorded, not retried
            raise RejectedError("callable_error", f"{type(e).__name__}: {e}"[:300]) from None
        return to_reply(value)

    async def aclose(self) -> None:
        pass


def check(spec: JudgeSpec, environ: Mapping[str, str]) -> tuple[str, str] | None:
    """The manifest's check of a python judge: a callable named (imported only at the audit)."""
    name = options_of(spec, PythonOptions).callable
    if name is None:
        return "callable", f"judge {spec.name!r}: the python backend needs callable: 'package.module:function'"
    if not re.fullmatch(r"[\w.]+:[\w.]+", name):
        return "callable", f"judge {spec.name!r}: expected 'package.module:function'"
    return None
