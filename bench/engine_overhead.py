"""Engine overhead: calls/s through babelrun's engine vs a bare aiohttp loop, same server,
same concurrency, same requests. Prints one ratio (target >= 0.8).

    python bench/engine_overhead.py [--calls 3000] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import anyio
import msgspec

sys.path.insert(0, str(Path(__file__).parent))
from _server import fake_judge  # noqa: E402

from babelrun import corpus, engine, items, judges, log  # noqa: E402
from babelrun.judges.prompt import PAIRWISE, render  # noqa: E402
from babelrun.manifest import JudgeSpec, Manifest  # noqa: E402


def plan(n_calls: int) -> list[items.Item]:
    refs = corpus.select(Manifest(name="bench", judges=[]))
    perts = [("truncate", [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]), ("repeat_pad", [0.1, 0.3, 0.5, 0.7, 0.9]),
             ("number_corrupt", [0.2, 0.4, 0.6, 0.8])]
    planned, _ = items.build(refs, perts, seed=0)
    return planned[: n_calls // 2]


async def bare_loop(url: str, bodies: list[bytes], concurrency: int) -> float:
    send, recv = anyio.create_memory_object_stream[bytes](max_buffer_size=2 * concurrency)
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        async def worker(stream):
            async with stream:
                async for body in stream:
                    async with session.post(url + "/chat/completions", data=body,
                                            headers={"Content-Type": "application/json"}) as r:
                        await r.read()

        started = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(concurrency):
                tg.start_soon(worker, recv.clone())
            recv.close()
            async with send:
                for body in bodies:
                    await send.send(body)
        return time.perf_counter() - started


async def through_babelrun(url: str, planned: list[items.Item], concurrency: int, folder: Path) -> float:
    spec = JudgeSpec(name="bench", backend="openai", model="m", endpoint=url, concurrency=concurrency)
    judge = judges.build(spec, seed=0)
    writer = log.LogWriter(folder)
    started = time.perf_counter()
    try:
        result = await engine.run([judge], planned, set(), writer, progress_interval=3600, handle_signals=False)
    finally:
        writer.close()
    assert result.judges[0].ok == 2 * len(planned), result
    return time.perf_counter() - started


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", type=int, default=3000)
    p.add_argument("--concurrency", type=int, default=16)
    args = p.parse_args()
    planned = plan(args.calls)
    bodies = [
        msgspec.json.encode({"model": "m", "messages": render(PAIRWISE, it.prompt, a, b), "temperature": 0, "max_tokens": 8})
        for it in planned for a, b in ((it.reference, it.perturbed), (it.perturbed, it.reference))
    ]
    with fake_judge() as url, tempfile.TemporaryDirectory() as tmp:
        anyio.run(bare_loop, url, bodies[:200], args.concurrency)  # warm-up
        bare = anyio.run(bare_loop, url, bodies, args.concurrency)
        ours = anyio.run(through_babelrun, url, planned, args.concurrency, Path(tmp))
    n = len(bodies)
    print(f"calls={n} concurrency={args.concurrency} bare={n / bare:.0f}/s babelrun={n / ours:.0f}/s")
    print(f"engine_overhead_ratio={bare / ours:.3f}  (babelrun calls/s ÷ bare aiohttp calls/s; target >= 0.8)")


if __name__ == "__main__":
    main()
