"""Shared pieces of the benchmarks: the loopback fake judge in its own process, a plan of
about N calls, and one judge run through the engine."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field


@dataclass
class Served:
    url: str
    counters: dict = field(default_factory=dict)  # filled in when the server stops


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def fake_judge(latency: float = 0.0, **options):
    """``options`` become the server's flags: ``rpm_limit=600`` is ``--rpm-limit 600``."""
    port = free_port()
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in options.items()]
    proc = subprocess.Popen([sys.executable, "-m", "babelrun.testing", "--port", str(port),
                             "--latency", str(latency), *flags],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    served = Served(f"http://127.0.0.1:{port}/v1")
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            time.sleep(0.05)
        yield served
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
        lines = [line for line in err.splitlines() if line.startswith("{")]
        served.counters = json.loads(lines[-1]) if lines else {}


def plan(n_calls: int):
    """About ``n_calls`` calls (both orders) from the bundled corpus."""
    from babelrun import corpus
    from babelrun.manifest import Manifest
    from babelrun.plan import Plan

    refs = sorted(corpus.select(Manifest(name="bench", judges=[])).references, key=lambda r: (r.ref_id, r.lang))
    perts = [("truncate", [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]),
             ("repeat_pad", [0.1, 0.3, 0.5, 0.7, 0.9]), ("number_corrupt", [0.2, 0.4, 0.6, 0.8])]
    per_ref = 18  # items per reference at most, before no-ops
    return Plan(refs[: max(1, n_calls // (2 * per_ref) + 1)], perts, seed=0)


async def run_engine(url: str, planned, folder, **judge_settings):
    """One openai-backend judge at ``url`` through babelrun's engine and log writer.
    Returns the judge's final state and the wall time."""
    from babelrun import engine, judges
    from babelrun.engine.progress import Progress
    from babelrun.judges import judge_spec
    from babelrun.store import log
    from babelrun.store.done import DoneSet

    spec = judge_spec(**{"name": "bench", "backend": "openai", "model": "m", "endpoint": url, **judge_settings})
    writer = log.LogWriter(folder)
    started = time.perf_counter()
    try:
        result = await engine.run([judges.build(spec, 0)], planned, DoneSet(), writer,
                                  engine.RunOptions(progress=Progress(interval=3600), handle_signals=False))
    finally:
        writer.close()
    return result.judges[0], time.perf_counter() - started
