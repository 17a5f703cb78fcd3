"""Engine overhead: calls/s through babelrun's engine vs a bare aiohttp loop, same server,
same concurrency, same requests. Prints one ratio (target >= 0.90); and the user-judge path
(an inline template rendered per request, a declared regex verdict read per reply) against
the built-in path, as a second ratio.

    python bench/engine_overhead.py [--calls 3000] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import anyio
import msgspec

sys.path.insert(0, str(Path(__file__).parent))
from _common import fake_judge, plan, run_engine  # noqa: E402

from babelrun.judges import judge_spec
from babelrun.judges.protocol import Judging  # noqa: E402


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


# A user's judge as the user-judge path runs it: their template, their verdict pattern.
USER_JUDGE = {
    "prompt": {"system": "Judge impartially.",
               "user": ("[Question]\n{question}\n\n[Answer A]\n{answer_a}\n[End of Answer A]\n\n"
                        "[Answer B]\n{answer_b}\n[End of Answer B]\n\nExplain, then [[A]] or [[B]].")},
    "verdict": {"pattern": r"\b(A|B|tie)\b", "labels": {"A": "A", "B": "B", "tie": "tie"}},
}


async def through_babelrun(url: str, planned, concurrency: int, folder: Path, **settings) -> float:
    state, elapsed = await run_engine(url, planned, folder, concurrency=concurrency, **settings)
    assert state.ok == planned.calls_per_judge, state
    return elapsed


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", type=int, default=3000)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    planned = plan(args.calls)
    protocol = Judging.of(judge_spec(name="bare", backend="openai", model="m"))  # the built-in template
    bodies = [
        msgspec.json.encode({"model": "m", "messages": protocol.render(it, key), "temperature": 0, "max_tokens": 8})
        for it in planned.items() for key in ("ref_first", "pert_first")
    ]
    # Alternate the two, several rounds, and compare medians: client and server share the
    # machine's cores, so any one round is noisy.
    bare, ours, user = [], [], []
    with fake_judge() as server, tempfile.TemporaryDirectory() as tmp:
        url = server.url
        anyio.run(bare_loop, url, bodies[:500], args.concurrency)  # warm-up
        for i in range(args.rounds):
            bare.append(anyio.run(bare_loop, url, bodies, args.concurrency))
            ours.append(anyio.run(through_babelrun, url, planned, args.concurrency, Path(tmp) / str(i)))
            user.append(anyio.run(functools.partial(through_babelrun, url, planned, args.concurrency,
                                                    Path(tmp) / f"u{i}", **USER_JUDGE)))
    n = len(bodies)
    b, o = statistics.median(bare), statistics.median(ours)
    print(f"calls={n} concurrency={args.concurrency} rounds={args.rounds} "
          f"bare={n / b:.0f}/s babelrun={n / o:.0f}/s (medians)")
    print(f"engine_overhead_ratio={b / o:.3f}  (babelrun calls/s ÷ bare aiohttp calls/s; target >= 0.90)")
    u = statistics.median(user)
    print(f"user_judge_ratio={o / u:.3f}  (calls/s with a user template + regex verdict ÷ the built-in path; "
          f"{n / u:.0f}/s)")


if __name__ == "__main__":
    main()
