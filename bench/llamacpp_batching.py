"""llama.cpp backend throughput on the same items, two ratios:

1. micro-batched vs one-at-a-time: the Gemma 3 270M GGUF (the `local` extra), 8 concurrent
   callers, batch_size 8 (one thread hop per batch) against batch_size 1. llama-cpp-python's
   high-level API decodes prompts one at a time, so this measures dispatch overhead saved.
2. soft vs generated verdicts: one forward pass for P(A), P(B), P(tie) against generating
   the verdict (max_tokens 4).

    python bench/llamacpp_batching.py [--calls 32]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).parent))
from _common import plan  # noqa: E402

from babelrun.judges import JudgeRequest, build  # noqa: E402
from babelrun.judges.prompt import TEMPLATES  # noqa: E402
from babelrun.manifest import JudgeSpec  # noqa: E402


def requests(n: int) -> list[JudgeRequest]:
    out = []
    for item in plan(n).items():
        for order in ("ref_first", "pert_first"):
            out.append(JudgeRequest.of(item, order, TEMPLATES["pairwise"]))
    return out[:n]


async def throughput(batch_size: int, reqs: list[JudgeRequest], concurrency: int, soft: bool = False) -> float:
    judge = build(JudgeSpec(name="g", backend="llamacpp", model="gemma3-270m", max_tokens=4, soft=soft,
                            batch_size=batch_size, max_wait_ms=20, threads=2), 0)
    await judge.judge(reqs[0])  # load the model outside the timing
    queue = iter(reqs)

    async def worker():
        for r in queue:
            await judge.judge(r)

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(concurrency):
            tg.start_soon(worker)
    return len(reqs) / (time.perf_counter() - started)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", type=int, default=32)
    p.add_argument("--concurrency", type=int, default=8)
    args = p.parse_args()
    reqs = requests(args.calls)
    single = anyio.run(throughput, 1, reqs, args.concurrency)
    batched = anyio.run(throughput, 8, reqs, args.concurrency)
    soft = anyio.run(throughput, 8, reqs, args.concurrency, True)
    print(f"calls={len(reqs)} concurrency={args.concurrency} one_at_a_time={single:.2f}/s "
          f"batched={batched:.2f}/s soft={soft:.2f}/s")
    print(f"llamacpp_batching_ratio={batched / single:.3f}  (batched ÷ one-at-a-time calls/s)")
    print(f"soft_vs_generated_ratio={soft / batched:.3f}  (one forward pass ÷ generating 4 tokens, calls/s)")


if __name__ == "__main__":
    main()
