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


@pytest.mark.parametrize(("n", "size", "batches", "fill"), [(10, 4, 3, 10 / 12), (8, 8, 1, 1.0), (3, 1, 3, 1.0)])
def test_the_batching_counters_say_how_full_the_batches_ran(n, size, batches, fill):
    judge, requests = _judge(size), _requests(5)[:n]

    async def go():
        async with anyio.create_task_group() as tg:
            for r in requests:
                tg.start_soon(judge.judge, r)

    anyio.run(go)
    counted = judge.batching()
    assert (counted.batch_size, counted.batches, counted.requests) == (size, batches, n)
    assert counted.fill() == pytest.approx(fill)
    assert counted.prompt_tokens == counted.evaluated == counted.reused == 0  # Echo reads no tokens


def test_batching_counters_of_several_processes_add_up():
    from babelrun.store.stats import LocalBatching, _local_total

    a, b = LocalBatching(8, 2, 12, 1000, 700, 300, 9), LocalBatching(8, 1, 8, 400, 100, 300, 7)
    total = _local_total([a, None, b])
    assert total == LocalBatching(8, 3, 20, 1400, 800, 600, 16)
    assert total.fill() == pytest.approx(20 / 24)
    assert _local_total([None, None]) is None


class Warmed(Echo):
    """An echo whose warm-up waits for ``go`` and whose calls and warm-up say in which order they ran."""

    def __init__(self, *args, fails=False):
        super().__init__(*args)
        self.order, self.fails = [], fails
        self.go = __import__("threading").Event()

    def _warm(self):
        assert self.go.wait(60)  # set by the test once a batch is waiting for the warm-up
        self.order.append("warm")
        if self.fails:
            raise RuntimeError("no model")  # the first batch's to raise, not the warm-up's

    def _run_batch(self, requests):
        self.order.append("batch")
        return super()._run_batch(requests)


def _warmed(fails=False):
    return Warmed(judge_spec(name="w", backend="simulated", batch_size=2, max_wait_ms=0), "id", fails=fails)


@pytest.mark.parametrize("fails", [False, True])
def test_a_first_batch_waits_for_the_warm_up_and_a_failed_warm_up_only_means_none(fails):
    from babelrun.judges.local import warm_up

    judge, requests = _warmed(fails), _requests(1)
    warmed = warm_up([judge, Echo(judge_spec(name="e", backend="simulated"), "id")])  # Echo: nothing to warm
    got = []

    async def go():
        async with anyio.create_task_group() as tg:
            async def one(r):
                got.append((await judge.judge(r)).raw)
            for r in requests:
                tg.start_soon(one, r)
            while not judge.batches:  # the batch is cut and handed to the model thread …
                await anyio.sleep(0)
            judge.go.set()  # … which is waiting for the warm-up that this lets finish

    anyio.run(go)
    warmed.result(60)
    assert judge.order == ["warm", "batch"] and len(got) == 2


def test_no_warm_up_without_a_judge_to_warm_and_none_once_a_batch_has_run():
    from babelrun.judges.local import warm_up

    assert warm_up([_judge(2), object()]) is None  # nothing overrides _warm
    judge = _warmed()
    judge.go.set()
    anyio.run(judge.judge, _requests(1)[0])
    assert warm_up([judge]) is None  # the warm-up would have changed the state later batches read
    assert judge.order == ["batch"]


class Threads(Warmed):
    """A warmed echo that notes the OS thread each warm-up and batch ran on."""

    def __init__(self, *args):
        super().__init__(*args)
        self.threads = set()
        self.go.set()

    def _warm(self):
        self.threads.add(__import__("threading").get_ident())
        super()._warm()

    def _run_batch(self, requests):
        self.threads.add(__import__("threading").get_ident())
        return super()._run_batch(requests)


def test_the_warm_up_and_every_batch_run_on_one_thread_whatever_else_uses_the_worker_threads():
    # llama.cpp's CPU decode is an OpenMP region, whose thread team belongs to the calling
    # thread: a model handed from caller to caller waits on the last caller's team.
    from babelrun.judges.local import warm_up

    judge = Threads(judge_spec(name="t", backend="simulated", batch_size=2, max_wait_ms=0), "id")
    requests = _requests(8)

    async def go():
        warm_up([judge]).result(60)
        async with anyio.create_task_group() as tg:
            for r in requests:  # every batch beside other work on anyio's worker threads
                tg.start_soon(judge.judge, r)
                for _ in range(3):
                    tg.start_soon(anyio.to_thread.run_sync, __import__("time").sleep, 0.001)
            await anyio.sleep(0)

    anyio.run(go)
    assert len(judge.batches) >= 4 and judge.order[0] == "warm"
    assert len(judge.threads) == 1 and __import__("threading").get_ident() not in judge.threads
    anyio.run(judge.aclose)


def test_a_model_thread_closed_and_given_a_job_again_runs_it_on_a_new_thread():
    import threading

    from babelrun.judges.local import ModelThread

    owner = Echo(judge_spec(name="e", backend="simulated"), "id")
    jobs = ModelThread(owner, "test")
    first = jobs.call(threading.current_thread)
    jobs.close()  # a judge closed and then used again (its aclose, then another call)
    second = jobs.submit(threading.current_thread).result(30)  # never queued behind the ending thread
    assert first is not second and first.name == second.name == "test"
    jobs.close()
    first.join(30)
    second.join(30)
    assert not first.is_alive() and not second.is_alive()
