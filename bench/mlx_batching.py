"""MLX backend throughput (``mlx[cpu]`` on Linux): ``batch_generate`` over a micro-batch against
one prompt at a time, the same distinct prompts in the same run.

8 concurrent callers through the micro-batcher; batch_size 1 (each prompt alone through
``batch_generate``) against batch_size 2, 4, 8 (the batch's prompts left-padded and decoded
together). The model: the tiny random-weight llama the tests build (``tests/helpers.py``:
hidden size 32, two layers; it measures overhead, not arithmetic), or ``--model FOLDER``, any
folder ``mlx_lm.load`` reads.

    python bench/mlx_batching.py [--model FOLDER] [--calls 32] [--max-tokens 4]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
from llamacpp_batching import requests  # noqa: E402

from babelrun.judges import JudgeRequest, build, judge_spec  # noqa: E402
from helpers import tiny_mlx_model  # noqa: E402


async def throughput(model: str, reqs: list[JudgeRequest], batch_size: int, concurrency: int,
                     max_tokens: int) -> tuple[float, float]:
    judge = build(judge_spec(name="m", backend="mlx", model=model, max_tokens=max_tokens, batch_size=batch_size,
                            max_wait_ms=20), 0)
    await judge.judge(reqs[-1])  # load the model outside the timing
    queue = iter(reqs)
    tokens = 0

    async def worker():
        nonlocal tokens
        for r in queue:
            reply = await judge.judge(r)
            tokens += reply.tokens_in

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(concurrency):
            tg.start_soon(worker)
    wall = time.perf_counter() - started
    return len(reqs) / wall, tokens / wall


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", help="an mlx_lm model folder (default: the tests' tiny llama)")
    p.add_argument("--calls", type=int, default=32)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--max-tokens", type=int, default=4)
    p.add_argument("--sizes", type=int, nargs="+", default=[2, 4, 8])
    args = p.parse_args()
    reqs = requests(args.calls)
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model or str(tiny_mlx_model(Path(tmp) / "tiny-llama"))
        base = anyio.run(throughput, model, reqs, 1, args.concurrency, args.max_tokens)
        print(f"model={Path(model).name} calls={len(reqs)} concurrency={args.concurrency} max_tokens={args.max_tokens}")
        print(f"one at a time (batch_size 1)   {base[0]:7.2f} calls/s {base[1]:9.0f} prompt tok/s")
        for size in args.sizes:
            calls_s, tokens_s = anyio.run(throughput, model, reqs, size, args.concurrency, args.max_tokens)
            print(f"batch_generate, batch_size {size:<3d} {calls_s:7.2f} calls/s {tokens_s:9.0f} prompt tok/s  "
                  f"×{calls_s / base[0]:.2f}")


if __name__ == "__main__":
    main()
