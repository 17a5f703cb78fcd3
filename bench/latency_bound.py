"""Latency-bound throughput: with a 100 ms judge and concurrency C, the ideal is C / 0.1
calls/s. Prints achieved ÷ ideal (target >= 0.95).

    python bench/latency_bound.py [--concurrency 32] [--calls 3200]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).parent))
from _common import fake_judge, plan, run_engine  # noqa: E402

LATENCY = 0.1


async def through_babelrun(url: str, planned, concurrency: int, folder: Path) -> float:
    state, elapsed = await run_engine(url, planned, folder, concurrency=concurrency)
    assert state.ok == planned.calls_per_judge
    return elapsed


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--calls", type=int, default=3200)
    args = p.parse_args()
    planned = plan(args.calls)
    with fake_judge(latency=LATENCY) as server, tempfile.TemporaryDirectory() as tmp:
        elapsed = anyio.run(through_babelrun, server.url, planned, args.concurrency, Path(tmp))
    n = planned.calls_per_judge
    ideal = args.concurrency / LATENCY
    print(f"calls={n} concurrency={args.concurrency} latency={LATENCY * 1000:.0f}ms "
          f"achieved={n / elapsed:.1f}/s ideal={ideal:.0f}/s")
    print(f"latency_bound_ratio={n / elapsed / ideal:.3f}  (achieved ÷ C/latency; target >= 0.95)")


if __name__ == "__main__":
    main()
