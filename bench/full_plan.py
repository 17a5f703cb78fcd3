"""The users' full-size plan through the simulated judge (no sleep): 65 languages × N
references × 5 perturbations × 2 severities × 2 orders, as a real `babelrun audit` process.
Prints wall time, calls/s and peak RSS per size, and the ratio of peak RSS at the largest
size to the smallest (target: flat, ~1.0; and under 300 MB).

    python bench/full_plan.py [--sizes 10 30 100]

The corpus is synthetic: the bundled references, cycled over 65 language codes with a
numbered closing sentence so that every reference is distinct.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgspec

CHILD = """
import resource, sys
from babelrun.app.cli import main
code = main(["audit", sys.argv[1], "--progress-every", "3600"])
print("MAXRSS_KB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
sys.exit(code)
"""


def languages(n: int = 65) -> list[str]:
    from language_data.population_data import LANGUAGE_SPEAKING_POPULATION

    import babelrun.core.languages as L

    codes = sorted((c for c in LANGUAGE_SPEAKING_POPULATION if "-" not in c),
                   key=lambda c: -LANGUAGE_SPEAKING_POPULATION[c])
    out = []
    for code in codes:
        try:
            out.append(L.normalize(code))
        except ValueError:
            continue
        if len(out) == n:
            return out
    raise RuntimeError("not enough language codes")


def write_corpus(path: Path, per_lang: int) -> None:
    from babelrun.corpus import bundled as bundled_corpus

    bundled = list(bundled_corpus.read(None))
    with path.open("wb") as f:
        for li, lang in enumerate(languages()):
            for i in range(per_lang):
                ref = bundled[(li * per_lang + i) % len(bundled)]
                text = f"{ref.response} Item {li}-{i} has 12 parts."
                f.write(msgspec.json.encode({"id": f"{lang}-{i}", "language": lang,
                                             "prompt": ref.prompt, "reference": text}) + b"\n")


def run(per_lang: int, folder: Path) -> dict:
    write_corpus(folder / "refs.jsonl", per_lang)
    manifest = {"name": "full", "output_dir": "run", "seed": 1,
                "corpus": {"sources": [{"kind": "jsonl", "path": "refs.jsonl"}], "references_per_language": per_lang},
                "judges": [{"name": "sim", "backend": "simulated", "concurrency": 64,
                            "simulated": {"default_accuracy": 0.85, "position_bias": 0.1}}],
                "scoring": {"bootstrap": 200}}
    (folder / "m.yaml").write_bytes(msgspec.yaml.encode(manifest))
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD, str(folder / "m.yaml")], capture_output=True, text=True)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(proc.stderr)
    rss_kb = int(next(line.split()[1] for line in proc.stderr.splitlines() if line.startswith("MAXRSS_KB")))
    stats = json.loads((folder / "run" / "stats.json").read_text())["judges"][0]
    return {"refs_per_lang": per_lang, "calls": stats["ok"], "wall_s": round(wall, 1),
            "engine_calls_per_s": stats["calls_per_s"], "peak_rss_mb": round(rss_kb / 1024)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=[10, 30, 100])
    args = p.parse_args()
    rows = []
    for n in args.sizes:
        with tempfile.TemporaryDirectory() as tmp:
            row = run(n, Path(tmp))
        rows.append(row)
        print(" ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    print(f"rss_growth_ratio={rows[-1]['peak_rss_mb'] / rows[0]['peak_rss_mb']:.2f}  "
          f"(peak RSS at {rows[-1]['refs_per_lang']} refs/lang ÷ at {rows[0]['refs_per_lang']}; "
          f"target ~1.0, and under 300 MB)")


if __name__ == "__main__":
    main()
