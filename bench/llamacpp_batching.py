"""llama.cpp backend throughput on the same distinct prompts, against one-at-a-time in the same run.

The Gemma 3 270M GGUF (the `local` extra), 2 threads, 8 concurrent callers through the
micro-batcher. Baseline: batch_size 1 on llama-cpp-python's high-level API (one prompt at a
time; it keeps the KV cache of the prefix a prompt shares with the previous one). Then the
multi-sequence path (judges/llamacpp_batch.py) at batch 1, 2, 4, 8: each prompt evaluated
from the longest prefix it shares with an earlier prompt of its batch or of the batch before
(kept: the last batch's prompts stay in the KV cache), from its own batch only (``--no-keep``
rows: every batch from an empty cache), and whole in its own sequence (no sharing). For each:
calls/s, prompt tokens/s (the prompts' lengths ÷ wall time) and the ratio to the baseline;
for the multi-sequence rows, the prompt tokens evaluated and copied, and where the time went:
inside ``llama_decode`` (prefill and decode steps, C++) against the wall time (the rest is Python:
tokenising, building the batch, sampling, the soft verdict's top-20, detokenising, the
micro-batcher). The rows alternate over ``--rounds`` rounds, each against its own round's
baseline, so a machine whose load moves shows as a range, not as a bias. Last, the bound that
counting tokens gives: what one-at-a-time evaluates ÷ what the batched path evaluates.

    python bench/llamacpp_batching.py [--calls 32] [--rounds 3] [--soft] [--sizes 1 2 4 8]
                                      [--no-keep] [--no-apart] [--flash]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import anyio
import msgspec

sys.path.insert(0, str(Path(__file__).parent))
from _common import plan  # noqa: E402

from babelrun.judges import JudgeRequest, build, judge_spec  # noqa: E402
from babelrun.judges.protocol import Judging  # noqa: E402


def requests(n: int) -> list[JudgeRequest]:
    """``n`` distinct presentations in plan order (both orders of each item, as an audit sends
    them); duplicates (perturbations that left a short text as it was) are dropped."""
    out, seen = [], set()
    for item in plan(4 * n).items():
        for order in ("ref_first", "pert_first"):
            request = Judging.of(judge_spec(name="b", backend="simulated")).request(item, order)
            key = str(request.messages)
            if key not in seen:
                seen.add(key)
                out.append(request)
    return out[:n]


class Row(msgspec.Struct):
    label: str
    calls_s: float
    tokens_s: float
    wall: float
    decode_s: float | None = None  # inside llama_decode (multi-sequence rows)
    evaluated: int | None = None  # prompt tokens llama_decode evaluated
    reused: int | None = None  # prompt tokens copied from a prompt evaluated before


async def throughput(label: str, reqs: list[JudgeRequest], concurrency: int, soft: bool, batch_size: int,
                     multi: bool, share: bool = True, keep: bool = True, flash: bool = False) -> Row:
    judge = build(judge_spec(name="g", backend="llamacpp", model="gemma3-270m", max_tokens=4, soft=soft,
                            batch_size=batch_size, max_wait_ms=20, threads=2), 0)
    judge.multi_sequence, judge.share_prefix, judge.keep_prefix = multi, share, keep
    judge.flash_attention = flash
    async with anyio.create_task_group() as tg:  # load the model, make the context: not timed
        for r in reqs[:batch_size]:
            tg.start_soon(judge.judge, r)
    decoder = judge._decoder
    if decoder is not None:  # both paths start cold: no prefix kept from the warm-up
        decoder.forget()
    judge._llm().reset()
    before = (decoder.decode_s, decoder.evaluated, decoder.reused) if decoder else (0.0, 0, 0)
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
    decoder = judge._decoder
    await judge.aclose()
    row = Row(label, len(reqs) / wall, tokens / wall, wall)
    if decoder is not None:
        row.decode_s, row.evaluated = decoder.decode_s - before[0], decoder.evaluated - before[1]
        row.reused = decoder.reused - before[2]
    return row


def show(row: Row, base: Row) -> None:
    line = (f"{row.label:40s} {row.calls_s:6.2f} calls/s {row.tokens_s:6.0f} prompt tok/s  "
            f"×{row.calls_s / base.calls_s:.2f}")
    if row.decode_s is not None:
        line += (f"  | evaluated {row.evaluated} tokens ({row.evaluated / row.decode_s:.0f}/s), copied {row.reused}; "
                 f"llama_decode {row.decode_s:.1f} s of {row.wall:.1f} s ({row.decode_s / row.wall:.0%})")
    print(line, flush=True)


def one_at_a_time_evaluates(prompts: list[list[int]]) -> int:
    """The prompt tokens the one-at-a-time path evaluates: each prompt less the prefix it
    shares with the one before (kept in the KV cache)."""
    total = 0
    for before, prompt in zip([[], *prompts], prompts, strict=False):
        same = next((k for k, (a, b) in enumerate(zip(before, prompt, strict=False)) if a != b),
                    min(len(before), len(prompt)))
        total += len(prompt) - same
    return total


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", type=int, default=32)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds of every row (default 3)")
    p.add_argument("--sizes", type=int, nargs="+", default=[1, 2, 4, 8])
    p.add_argument("--soft", action="store_true", help="soft verdicts (one forward pass) instead of 4 generated tokens")
    p.add_argument("--no-keep", action="store_true", help="also rows that take no prefix from the batch before")
    p.add_argument("--no-apart", action="store_true", help="skip the rows without sharing")
    p.add_argument("--flash", action="store_true", help="also the kept rows with flash attention (check agreement)")
    args = p.parse_args()
    reqs = requests(args.calls)
    variants = []
    for size in args.sizes:
        variants.append((f"multi-sequence batch {size}, shared+kept", size, True, True, False))
        if args.no_keep and size > 1:
            variants.append((f"multi-sequence batch {size}, shared, not kept", size, True, False, False))
        if args.flash:
            variants.append((f"multi-sequence batch {size}, shared+kept, flash", size, True, True, True))
        if not args.no_apart and size > 1:  # batch 1: nothing to share
            variants.append((f"multi-sequence batch {size}, no sharing", size, False, False, False))
    print(f"calls={len(reqs)} distinct prompts, concurrency={args.concurrency}, "
          f"{'soft verdicts' if args.soft else 'generated verdicts (max_tokens 4)'}, {args.rounds} rounds")
    ratios: dict[str, list[float]] = {label: [] for label, *_ in variants}
    for round_ in range(1, args.rounds + 1):
        print(f"-- round {round_}", flush=True)
        base = anyio.run(throughput, "one-at-a-time (high-level API)", reqs, args.concurrency, args.soft, 1, False)
        show(base, base)
        for label, size, share, keep, flash in variants:
            row = anyio.run(throughput, label, reqs, args.concurrency, args.soft, size, True, share, keep, flash)
            show(row, base)
            ratios[label].append(row.calls_s / base.calls_s)
    from babelrun.judges.llamacpp import _load, model_path, prompt_tokens
    from babelrun.judges.llamacpp_batch import evaluates, prefix_tree

    llm = _load(str(model_path("gemma3-270m")), 4096, 2, 0)
    prompts = [prompt_tokens(llm, r) for r in reqs]
    base_tokens = one_at_a_time_evaluates(prompts)
    print(f"-- prompt tokens: {sum(map(len, prompts))} in all; one-at-a-time evaluates {base_tokens} "
          f"(it keeps the prefix shared with the previous prompt)")
    for size in args.sizes:
        cells = sum(s.stop - s.start for k in range(0, len(prompts), size) for s in prefix_tree(prompts[k:k + size]))
        chunks = [prompts[k:k + size] for k in range(0, len(prompts), size)]
        kept = sum(evaluates(chunk, before) for chunk, before in zip(chunks, [[], *chunks], strict=False))
        print(f"   batch {size}: the batch's own prefixes: {cells} (token bound ×{base_tokens / cells:.2f}); "
              f"kept from the batch before as well: {kept} (×{base_tokens / kept:.2f})")
    whole = sum(s.stop - s.start for s in prefix_tree(prompts))
    print(f"   any sharing at all (the whole run as one tree, across batches): {whole}: "
          f"token bound ×{base_tokens / whole:.2f}")
    print("-- batched ÷ one-at-a-time calls/s over the rounds (median, range):")
    for label, values in ratios.items():
        print(f"   {label:40s} ×{statistics.median(values):.2f} ({min(values):.2f}–{max(values):.2f})")
    best = f"multi-sequence batch {max(args.sizes)}, shared+kept"
    print(f"llamacpp_batching_ratio={statistics.median(ratios[best]):.3f}  ({best} ÷ one-at-a-time calls/s, "
          f"median of {args.rounds} rounds)")


if __name__ == "__main__":
    main()
