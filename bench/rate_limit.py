"""Rate-limit adherence: the loopback server enforces R requests per sliding minute and
answers 429 above it; babelrun is configured at the same R. Prints achieved ÷ R (target
>= 0.95) and the 429s the server had to send (target 0). Takes about calls ÷ R minutes.

    python bench/rate_limit.py [--rpm 1200] [--calls 1500] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).parent))
from _server import fake_judge  # noqa: E402
from engine_overhead import plan  # noqa: E402

from babelrun import engine, judges, log  # noqa: E402
from babelrun.manifest import JudgeSpec, RateLimit  # noqa: E402
from babelrun.progress import Progress  # noqa: E402


async def audit(url: str, planned, rpm: float, concurrency: int, folder: Path):
    spec = JudgeSpec(name="bench", backend="openai", model="m", endpoint=url, concurrency=concurrency,
                     rate_limit=RateLimit(rpm=rpm))
    writer = log.LogWriter(folder)
    started = time.perf_counter()
    try:
        result = await engine.run([judges.build(spec, 0)], planned, log.DoneSet(), writer,
                                  progress=Progress(interval=3600), handle_signals=False)
    finally:
        writer.close()
    return result.judges[0], time.perf_counter() - started


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rpm", type=int, default=1200)
    p.add_argument("--calls", type=int, default=1500)
    p.add_argument("--concurrency", type=int, default=16)
    args = p.parse_args()
    planned = plan(args.calls)
    with fake_judge(rpm_limit=args.rpm) as server, tempfile.TemporaryDirectory() as tmp:
        state, elapsed = anyio.run(audit, server.url, planned, args.rpm, args.concurrency, Path(tmp))
    rejected = server.counters.get("injected", {}).get("rpm", 0)
    achieved = state.ok / elapsed * 60
    print(f"calls={state.ok} rpm_limit={args.rpm} elapsed={elapsed:.1f}s achieved={achieved:.0f}/min "
          f"server_429s={rejected} client_429s={state.rate_limited}")
    print(f"rate_limit_ratio={achieved / args.rpm:.3f}  (achieved ÷ limit; target >= 0.95, with 0 429s)")


if __name__ == "__main__":
    main()
