"""llama-cpp-python's OpenAI-compatible server on 127.0.0.1, for tests and benchmarks.

``python -m llama_cpp.server`` (the ``server`` extra: fastapi, uvicorn and friends) serving a
GGUF model, the packaged ``gemma3-270m`` by default, so that the ``llamacpp_server`` preset is
audited against a real server::

    with llama_server("gemma3-270m", threads=2) as url:   # http://127.0.0.1:PORT/v1
        ... {"backend": "llamacpp_server", "endpoint": url, "model": "gemma3-270m"} ...

The server runs in its own process; it is stopped (SIGTERM, then SIGKILL) on the way out.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator

from ..judges.llamacpp import model_path


def available() -> bool:
    """Whether llama-cpp-python's server and its dependencies are importable."""
    try:
        import llama_cpp.server.app  # noqa: F401
    except ImportError:
        return False
    return True


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def llama_server(model: str = "gemma3-270m", threads: int | None = None, context: int = 4096,
                 start_s: float = 120.0) -> Iterator[str]:
    """Serve ``model`` (a packaged alias or a GGUF path) under the name ``model``; yields the
    base URL. Raises RuntimeError with the server's last stderr lines when it does not come up."""
    port = _free_port()
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(model_path(model)), "--model_alias", model,
           "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(context), "--verbose", "False"]
    if threads:
        cmd += ["--n_threads", str(threads), "--n_threads_batch", str(threads)]
    # stderr to a file, not a pipe: nobody reads it while the server runs, and a full pipe
    # would block the server's logging (and the server).
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + start_s
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"llama_cpp.server did not start: {_tail(proc, log)}")
            with contextlib.suppress(OSError), urllib.request.urlopen(f"{url}/models", timeout=1):
                break
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _tail(proc: subprocess.Popen, log) -> str:
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    log.seek(0)
    err = log.read().decode("utf-8", "replace").strip().splitlines()
    return " | ".join(err[-3:]) or f"exit status {proc.returncode}"
