"""The micro-batcher the in-process backends share (judges/local.py), with a model that echoes."""

import anyio
import pytest

import babelrun
from babelrun.judges import JudgeReply, judge_spec
from babelrun.judges.local import LocalJudge
from babelrun.plan import Plan
from helpers import request


class Echo(LocalJudge):
    """Replies with each request's item id; records the batches it ran."""

    def _run_batch(self, requests):
        return [JudgeReply(raw=f"{r.item.item_id}:{r.order}") for r in requests]


def _requests(n):
    refs = babelrun.corpus.select(babelrun.Manifest(name="x", judges=[])).references[:n]
    items = list(Plan(refs, [("truncate", [0.6])], 0).items())
    return [request(item, order)
            for item in items for order in ("ref_first", "pert_first")]


def _judge(batch_size, max_wait_ms=500.0):
    return Echo(judge_spec(name="e", backend="simulated", batch_size=batch_size, max_wait_ms=max_wait_ms), "id")


@pytest.mark.parametrize(("n", "size", "batches"), [(10, 4, [4, 4, 2]), (8, 8, [8]), (3, 1, [1, 1, 1])])
def test_batches_hold_at_most_batch_size_and_every_request_gets_its_own_reply(n, size, batches):
    judge, requests = _judge(size), _requests(5)[:n]
    got = {}

    async def one(r):
        got[(r.item.item_id, r.order)] = (await judge.judge(r)).raw

    async def go():
        async with anyio.create_task_group() as tg:
            for r in requests:
                tg.start_soon(one, r)

    anyio.run(go)
    assert judge.batches == batches  # before: one batch of all that were waiting, whatever batch_size said
    assert got == {(r.item.item_id, r.order): f"{r.item.item_id}:{r.order}" for r in requests}


def test_a_cancelled_caller_does_not_strand_the_others():
    judge, requests = _judge(2, max_wait_ms=50), _requests(3)[:5]
    got = []

    async def one(r):
        got.append((await judge.judge(r)).raw)

    async def go():
        with anyio.fail_after(10):
            await calls()

    async def calls():
        async with anyio.create_task_group() as tg:
            for r in requests[:3]:
                tg.start_soon(one, r)
            with anyio.CancelScope() as doomed:  # the fourth waits in the second batch, then gives up
                doomed.cancel()
                await judge.judge(requests[3])
            tg.start_soon(one, requests[4])

    anyio.run(go)
    assert len(got) == 4 and sum(judge.batches) in (4, 5)
