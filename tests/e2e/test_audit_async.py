"""``audit_async`` is cancellable: a cancel drains the calls in flight, releases the run lock,
and a rerun in the same process resumes where it stopped."""

from __future__ import annotations

import asyncio

import pytest

import babelrun
from babelrun.testing import FakeJudgeServer
from helpers import log_lines, quiet_progress, write_manifest


async def test_cancelled_audit_async_drains_and_resumes_in_the_same_process(tmp_path):
    corpus = {"sources": [{"kind": "bundled"}], "languages": ["en", "hi", "zh", "sw"], "references_per_language": 6}
    with FakeJudgeServer(latency_s=0.02) as server:
        path = write_manifest(tmp_path, [{"name": "remote", "backend": "openai", "model": "m",
                                          "endpoint": server.url, "concurrency": 4}],
                              corpus=corpus, scoring={"bootstrap": 0})
        task = asyncio.create_task(babelrun.audit_async(str(path), progress=quiet_progress()))
        for _ in range(2000):  # until some calls were made (bounded: 20 s)
            await asyncio.sleep(0.01)
            if server.snapshot()["requests"] >= 40:
                break
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        at_cancel = server.snapshot()["requests"]
        await asyncio.sleep(1.0)
        assert server.snapshot()["requests"] == at_cancel  # no call left running
        written = log_lines(tmp_path / "run")
        assert 40 <= written <= at_cancel  # the drained calls were written

        # The lock is released: a rerun in this process resumes (no RunDirBusy for its own pid).
        result = await babelrun.audit_async(str(path), progress=quiet_progress())
        total = server.snapshot()["requests"]
    assert result.exit_code == 0 and not result.interrupted
    assert result.already_done == written and result.new_records == result.planned_calls - written
    assert total == result.planned_calls  # every presentation asked once, across both runs
    assert written < result.planned_calls  # the cancel did stop the first run early
