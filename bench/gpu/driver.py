"""The GPU driver of ``bench/gpu/run.sh``: the llama.cpp backend with every layer
offloaded (``n_gpu_layers=-1``), then (1) ``bench/llamacpp_batching.py``'s rows — calls/s and
prompt tokens/s per batch size, shared prefix and not, against one-at-a-time in the same
run — (2) a ``babelrun bench-judge`` sweep of the in-process backend at batch_size 1..N,
concurrency = batch size: calls/s per level, and (3) ``bench/llamacpp_audit.py``'s audits
(``babelrun.audit`` in this process, the bundled corpus, 8 in flight, ``--limit`` calls) at
``batch_size: 8`` ÷ ``batch_size: 1``: the judge's calls/s from stats.json, alternating rounds.
Not a test: a benchmark for a machine with a GPU.

    python bench/gpu/driver.py --model PATH.gguf [--sizes 1 2 4 8 16 32] [--calls 64]
                               [--rounds 2] [--gpu-layers -1] [--sample 32]
                               [--skip-batching] [--skip-sweep] [--skip-audit]

``--gpu-layers 0`` runs the same on the CPU (the dry run ``run.sh --dry-run`` makes).
The model is given by path (a packaged alias is too large to travel to a device in one
call: see run.sh), so the bench's ``gemma3-270m`` alias is pointed at it.
"""

from __future__ import annotations

import argparse
import functools
import sys
import tempfile
import time
from pathlib import Path

import msgspec

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def offload(gpu_layers: int, model: Path, threads: int) -> str:
    """Every ``Llama`` the backend makes gets ``n_gpu_layers``; the packaged alias resolves to
    ``model``. Returns what llama.cpp says it can offload to."""
    import llama_cpp

    from babelrun.judges import llamacpp

    original = llama_cpp.Llama.__init__

    @functools.wraps(original)
    def init(self, *args, **kwargs):
        kwargs.setdefault("n_gpu_layers", gpu_layers)
        if gpu_layers:
            kwargs["n_threads"] = threads
        original(self, *args, **kwargs)

    llama_cpp.Llama.__init__ = init
    llamacpp.model_path = lambda _name: model
    supports = getattr(llama_cpp, "llama_supports_gpu_offload", lambda: None)()
    return f"llama_cpp {llama_cpp.__version__}, gpu offload supported: {supports}"


def batching(sizes: list[int], calls: int, rounds: int, concurrency: int) -> None:
    import llamacpp_batching

    argv = ["llamacpp_batching.py", "--calls", str(calls), "--rounds", str(rounds),
            "--concurrency", str(concurrency), "--sizes", *map(str, sizes)]
    saved, sys.argv = sys.argv, argv
    try:
        llamacpp_batching.main()
    finally:
        sys.argv = saved


def sweep(sizes: list[int], sample: int, threads: int) -> None:
    """One manifest per batch size: judges that differ only in batch_size are one judge (one
    judge_id), which a manifest refuses to hold twice."""
    import babelrun
    from babelrun.app import benchjudge

    for n in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            # output_dir a new folder: tmp holds the manifest, and a folder of foreign files is refused
            manifest = {"name": "gpu-sweep", "output_dir": str(Path(tmp) / "run"),
                        "corpus": {"languages": ["en", "es", "ja"], "references_per_language": 4},
                        "perturbations": [{"name": "truncate", "severities": [0.3, 0.6]},
                                          {"name": "repeat_pad", "severities": [0.6]}],
                        "judges": [{"name": f"llamacpp batch {n}", "backend": "llamacpp", "model": "gemma3-270m",
                                    "max_tokens": 4, "batch_size": n, "concurrency": n, "threads": threads}]}
            path = Path(tmp) / "manifest.yaml"
            path.write_bytes(msgspec.yaml.encode(manifest))
            for bench in benchjudge.run(babelrun.load_manifest(path), sample=sample, cap=n):
                print(benchjudge.table(bench), flush=True)


def audits(calls: int, rounds: int, threads: int) -> None:
    """``llamacpp_audit.py``'s manifests through ``babelrun.audit`` here (so the offload patch
    applies), batch_size 1 and 8 alternating; prints each audit and the median ratio."""
    import statistics

    import llamacpp_audit

    import babelrun

    rates: dict[int, list[float]] = {1: [], 8: []}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for r in range(rounds):
            for size in (1, 8):
                path = llamacpp_audit.manifest(folder, size, f"b{size}-{r}")
                body = msgspec.yaml.decode(path.read_bytes())
                body["judges"][0]["threads"] = threads
                path.write_bytes(msgspec.yaml.encode(body))
                started = time.perf_counter()
                babelrun.audit(path, limit=calls, handle_signals=False)
                wall = time.perf_counter() - started
                stats = msgspec.json.decode((folder / f"b{size}-{r}" / "stats.json").read_bytes())["judges"][0]
                rates[size].append(stats["calls_per_s"])
                print(f"round {r + 1} audit batch_size {size}: {wall:.1f} s, judge {stats['calls_per_s']:.2f} calls/s, "
                      f"local {stats.get('local') or {}}", flush=True)
    ratios = [b / a for a, b in zip(rates[1], rates[8], strict=True)]
    print(f"gpu_audit_ratio={statistics.median(ratios):.3f}  (batch 8 ÷ batch 1, the judge's calls/s "
          f"through babelrun.audit; per round {', '.join(f'{x:.2f}' for x in ratios)})", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", type=Path, required=True)
    p.add_argument("--sizes", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32])
    p.add_argument("--calls", type=int, default=64)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--sample", type=int, default=32, help="bench-judge requests per level")
    p.add_argument("--gpu-layers", type=int, default=-1)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--skip-sweep", action="store_true")
    p.add_argument("--skip-batching", action="store_true")
    p.add_argument("--skip-audit", action="store_true")
    args = p.parse_args()
    print(offload(args.gpu_layers, args.model, args.threads), flush=True)
    started = time.perf_counter()
    if not args.skip_batching:
        print(f"== batching (calls/s, prompt tokens/s per batch size; n_gpu_layers={args.gpu_layers})", flush=True)
        batching(args.sizes, args.calls, args.rounds, max(args.sizes))
    if not args.skip_sweep:
        print("== bench-judge sweep (calls/s per batch size = concurrency)", flush=True)
        sweep(args.sizes, args.sample, args.threads)
    if not args.skip_audit:
        print(f"== audits (batch_size 8 ÷ 1 through babelrun.audit, {args.calls} calls)", flush=True)
        audits(args.calls, args.rounds, args.threads)
    print(f"driver done in {time.perf_counter() - started:.0f}s", flush=True)


if __name__ == "__main__":
    main()
