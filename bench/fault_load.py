"""The hardening load test: about 120,000 judge calls through the openai backend
against the fake judge in its own process, with 20 % of requests faulted (429 with
Retry-After, 500/502/503, dropped connections, malformed 200 bodies), as a real
`babelrun audit` process. Prints the share of planned keys with a verdict after ONE run
(target ≥ 99.99 %), keys judged twice (target 0), faults injected, and peak RSS (target
under 300 MB).

    python bench/fault_load.py [--refs-per-lang 101]    # 65 languages × 101 × 5 × 2 × 2, less no-ops: ≈ 120,000
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import msgspec
from _common import fake_judge
from full_plan import CHILD, write_corpus

FAULTS = {"rate_429": 0.05, "rate_5xx": 0.07, "rate_drop": 0.04, "rate_malformed": 0.04}  # 20 %


def run(per_lang: int, folder: Path) -> dict:
    from babelrun.store import log

    write_corpus(folder / "refs.jsonl", per_lang)
    with fake_judge(retry_after=0.01, seed=16, **FAULTS) as served:
        manifest = {"name": "load", "output_dir": "run", "seed": 1,
                    "corpus": {"sources": [{"kind": "jsonl", "path": "refs.jsonl"}],
                               "references_per_language": per_lang},
                    "judges": [{"name": "remote", "backend": "openai", "model": "m", "endpoint": served.url,
                                "concurrency": 64, "retries": 8, "timeout_s": 30,
                                "max_consecutive_failures": 1000}],
                    "scoring": {"bootstrap": 200}}
        (folder / "m.yaml").write_bytes(msgspec.yaml.encode(manifest))
        started = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", CHILD, str(folder / "m.yaml")], capture_output=True, text=True)
        wall = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        raise SystemExit(proc.stderr)
    rss_kb = int(next(line.split()[1] for line in proc.stderr.splitlines() if line.startswith("MAXRSS_KB")))
    stats = json.loads((folder / "run" / "stats.json").read_text())["judges"][0]
    ok_keys = Counter(r.key for r in log.read(folder / "run") if r.status == "ok")
    return {"planned": stats["planned"], "ok_keys": len(ok_keys),
            "ok_pct": round(100 * len(ok_keys) / stats["planned"], 4),
            "duplicated": sum(n - 1 for n in ok_keys.values()), "calls": stats["calls"],
            "retries": stats["retries"], "injected": served.counters.get("injected"),
            "failed_after_retries": stats["errors"], "wall_s": round(wall, 1), "peak_rss_mb": round(rss_kb / 1024),
            "exit": proc.returncode}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--refs-per-lang", type=int, default=101)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        row = run(args.refs_per_lang, Path(tmp))
    print(" ".join(f"{k}={v}" for k, v in row.items()), flush=True)


if __name__ == "__main__":
    main()
