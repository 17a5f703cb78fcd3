"""Start the loopback fake judge (babelrun.testing) in its own process, for benchmarks."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def fake_judge(latency: float = 0.0):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "babelrun.testing", "--port", str(port),
                             "--latency", str(latency)], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        proc.wait(10)
