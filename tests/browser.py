"""A headless Chromium driven over the DevTools protocol (aiohttp's WebSocket client; no
Selenium or Playwright), for the report's real-browser checks and screenshots.

``python tests/browser.py PAGE.html OUT.png [HEIGHT]`` writes a screenshot of the page's top
HEIGHT pixels (default 2000) at 1,280 px wide.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

WIDTH = 1280
CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "chrome")


def find() -> str | None:
    return next((p for p in map(shutil.which, CANDIDATES) if p), None)


# What a page must satisfy, measured in the page: its widest element against the viewport,
# and every figure (inline SVG or <img>) drawn with a size.
MEASURE = """(() => {
  const doc = document.documentElement;
  const wide = [...document.querySelectorAll('body *')]
    .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1 && !e.closest('section, details'))
    .map(e => e.tagName + (e.id ? '#' + e.id : '')).slice(0, 5);
  const imgs = [...document.images].map(i => ({src: i.src.slice(0, 40), ok: i.complete && i.naturalWidth > 0}));
  const svgs = [...document.querySelectorAll('figure svg')].map(s => {
    const r = s.getBoundingClientRect(); return {id: s.closest('figure').id, w: r.width, h: r.height}; });
  return {scrollWidth: doc.scrollWidth, innerWidth: window.innerWidth, height: doc.scrollHeight,
          wide, imgs, svgs};
})()"""


class Page:
    def __init__(self, ws):
        self.ws, self.n = ws, 0

    async def call(self, method: str, **params):
        self.n += 1
        await self.ws.send_str(json.dumps({"id": self.n, "method": method, "params": params}))
        while True:
            msg = json.loads((await self.ws.receive()).data)
            if msg.get("id") == self.n:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg["result"]


async def _session(html: Path, work):
    import aiohttp

    binary = find()
    profile = tempfile.mkdtemp(prefix="babelrun-chromium-")
    proc = subprocess.Popen([binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                             "--remote-debugging-port=0", f"--user-data-dir={profile}", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        port_file = Path(profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not port_file.exists() or not port_file.read_text().strip():
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("chromium did not start")
            await asyncio.sleep(0.05)
        port = port_file.read_text().split()[0]
        async with aiohttp.ClientSession() as http:
            targets = await (await http.get(f"http://127.0.0.1:{port}/json")).json()
            url = next(t for t in targets if t["type"] == "page")["webSocketDebuggerUrl"]
            async with http.ws_connect(url, max_msg_size=0) as ws:
                page = Page(ws)
                await page.call("Page.enable")
                await page.call("Emulation.setDeviceMetricsOverride", width=WIDTH, height=900, deviceScaleFactor=1,
                                mobile=False)
                await page.call("Page.navigate", url=html.resolve().as_uri())
                for _ in range(200):  # until the document has loaded
                    ready = await page.call("Runtime.evaluate", expression="document.readyState", returnByValue=True)
                    if ready["result"]["value"] == "complete":
                        break
                    await asyncio.sleep(0.05)
                return await work(page)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(profile, ignore_errors=True)


def measure(html: Path) -> dict:
    async def work(page):
        result = await page.call("Runtime.evaluate", expression=MEASURE, returnByValue=True)
        return result["result"]["value"]

    return asyncio.run(_session(html, work))


def shown_views(html: Path, fragment: str) -> list[str]:
    """The ids of the matrix views displayed once the page's URL ends in ``#fragment``."""
    async def work(page):
        await page.call("Runtime.evaluate", expression=f"location.hash = {json.dumps(fragment)}")
        await asyncio.sleep(0.2)
        result = await page.call("Runtime.evaluate", returnByValue=True, expression=(
            "[...document.querySelectorAll('.views > .view')]"
            ".filter(v => getComputedStyle(v).display !== 'none').map(v => v.id)"))
        return result["result"]["value"]

    return asyncio.run(_session(html, work))


def screenshot(html: Path, out: Path, height: int = 2000) -> None:
    async def work(page):
        shot = await page.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                               clip={"x": 0, "y": 0, "width": WIDTH, "height": height, "scale": 1})
        out.write_bytes(base64.b64decode(shot["data"]))

    asyncio.run(_session(html, work))


if __name__ == "__main__":
    import sys

    screenshot(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 2000)
