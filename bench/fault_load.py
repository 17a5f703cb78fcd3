"""The hardening load test: about 120,000 judge calls through the openai backend
against the fake judge in its own process, with 20 % of requests faulted (429 with
Retry-After, 500/502/503, dropped connections, malformed 200 bodies), as a real
`babelrun audit` process. Prints the share of needed keys with a verdict after ONE run
(target ≥ 99.99 %), keys judged twice (target 0), faults injected, and peak RSS (target
under 300 MB).

    python bench/fault_load.py [--refs-per-lang 101]    # 65 languages × 101 × 5 × 2 × 2, less no-ops: ≈ 120,000
    python bench/fault_load.py --refs-per-lang 34 --samples 3 --cache --stopping [--again]

A planned key is one ask: (item, order, sample), so with ``--samples 3`` a presentation is
three keys (34 refs a language × 3 ≈ 120,000). ``--cache`` gives the judge a response cache
in the run's temporary folder; ``--stopping`` the manifest's ``stopping:`` section (a YAML
mapping, docs/stopping.md; without a value, a width stop that ends each cell at about 3/4
of its items). With stopping, the keys of a cell after its stop are not needed
(``stats.json``'s ``not_needed``): the share counts the keys that were needed, planned less
not needed. ``--again`` runs a second audit into a fresh output folder on the same cache
and prints its line too: the keys the first run judged come from the cache (``cached``),
without a call.
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
# The fake judge's R lies near the threshold (0.65), so a verdict stop decides no cell of ~300
# items (measured: R's interval 0.35–0.73 at n = 291); a width stop ends each at about 3/4.
STOPPING = "{on: width, width: 0.4, min_items: 30}"


def manifest(per_lang: int, url: str, output_dir: str, samples: int, cache: Path | None) -> dict:
    judge: dict = {"name": "remote", "backend": "openai", "model": "m", "endpoint": url, "concurrency": 64,
                   "retries": 8, "timeout_s": 30, "max_consecutive_failures": 1000}
    if samples > 1:  # a sampled judge; the seed makes each sample's request (and reply) its own
        judge.update(samples=samples, temperature=0.7, seed=7)
    out: dict = {"name": "load", "output_dir": output_dir, "seed": 1,
                 "corpus": {"sources": [{"kind": "jsonl", "path": "refs.jsonl"}],
                            "references_per_language": per_lang},
                 "judges": [judge], "scoring": {"bootstrap": 200}}
    if cache is not None:
        out["cache"] = {"dir": str(cache), "sampled": samples > 1}
    return out


def audit(folder: Path, body: dict, stopping: str | None, name: str) -> dict:
    """One `babelrun audit` process of ``body`` (and ``stopping:`` as written: a YAML
    encoder would turn its bare ``on`` key into ``true``); its line's numbers."""
    from babelrun.store import log

    text = msgspec.yaml.encode(body) + (b"" if stopping is None else f"stopping: {stopping}\n".encode())
    (folder / f"{name}.yaml").write_bytes(text)
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD, str(folder / f"{name}.yaml")], capture_output=True, text=True)
    wall = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        raise SystemExit(proc.stderr)
    rss_kb = int(next(line.split()[1] for line in proc.stderr.splitlines() if line.startswith("MAXRSS_KB")))
    run_dir = folder / body["output_dir"]
    stats = json.loads((run_dir / "stats.json").read_text())["judges"][0]
    ok_keys = Counter(r.key for r in log.read(run_dir) if r.status == "ok")
    needed = stats["planned"] - stats["not_needed"]
    return {"planned": stats["planned"], "not_needed": stats["not_needed"], "needed": needed,
            "ok_keys": len(ok_keys), "ok_pct": round(100 * len(ok_keys) / needed, 4),
            "duplicated": sum(n - 1 for n in ok_keys.values()), "calls": stats["calls"],
            "cached": stats["cached"], "retries": stats["retries"],
            "failed_after_retries": stats["errors"], "wall_s": round(wall, 1), "peak_rss_mb": round(rss_kb / 1024),
            "exit": proc.returncode}


def run(per_lang: int, folder: Path, samples: int = 1, cache: bool = False, stopping: str | None = None,
        again: bool = False) -> list[dict]:
    write_corpus(folder / "refs.jsonl", per_lang)
    rows = []
    with fake_judge(retry_after=0.01, seed=16, **FAULTS) as served:
        for name in ("run", "again")[: 1 + again]:
            body = manifest(per_lang, served.url, name, samples, folder / "cache" if cache else None)
            rows.append(audit(folder, body, stopping, name))
    rows[0]["injected"] = served.counters.get("injected")  # both runs' faults, when there are two
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--refs-per-lang", type=int, default=101)
    p.add_argument("--samples", type=int, default=1, help="the judge's samples: k (each a key of its own)")
    p.add_argument("--cache", action="store_true", help="a response cache in the run's temporary folder")
    p.add_argument("--stopping", nargs="?", const=STOPPING, default=None, metavar="YAML",
                   help=f"the manifest's stopping: section (without a value: {STOPPING})")
    p.add_argument("--again", action="store_true", help="a second audit on the same cache, into a fresh folder")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = run(args.refs_per_lang, Path(tmp), args.samples, args.cache, args.stopping, args.again)
    for name, row in zip(("run", "again"), rows, strict=False):
        print(name, " ".join(f"{k}={v}" for k, v in row.items()), flush=True)


if __name__ == "__main__":
    main()
