"""``python -m babelrun.testing``: the fake judge in a process of its own (how benchmarks run
it); it prints its URL, serves until SIGTERM or Ctrl-C, then prints its counters."""

from __future__ import annotations

import threading

import msgspec

from ._faults import LATENCY_DISTRIBUTIONS
from ._server import FakeJudgeServer


def _parser():
    import argparse

    p = argparse.ArgumentParser(
        prog="python -m babelrun.testing",
        description="Serve the fake OpenAI-compatible judge on 127.0.0.1 until SIGTERM or "
                    "Ctrl-C. It prints its URL when ready, and its counters (JSON) on stderr "
                    "when it stops. See FakeJudgeServer for what each knob does.")
    p.add_argument("--port", type=int, default=8765, help="0 takes a free port (default 8765)")
    p.add_argument("--key", help="require this API key")
    p.add_argument("--model", default="fake-judge-1", help="the model name replies carry")
    p.add_argument("--latency", type=float, default=0.0, help="mean seconds per 200 reply")
    p.add_argument("--latency-dist", choices=LATENCY_DISTRIBUTIONS, default="fixed")
    p.add_argument("--jitter", type=float, default=0.0, help="uniform: half-width, seconds")
    p.add_argument("--sigma", type=float, default=0.5, help="lognormal: shape")
    for kind, what in (("429", "429 with Retry-After"), ("5xx", "500/502/503"),
                       ("timeout", "hang --hang seconds"), ("drop", "close without reply"),
                       ("malformed", "200 with a broken body")):
        p.add_argument(f"--rate-{kind}", type=float, default=0.0, metavar="P",
                       help=f"chance per request: {what}")
    p.add_argument("--hang", type=float, default=30.0, help="seconds a timeout fault hangs")
    p.add_argument("--retry-after", type=float, default=0.05, help="Retry-After of injected 429s")
    p.add_argument("--rpm-limit", type=int, help="requests admitted per sliding minute")
    p.add_argument("--seed", type=int, default=0)
    return p


def main(argv: list[str] | None = None) -> None:
    """``python -m babelrun.testing [--port P] [--latency S] [--rate-429 P] ...``."""
    import signal
    import sys

    p = _parser()
    args = p.parse_args(argv)
    try:
        server = FakeJudgeServer(
            latency_s=args.latency, latency=args.latency_dist, jitter_s=args.jitter,
            sigma=args.sigma, api_key=args.key, retry_after=args.retry_after, model=args.model,
            rate_429=args.rate_429, rate_5xx=args.rate_5xx, rate_timeout=args.rate_timeout,
            rate_drop=args.rate_drop, rate_malformed=args.rate_malformed, hang_s=args.hang,
            rpm_limit=args.rpm_limit, seed=args.seed, port=args.port)
    except ValueError as e:
        p.error(str(e))
    stop = threading.Event()
    # SIGTERM (how benchmarks stop it) and Ctrl-C both end the loop below, so the server shuts
    # down cleanly and the counters get printed.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    with server:
        print(f"fake judge at {server.url}", flush=True)
        while not stop.wait(0.5):
            pass
    print(msgspec.json.encode(server.snapshot()).decode(), file=sys.stderr, flush=True)
