"""Start the loopback fake judge (babelrun.testing) in its own process, for benchmarks."""

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
