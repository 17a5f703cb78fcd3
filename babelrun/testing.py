"""A loopback OpenAI-compatible judge server, for tests, benchmarks and trying a set-up.

It answers ``POST /v1/chat/completions`` like a deterministic judge: it reads the two
answers out of the prompt and names the one whose content hash is smaller, so it is
consistent across orders and across runs. Latency, a required key and a schedule of faults
are settable. It listens on 127.0.0.1 only.

    with FakeJudgeServer(latency_s=0.05, api_key="k") as server:
        ... endpoint: server.url ...
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import threading
from collections import Counter

import msgspec
from aiohttp import web

_ANSWER = re.compile(r"\[Answer (A|B)\]\n(.*?)\n\[End of Answer \1\]", re.S)


def choose(prompt: str) -> str:
    """The fake judge's verdict: the answer with the smaller blake2b digest (order-free)."""
    answers = dict(_ANSWER.findall(prompt))
    if set(answers) != {"A", "B"}:
        return "I see no answers to compare."

    def digest(text: str) -> bytes:
        return hashlib.blake2b(text.encode(), digest_size=8).digest()

    return "A" if digest(answers["A"]) <= digest(answers["B"]) else "B"


class FakeJudgeServer:
    def __init__(self, *, latency_s: float = 0.0, api_key: str | None = None,
                 faults: list[int] | None = None, retry_after: float = 0.05,
                 model: str = "fake-judge-1"):
        """``faults``: HTTP statuses to answer the first requests with, in order (e.g.
        ``[429, 500]``); ``0`` in the list drops the connection instead."""
        self.latency_s = latency_s
        self.api_key = api_key
        self.faults = list(faults or [])
        self.retry_after = retry_after
        self.model = model
        self.requests = 0
        self.statuses: Counter = Counter()
        self.authorizations: set[str] = set()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        with self._lock:
            self.requests += 1
            fault = self.faults.pop(0) if self.faults else None
        self.authorizations.add(request.headers.get("Authorization", ""))
        if self.api_key is not None and request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return self._status(401, {"error": {"message": "Incorrect API key provided"}})
        body = msgspec.json.decode(await request.read())
        if fault is not None:
            if fault == 0:
                request.transport.close()  # drop the connection mid-request
                return web.Response(status=500)
            headers = {"Retry-After": str(self.retry_after)} if fault == 429 else {}
            return self._status(fault, {"error": {"message": f"injected {fault}"}}, headers)
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        prompt = body["messages"][-1]["content"]
        reply = {
            "id": "chatcmpl-fake", "object": "chat.completion", "model": self.model,
            "system_fingerprint": "fp_fake",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": choose(prompt)},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": len(prompt) // 4, "completion_tokens": 1},
        }
        return self._status(200, reply)

    def _status(self, status: int, payload: dict, headers: dict | None = None) -> web.Response:
        self.statuses[status] += 1
        return web.Response(status=status, body=msgspec.json.encode(payload),
                            content_type="application/json", headers=headers)

    async def _serve(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", self.port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]
        self._stop = asyncio.Event()
        self._ready.set()
        await self._stop.wait()
        await runner.cleanup()

    def __enter__(self) -> FakeJudgeServer:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_until_complete, args=(self._serve(),),
                                        daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("fake judge server did not start")
        return self

    def __exit__(self, *exc) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)
        self._loop.close()


def main() -> None:
    """``python -m babelrun.testing [--port P] [--latency S] [--key K]``: serve until Ctrl-C."""
    import argparse
    import time

    p = argparse.ArgumentParser(prog="python -m babelrun.testing", description=main.__doc__)
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--latency", type=float, default=0.0, help="seconds per reply")
    p.add_argument("--key", help="require this API key")
    args = p.parse_args()
    server = FakeJudgeServer(latency_s=args.latency, api_key=args.key)
    server.port = args.port
    with server:
        print(f"fake judge at {server.url}", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
