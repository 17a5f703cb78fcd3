"""The whole command against the bare loop: a real `babelrun audit` process (start-up, plan,
engine, log, compaction, scoring, report) with an openai-backend judge at the loopback fake
judge (its own process, no latency), concurrency 16, ÷ a bare aiohttp loop posting the same
request bodies to the same server. Rounds alternate; prints medians and ranges
(target: >= 0.5).

    python bench/whole_audit.py [--refs 10] [--rounds 3] [--base TREE]

``--base TREE`` also times, in the same alternating rounds, the audit of another checkout
(``git worktree add TREE <commit>``; its ``babelrun`` first on PYTHONPATH): before and
after in one process, on the same server and bodies, and the two audits' ratio round by
round (firmer than either median when the machine's speed drifts between rounds).

The corpus is full_plan.py's: the bundled references cycled over 65 languages. The audits
run with Python's bytecode cache on (compiled before the rounds, under the temporary
folder), as an installed package runs, whatever PYTHONDONTWRITEBYTECODE says here: without it
every audit compiles babelrun's ~100 modules from source (~0.2 s) and the bare loop does not.
An untimed audit before the rounds fills the cache with the third-party modules' bytecode.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import msgspec

sys.path.insert(0, str(Path(__file__).parent))
from _common import fake_judge  # noqa: E402
from engine_overhead import bare_loop  # noqa: E402
from full_plan import write_corpus  # noqa: E402


def manifest(folder: Path, url: str, refs: int, run: str) -> Path:
    body = {"name": "whole", "output_dir": run, "seed": 1,
            "corpus": {"sources": [{"kind": "jsonl", "path": "refs.jsonl"}], "references_per_language": refs},
            "judges": [{"name": "j", "backend": "openai", "model": "m", "endpoint": url, "concurrency": 16}],
            "scoring": {"bootstrap": 200}}
    path = folder / f"{run}.yaml"
    path.write_bytes(msgspec.yaml.encode(body))
    return path


def bodies(path: Path) -> list[bytes]:
    """The audit's own requests, as the openai backend encodes them."""
    from babelrun import judges
    from babelrun.manifest import load
    from babelrun.plan import Plan

    m = load(path)
    plan = Plan.from_manifest(m)
    judge = judges.build(m.judges[0], m.seed)
    return [judge.body(judge.protocol.request(item, key, sample))  # type: ignore[attr-defined]
            for item, key, sample in plan.pending(judge.judge_id, judge.protocol.keys)]


def environment(folder: Path, tree: str | None) -> dict[str, str]:
    """The audit's environment: ``tree`` first on PYTHONPATH, bytecode cached under ``folder``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(folder / "pycache")
    if tree is not None:
        env["PYTHONPATH"] = tree
    return env


def compile_tree(folder: Path, tree: str | None) -> None:
    import babelrun

    package = Path(tree) / "babelrun" if tree else Path(babelrun.__file__).parent
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=True,
                   env=environment(folder, tree), capture_output=True)


CPU: dict[str | None, list[float]] = {}  # CPU seconds of each audit (its children included), by tree


def audit(path: Path, tree: str | None = None) -> float:
    env = environment(path.parent, tree)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "babelrun", "audit", str(path), "--progress-every", "3600"],
                          capture_output=True, text=True, cwd=path.parent, env=env)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.setdefault(tree, []).append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return wall


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--refs", type=int, default=10, help="references per language (65 languages)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--base", help="a checkout whose audit is timed too, in the same rounds")
    args = p.parse_args()
    base: list[float] = []
    with tempfile.TemporaryDirectory() as tmp, fake_judge() as server:
        folder = Path(tmp)
        write_corpus(folder / "refs.jsonl", args.refs)
        sent = bodies(manifest(folder, server.url, args.refs, "probe"))
        anyio.run(bare_loop, server.url, sent[:500], 16)  # warm-up
        compile_tree(folder, None)
        if args.base:
            compile_tree(folder, args.base)
        # One untimed audit first: the bytecode cache under the temporary folder also holds the
        # third-party modules (PYTHONPYCACHEPREFIX applies to every import), and the first audit
        # would compile them (~2.5 CPU-s), charged to whichever tree ran first.
        audit(manifest(folder, server.url, args.refs, "warm"))
        CPU.clear()
        bare, whole = [], []
        for i in range(args.rounds):
            bare.append(anyio.run(bare_loop, server.url, sent, 16))
            whole.append(audit(manifest(folder, server.url, args.refs, f"run{i}")))
            if args.base:
                base.append(audit(manifest(folder, server.url, args.refs, f"base{i}"), args.base))
    b, w = statistics.median(bare), statistics.median(whole)
    print(f"calls={len(sent)} rounds={args.rounds} bare={b:.2f}s ({min(bare):.2f}-{max(bare):.2f}) "
          f"audit={w:.2f}s ({min(whole):.2f}-{max(whole):.2f}) (medians; ranges)")
    print(f"whole_audit_ratio={b / w:.3f}  (bare loop time ÷ the whole audit's wall time on the same calls; "
          f"per round {min(x / y for x, y in zip(bare, whole, strict=True)):.3f}-"
          f"{max(x / y for x, y in zip(bare, whole, strict=True)):.3f}; target >= 0.5)")
    print("audit CPU seconds (the process and its plot children; firmer than wall time on a shared machine): "
          + "; ".join(f"{'base' if t else 'this tree'} {statistics.median(c):.2f} ({min(c):.2f}-{max(c):.2f})"
                      for t, c in CPU.items()))
    if base:
        print(f"base: audit={statistics.median(base):.2f}s ({min(base):.2f}-{max(base):.2f}) "
              f"whole_audit_ratio={b / statistics.median(base):.3f} (per round "
              f"{min(x / y for x, y in zip(bare, base, strict=True)):.3f}-"
              f"{max(x / y for x, y in zip(bare, base, strict=True)):.3f})")
        paired = [x / y for x, y in zip(whole, base, strict=True)]  # one round's two audits, minutes apart at most
        print(f"this tree's audit ÷ the base's, round by round: median {statistics.median(paired):.3f} "
              f"({min(paired):.3f}-{max(paired):.3f}; below 1: this tree is faster)")


if __name__ == "__main__":
    main()
