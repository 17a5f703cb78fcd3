"""One contract, every in-process backend: what each ``Judge`` the registry builds must do,
parametrised from ``babelrun.judges.BACKENDS`` (the HTTP providers' side of the same contract is
test_providers.py, against the fake server). A newly registered backend fails
``test_every_registered_backend_is_covered`` until it gets a case here (or in the HTTP suite),
or is listed in ``EXEMPT`` with a reason.

The contract: ``build(spec, seed)`` gives an object with ``spec``, ``judge_id``, ``judge`` and
``aclose``; ``judge(request)`` returns a ``JudgeReply`` whose ``raw`` is text; the same request
gets the same reply, and concurrent requests each get their own (a micro-batcher must not mix
them up); ``tokens_in``, where reported, counts the request's messages; a failure is raised as
one of the engine's classified errors (``RetryableError``, ``RejectedError``,
``FatalJudgeError``) with a ``kind``; ``aclose`` may be called twice; and through a whole audit,
every call is recorded with its raw text."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import anyio
import msgspec
import pytest

from babelrun import judges
from babelrun.core.items import Item
from babelrun.errors import FatalJudgeError, RejectedError, RetryableError
from babelrun.judges import JudgeReply, JudgeRequest, build, judge_id, judge_spec
from babelrun.judges import rule as rules
from babelrun.spec import JudgeSpec
from babelrun.store import log
from helpers import needs_llama_cpp, quiet_audit, write_manifest
from test_providers import HTTP_PROVIDERS

CLASSIFIED = (RetryableError, RejectedError, FatalJudgeError)


def reply_by_length(request: JudgeRequest) -> dict:
    """A ``backend: python`` judge for the contract: the longer answer, read from the messages."""
    text = request.messages[-1]["content"]
    a, b = text.split("[Answer B]", 1) if "[Answer B]" in text else (text, "")
    return {"verdict": "A" if len(a) >= len(b) else "B", "raw": f"longer: {len(a)} vs {len(b)}"}


def reply_boom(request: JudgeRequest) -> str:
    raise ValueError("the user's judge failed")


def _needs(*modules: str) -> None:
    for name in modules:
        pytest.importorskip(name, reason=f"{name} is not installed (pip install babelrun[local])")


@dataclass(frozen=True)
class Case:
    """How to build a working judge of a backend, and one that fails, and the failure's class."""

    working: Callable[[Path], dict]  # tmp_path -> a judge spec (as a manifest writes it)
    failing: Callable[[Path], dict] | None  # None: the backend has no way to fail a call
    error: tuple[type[Exception], str] | None = None  # the class and kind ``failing`` raises
    why_no_failure: str = ""
    # Why a batch's replies may differ from one-at-a-time replies in their text ("" : they may
    # not); routing (each request gets its own reply) is then held where the numerics are exact.
    batched_numerics: str = ""


def _llamacpp(tmp_path: Path) -> dict:
    needs_llama_cpp()
    return {"name": "j", "backend": "llamacpp", "model": "gemma3-270m", "max_tokens": 2, "batch_size": 4,
            "max_wait_ms": 50, "threads": 2}


def _mlx(tmp_path: Path) -> dict:
    _needs("mlx.core", "mlx_lm", "tokenizers")
    from helpers import tiny_mlx_model

    return {"name": "j", "backend": "mlx", "model": str(tiny_mlx_model(tmp_path / "tiny")), "max_tokens": 2,
            "batch_size": 4, "max_wait_ms": 50}


rules.register("contract-boom", lambda prompt, answer: 1 / 0)


def _replay(tmp_path: Path, empty: bool = False) -> dict:
    """A replay file with a verdict for every bundled English reference and the suite's own
    items (``r0``…), keyed by reference id and order; ``empty``: a file for another id only."""
    from babelrun.corpus import read
    from babelrun.spec import BundledSource

    ids = [] if empty else [f"r{n}" for n in range(3)] + [r.ref_id for r in read([BundledSource()]) if r.lang == "en"]
    rows = [{"id": "elsewhere", "order": "ref_first", "verdict": "A"}] + [
        {"id": i, "order": order, "verdict": "A" if (len(i) + k) % 2 else "B", "raw": f"verdict for {i}, {order}"}
        for i in ids for k, order in enumerate(("ref_first", "pert_first"))]
    path = tmp_path / ("empty.jsonl" if empty else "verdicts.jsonl")
    path.write_text("".join(msgspec.json.encode(r).decode() + "\n" for r in rows))
    return {"name": "j", "backend": "replay", "replay": {"path": str(path)}}


CASES: dict[str, Case] = {
    "simulated": Case(lambda _: {"name": "j", "backend": "simulated"}, None,
                      why_no_failure="its faults are off-format replies (invalid_rate), which the parser reads, "
                                     "not failed calls"),
    "llamacpp": Case(_llamacpp, lambda p: {"name": "j", "backend": "llamacpp", "model": str(p / "missing.gguf")},
                     (FatalJudgeError, "not_found"),
                     batched_numerics="llama.cpp's numerics depend on the batch (a shared unified KV cache "
                     "and its kernels): a near-tie greedy token can differ from one-at-a-time; routing is "
                     "held by tests/unit/test_local_batcher.py and the multi-sequence verdicts by "
                     "tests/e2e/test_llamacpp.py's agreement test, in one fixed batch"),
    "mlx": Case(_mlx, lambda p: {"name": "j", "backend": "mlx", "model": str(p / "missing")},
                (FatalJudgeError, "not_found")),
    "python": Case(lambda _: {"name": "j", "backend": "python", "callable": f"{__name__}:reply_by_length"},
                   lambda _: {"name": "j", "backend": "python", "callable": f"{__name__}:reply_boom"},
                   (RejectedError, "callable_error")),
    "rule": Case(lambda _: {"name": "j", "backend": "rule", "rule": {"kind": "length"}},
                 lambda _: {"name": "j", "backend": "rule", "rule": {"kind": "python", "function": "contract-boom"}},
                 (RejectedError, "rule_error")),
    "replay": Case(_replay, lambda p: _replay(p, empty=True), (RejectedError, "not_in_replay")),
}
# Registered backends this suite does not build, and why (none today).
EXEMPT: dict[str, str] = {}


def test_every_registered_backend_is_covered():
    in_process = {n for n, b in judges.BACKENDS.items() if b.capabilities.in_process}
    assert in_process == set(CASES) | set(EXEMPT), "give a new in-process backend a Case, or an EXEMPT reason"
    remote = {n: b.module for n, b in judges.BACKENDS.items() if b.capabilities.remote}
    # Every HTTP backend is one of the wire formats the HTTP contract suite runs over.
    assert set(remote.values()) <= set(HTTP_PROVIDERS) | set(EXEMPT), remote
    assert set(remote) | in_process == set(judges.BACKENDS)


@pytest.fixture(params=sorted(CASES))
def backend(request) -> str:
    return request.param


def _spec(fields: dict) -> JudgeSpec:
    return judge_spec(**fields)


def _item(n: int = 0, pad: int = 0) -> Item:
    reference = f"The quick brown fox jumps over the lazy dog, number {n}." + " and then some" * pad
    perturbed = "The quick brown fox."
    return Item(f"x{n}", "text", "en", f"r{n}", "Describe the fox.", reference, perturbed, "truncate", 0.5,
                len(reference), len(perturbed))


def _request(item: Item, order: str = "ref_first", extra: str = "") -> JudgeRequest:
    a, b = (item.reference, item.perturbed) if order == "ref_first" else (item.perturbed, item.reference)
    content = (f"Which answer is better? Answer A, B or tie.{extra}\n\n[Question]\n{item.prompt}\n\n"
               f"[Answer A]\n{a}\n[End of Answer A]\n\n[Answer B]\n{b}\n[End of Answer B]")
    return JudgeRequest(item, order, [{"role": "user", "content": content}])


def _run(judge, *requests: JudgeRequest) -> list[JudgeReply]:
    """Judge ``requests`` concurrently, then close the judge."""
    replies: list[JudgeReply | None] = [None] * len(requests)

    async def go():
        async def one(i, r):
            replies[i] = await judge.judge(r)

        try:
            if len(requests) == 1:  # its error as raised, not in an exception group
                await one(0, requests[0])
            else:
                async with anyio.create_task_group() as tg:
                    for i, r in enumerate(requests):
                        tg.start_soon(one, i, r)
        finally:
            await judge.aclose()

    anyio.run(go)
    return replies


def test_built_from_the_registry_with_the_judge_protocol(backend, tmp_path):
    spec = _spec(CASES[backend].working(tmp_path))
    judge = build(spec, 0)
    assert judge.spec == spec and judge.judge_id == judge_id(spec)
    assert inspect.iscoroutinefunction(judge.judge) and inspect.iscoroutinefunction(judge.aclose)
    anyio.run(judge.aclose)
    anyio.run(judge.aclose)  # closing twice is harmless


def test_a_request_gets_a_reply_with_its_raw_text(backend, tmp_path):
    (reply,) = _run(build(_spec(CASES[backend].working(tmp_path)), 0), _request(_item()))
    assert isinstance(reply, JudgeReply) and isinstance(reply.raw, str) and reply.raw
    assert reply.slot in (None, "A", "B", "tie")
    assert reply.probs is None or (len(reply.probs) == 3 and abs(sum(reply.probs) - 1) < 1e-6)


def test_concurrent_requests_each_get_their_own_reply(backend, tmp_path):
    if CASES[backend].batched_numerics:
        pytest.skip(f"{backend}: {CASES[backend].batched_numerics}")
    spec = _spec(CASES[backend].working(tmp_path))
    requests = [_request(_item(n), order) for n in range(3) for order in ("ref_first", "pert_first")]
    together = _run(build(spec, 0), *requests)
    alone = [_run(build(spec, 0), r)[0] for r in requests]
    assert [(r.raw, r.slot, r.score) for r in together] == [(r.raw, r.slot, r.score) for r in alone]


def test_tokens_in_counts_the_messages(backend, tmp_path):
    spec = _spec(CASES[backend].working(tmp_path))
    short, long = _run(build(spec, 0), _request(_item()), _request(_item(), extra=" Think it over." * 40))
    assert short.tokens_in in (None, 0) or long.tokens_in > short.tokens_in  # 0: it reads no messages
    assert (short.tokens_in is None) == (long.tokens_in is None)


def test_a_failed_call_raises_a_classified_error(backend, tmp_path):
    case = CASES[backend]
    if case.failing is None:
        assert case.why_no_failure
        pytest.skip(f"{backend}: {case.why_no_failure}")
    with pytest.raises(CLASSIFIED) as e:
        _run(build(_spec(case.failing(tmp_path)), 0), _request(_item()))
    cls, kind = case.error
    assert type(e.value) is cls and e.value.kind == kind


def test_an_audit_records_every_call_with_its_raw_text(backend, tmp_path):
    spec = CASES[backend].working(tmp_path)
    path = write_manifest(tmp_path, [spec], corpus={"sources": [{"kind": "bundled"}], "languages": ["en"],
                                                    "references_per_language": 2},
                          perturbations=[{"name": "truncate", "severities": [0.6]}], scoring={"bootstrap": 50})
    result = quiet_audit(path)
    records = list(log.read(tmp_path / "run"))
    assert result.exit_code == 0 and len(records) == result.planned_calls == 4
    assert all(r.status == "ok" and r.raw for r in records)
    assert result.cards.judges[0].overall.presentations == 4
