"""The Ray executor with 2 workers vs the local executor, on a latency-bound loopback judge
(100 ms a call, concurrency C per worker; the server in its own process). The same manifest
runs as a whole `babelrun audit` both ways (plan, calls, log, compaction, cards); Ray is
started before the clock, and its start-up is reported on its own.

Prints the speed-up (ideal 2.0: twice the calls in flight) and the Ray executor's overhead
per call: (Ray wall time - local wall time / 2) / calls, i.e. what the scheduling, the plan
hand-off and the shared-budget actor's round trip per admission cost on top of the ideal.

    python bench/ray_executor.py [--concurrency 16] [--refs 12] [--rpm RPM]
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
import time
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).parent))
from _common import fake_judge  # noqa: E402

LATENCY = 0.1


def manifest(folder: Path, url: str, args, executor: str):
    from babelrun import load_manifest

    judge = {"name": "bench", "backend": "openai", "model": "m", "endpoint": url,
             "concurrency": args.concurrency}
    if args.rpm:
        judge["rate_limit"] = {"rpm": args.rpm}
    body = {"name": "bench", "output_dir": str(folder / executor), "judges": [judge],
            "corpus": {"references_per_language": args.refs}, "scoring": {"bootstrap": 0},
            "executor": executor, "ray": {"workers": 2}}
    path = folder / f"{executor}.yaml"
    path.write_bytes(msgspec.yaml.encode(body))
    return load_manifest(path)


def timed_audit(m) -> tuple[float, int]:
    from babelrun.app import audit as run
    from babelrun.engine.progress import Progress

    started = time.perf_counter()
    result = run.audit(m, handle_signals=False, progress=Progress(stream=io.StringIO(), interval=3600))
    elapsed = time.perf_counter() - started
    assert result.exit_code == 0 and result.new_records == result.planned_calls, result
    return elapsed, result.planned_calls


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--concurrency", type=int, default=16, help="calls in flight per worker")
    p.add_argument("--refs", type=int, default=12, help="references per language (12 languages)")
    p.add_argument("--rpm", type=float, default=None, help="a rate limit (both runs; Ray shares it)")
    args = p.parse_args()
    import ray

    t0 = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray_start = time.perf_counter() - t0
    try:
        with fake_judge(latency=LATENCY) as server, tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            local_s, calls = timed_audit(manifest(folder, server.url, args, "local"))
            ray_s, _ = timed_audit(manifest(folder, server.url, args, "ray"))
    finally:
        ray.shutdown()
    ideal = args.concurrency / LATENCY
    print(f"calls={calls} latency={LATENCY * 1000:.0f}ms concurrency={args.concurrency}/worker "
          f"rpm={args.rpm or '-'}")
    print(f"local: {local_s:.2f}s ({calls / local_s:.0f} calls/s, ideal {ideal:.0f})  "
          f"ray x2: {ray_s:.2f}s ({calls / ray_s:.0f} calls/s, ideal {2 * ideal:.0f})  ray.init: {ray_start:.1f}s")
    print(f"ray_speedup={local_s / ray_s:.2f}  (ray 2 workers ÷ local calls/s; ideal 2.0)  "
          f"overhead_per_call={(ray_s - local_s / 2) / calls * 1000:.2f}ms")


if __name__ == "__main__":
    main()
