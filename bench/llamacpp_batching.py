"""llama.cpp backend throughput on the same distinct prompts, against one-at-a-time in the same run.

The Gemma 3 270M GGUF (the `local` extra), 2 threads, 8 concurrent callers through the
micro-batcher. Baseline: batch_size 1 on llama-cpp-python's high-level API (one prompt at a
time; it keeps the KV cache of the prefix a prompt shares with the previous one). Then the
multi-sequence path (judges/llamacpp_batch.py) at batch 1, 2, 4, 8, with the batch's prompts
as one prefix tree (shared prefix) and with every prompt evaluated whole in its own sequence
(no sharing). For each: calls/s, prompt tokens/s (the prompts' lengths ÷ wall time) and the
ratio to the baseline; for the multi-sequence rows, where the time went: inside
``llama_decode`` (prefill and decode steps, C++) and the rest (Python: tokenising, building the
batch, the soft verdict's top-20, detokenising, the micro-batcher).

    python bench/llamacpp_batching.py [--calls 32] [--soft] [--sizes 1 2 4 8]
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
    """``n`` distinct presentations in plan order (both orders of each item, as an audit sends
    them); duplicates (perturbations that left a short text as it was) are dropped."""
    out, seen = [], set()
    for item in plan(4 * n).items():
        for order in ("ref_first", "pert_first"):
            request = JudgeRequest.of(item, order, TEMPLATES["pairwise"])
            key = str(request.messages)
            if key not in seen:
                seen.add(key)
                out.append(request)
    return out[:n]


class Row:
    def __init__(self, label: str, calls_s: float, tokens_s: float, decode_s: float | None, wall: float,
                 evaluated: int | None):
        self.label, self.calls_s, self.tokens_s = label, calls_s, tokens_s
        self.decode_s, self.wall, self.evaluated = decode_s, wall, evaluated


async def throughput(label: str, reqs: list[JudgeRequest], concurrency: int, soft: bool, batch_size: int,
                     multi: bool, share: bool = True) -> Row:
    judge = build(JudgeSpec(name="g", backend="llamacpp", model="gemma3-270m", max_tokens=4, soft=soft,
                            batch_size=batch_size, max_wait_ms=20, threads=2), 0)
    judge.multi_sequence, judge.share_prefix = multi, share
    await judge.judge(reqs[-1])  # load the model (and make the context) outside the timing
    decoder = judge._decoder
    before = (decoder.decode_s, decoder.evaluated) if decoder else (0.0, 0)
    queue = iter(reqs)
    tokens = 0

    async def worker():
        nonlocal tokens
        for r in queue:
            tokens += (await judge.judge(r)).tokens_in

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(concurrency):
            tg.start_soon(worker)
    wall = time.perf_counter() - started
    decoder = judge._decoder
    await judge.aclose()
    if decoder is None:
        return Row(label, len(reqs) / wall, tokens / wall, None, wall, None)
    return Row(label, len(reqs) / wall, tokens / wall, decoder.decode_s - before[0], wall,
               decoder.evaluated - before[1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", type=int, default=32)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--sizes", type=int, nargs="+", default=[1, 2, 4, 8])
    p.add_argument("--soft", action="store_true", help="soft verdicts (one forward pass) instead of 4 generated tokens")
    args = p.parse_args()
    reqs = requests(args.calls)
    run = lambda *a: anyio.run(throughput, *a)  # noqa: E731
    base = run("one-at-a-time (batch_size 1, high-level API)", reqs, args.concurrency, args.soft, 1, False)
    rows = [base]
    for size in args.sizes:
        rows.append(run(f"multi-sequence batch {size}, shared prefix", reqs, args.concurrency, args.soft, size, True))
        rows.append(run(f"multi-sequence batch {size}, no sharing", reqs, args.concurrency, args.soft, size, True,
                        False))
    prompt_tokens = round(base.tokens_s * base.wall)
    print(f"calls={len(reqs)} distinct prompts, {prompt_tokens} prompt tokens, concurrency={args.concurrency}, "
          f"{'soft verdicts' if args.soft else 'generated verdicts (max_tokens 4)'}")
    for row in rows:
        line = f"{row.label:48s} {row.calls_s:6.2f} calls/s {row.tokens_s:8.0f} prompt tok/s  ×{row.calls_s / base.calls_s:.2f}"
        if row.decode_s is not None:
            line += (f"  | evaluated {row.evaluated} tokens; llama_decode {row.decode_s:.2f} s of {row.wall:.2f} s "
                     f"({row.decode_s / row.wall:.0%}), rest {row.wall - row.decode_s:.2f} s")
        print(line)
    best = next(r for r in rows if r.label == f"multi-sequence batch {max(args.sizes)}, shared prefix")
    print(f"llamacpp_batching_ratio={best.calls_s / base.calls_s:.3f}  (batch {max(args.sizes)} shared prefix "
          f"÷ one-at-a-time calls/s)")


if __name__ == "__main__":
    main()
