"""Rate-limit adherence: the loopback server enforces R requests per sliding minute and
answers 429 above it; babelrun is configured at the same R. Prints achieved ÷ R (target
>= 0.95) and the 429s the server had to send (target 0). Takes about calls ÷ R minutes.

    python bench/rate_limit.py [--rpm 1200] [--calls 1500] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).parent))
from _common import fake_judge, plan, run_engine  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rpm", type=int, default=1200)
    p.add_argument("--calls", type=int, default=1500)
    p.add_argument("--concurrency", type=int, default=16)
    args = p.parse_args()
    planned = plan(args.calls)
    with fake_judge(rpm_limit=args.rpm) as server, tempfile.TemporaryDirectory() as tmp:
        state, elapsed = anyio.run(lambda: run_engine(server.url, planned, Path(tmp), concurrency=args.concurrency,
                                                         rate_limit={"rpm": args.rpm}))
    rejected = server.counters.get("injected", {}).get("rpm", 0)
    achieved = state.ok / elapsed * 60
    print(f"calls={state.ok} rpm_limit={args.rpm} elapsed={elapsed:.1f}s achieved={achieved:.0f}/min "
          f"server_429s={rejected} client_429s={state.rate_limited}")
    print(f"rate_limit_ratio={achieved / args.rpm:.3f}  (achieved ÷ limit; target >= 0.95, with 0 429s)")


if __name__ == "__main__":
    main()
