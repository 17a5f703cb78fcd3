"""Local batching through the command users run, beside the engine-level bench, in the same rounds.

``babelrun audit`` processes with the in-process llama.cpp judge (Gemma 3 270M, 2 threads,
8 in flight, ``max_tokens: 4``, the bundled corpus as in ``examples/local.yaml``, ``--limit``
calls) at ``batch_size: 8`` against ``batch_size: 1``, and in the same alternating rounds
``bench/llamacpp_batching.py``'s engine-level rows (batch 8, shared + kept, ÷ one at a time)
on two prompt sets: the audit's own first calls (the same prompts, in the order the audit
sends them) and that bench's own set (one reference's 18 perturbations and severities in a row).

For each audit: the whole command's wall time, the judge's calls/s as stats.json gives it,
and the micro-batching counters it keeps there (``local``: batches, mean fill, prompt tokens
evaluated and taken from kept prefixes). On a CPU the batched path evaluates at the
one-at-a-time path's tokens/s, so a ratio is bounded by how many tokens it saves: the
counters say it for the audit, the token bounds for each prompt set.

    python bench/llamacpp_audit.py [--calls 64] [--rounds 3] [--no-engine]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import msgspec

sys.path.insert(0, str(Path(__file__).parent))
from llamacpp_batching import one_at_a_time_evaluates, requests, throughput  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PERTURBATIONS = ["truncate", "shuffle", "number_corrupt", "drop_entities", "repeat_pad"]


def manifest(folder: Path, batch_size: int, run: str) -> Path:
    body = {"name": "local-bench", "output_dir": str(folder / run), "seed": 7,
            "corpus": {"sources": [{"kind": "bundled"}], "languages": "all", "references_per_language": 2},
            "perturbations": [{"name": p, "severities": [0.6]} for p in PERTURBATIONS],
            "judges": [{"name": "gemma-270m", "backend": "llamacpp", "model": "gemma3-270m", "max_tokens": 4,
                        "concurrency": 8, "batch_size": batch_size, "threads": 2}],
            "scoring": {"bootstrap": 200}}
    path = folder / f"{run}.yaml"
    path.write_bytes(msgspec.yaml.encode(body))
    return path


class Audit(msgspec.Struct):
    wall: float
    calls_s: float  # the judge's, from stats.json (its workers' time: model load and calls)
    local: dict[str, float]


def audit(path: Path, calls: int) -> Audit:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "babelrun", "audit", str(path), "--limit", str(calls),
                           "--progress-every", "3600"], capture_output=True, text=True, env=env, cwd=ROOT)
    wall = time.perf_counter() - started
    if proc.returncode not in (0, 3):  # 3: misconfigured (a base model this small answers off-format)
        raise SystemExit(proc.stderr[-2000:])
    run = Path(msgspec.yaml.decode(path.read_bytes())["output_dir"])
    judge = msgspec.json.decode((run / "stats.json").read_bytes())["judges"][0]
    return Audit(wall, judge["calls_per_s"], judge.get("local") or {})


def audit_requests(path: Path, calls: int, grouped: bool = True) -> list:
    """The first ``calls`` requests the audit sends, in its order (no stopping: the engine's
    interleaved feed, ``Plan.ordered``; ``grouped``: a reference at a time, as the engine
    feeds a llama.cpp judge, else an item at a time, as it feeds the others)."""
    from babelrun import judges
    from babelrun.manifest import load
    from babelrun.plan import Plan

    m = load(path)
    judge = judges.build(m.judges[0], m.seed)
    pending = Plan.from_manifest(m).ordered(grouped=grouped).pending(judge.judge_id, judge.protocol.keys)
    return [judge.protocol.request(item, key) for (item, key, _), _ in zip(pending, range(calls), strict=False)]


def token_bound(reqs: list) -> tuple[int, int, int]:
    """(prompt tokens, one-at-a-time evaluates, batch 8 shared + kept evaluates)."""
    from babelrun.judges.llamacpp import _load, model_path, prompt_tokens
    from babelrun.judges.llamacpp_batch import evaluates

    llm = _load(str(model_path("gemma3-270m")), 4096, 2, 0)
    prompts = [prompt_tokens(llm, r) for r in reqs]
    chunks = [prompts[k:k + 8] for k in range(0, len(prompts), 8)]
    kept = sum(evaluates(chunk, before) for chunk, before in zip(chunks, [[], *chunks], strict=False))
    return sum(map(len, prompts)), one_at_a_time_evaluates(prompts), kept


def engine_ratio(reqs: list) -> float:
    base = anyio.run(throughput, "one", reqs, 8, False, 1, False)
    row = anyio.run(throughput, "eight", reqs, 8, False, 8, True, True, True)
    return row.calls_s / base.calls_s


def median(values: list[float]) -> str:
    return f"×{statistics.median(values):.2f} ({min(values):.2f}–{max(values):.2f})"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", type=int, default=64)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--no-engine", action="store_true", help="the audits only (no engine-level rows)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        own = audit_requests(manifest(folder, 8, "probe"), args.calls)
        sets = {"the audit's calls": own, "the bench's set": requests(args.calls)}
        apart = audit_requests(manifest(folder, 8, "probe"), args.calls, grouped=False)
        print(f"{args.calls} calls, 8 in flight, max_tokens 4, 2 threads, {args.rounds} rounds; "
              f"load average {os.getloadavg()[0]:.1f}", flush=True)
        for name, reqs in {**sets, "the audit's calls fed an item at a time": apart}.items():
            total, one, eight = token_bound(reqs)
            print(f"token bound, {name}: {total} prompt tokens; one at a time evaluates {one}, batch 8 kept "
                  f"{eight}: ×{one / eight:.2f}", flush=True)
        walls: dict[int, list[float]] = {1: [], 8: []}
        rates: dict[int, list[float]] = {1: [], 8: []}
        engine: dict[str, list[float]] = {name: [] for name in sets}
        for r in range(args.rounds):
            for size in (1, 8):
                got = audit(manifest(folder, size, f"b{size}-{r}"), args.calls)
                walls[size].append(got.wall)
                rates[size].append(got.calls_s)
                print(f"round {r + 1} audit batch_size {size}: {got.wall:.1f} s, judge {got.calls_s:.2f} calls/s, "
                      f"local {got.local}", flush=True)
            if not args.no_engine:
                for name, reqs in sets.items():
                    engine[name].append(engine_ratio(reqs))
                    print(f"round {r + 1} engine rows, {name}: ×{engine[name][-1]:.2f}", flush=True)
        whole = [a / b for a, b in zip(walls[1], walls[8], strict=True)]
        judge = [b / a for a, b in zip(rates[1], rates[8], strict=True)]
        print(f"audit batch 8 ÷ batch 1: whole command {median(whole)}, the judge's calls/s {median(judge)}")
        for name, values in engine.items():
            if values:
                print(f"engine bench batch 8 ÷ one at a time, {name}: {median(values)}")
        print(f"load average now {os.getloadavg()[0]:.1f}")
        print(f"llamacpp_audit_ratio={statistics.median(judge):.3f}")


if __name__ == "__main__":
    main()
