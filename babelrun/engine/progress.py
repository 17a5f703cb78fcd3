"""Progress of a running audit, on stderr.

On a terminal: one live line per judge, redrawn in place — a bar, done/total, calls/s over
the last few seconds, ETA, retries, errors — fitted to the terminal's width (measured at every
redraw, so a resized window is followed): the bar shrinks first, then the name, then the
least useful fields go, so a line never wraps (a wrapped line breaks the in-place redraw).
Elsewhere (CI, log files): one plain line per judge every ``interval`` seconds, nothing
redrawn. A finished judge shows its average rate, not the last seconds' (zero).

No progress library: the one line per judge is 40 lines of code here, and rich or tqdm would
add a dependency to every install for it.
"""

from __future__ import annotations

import math
import shutil
import sys
import time
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

import anyio

from ..core.text import neutralise

if TYPE_CHECKING:
    from .state import JudgeState

BAR = 24
MIN_BAR = 8
NAME = 12


def _clock(seconds: float) -> str:
    if not math.isfinite(seconds) or seconds < 0:
        return "-"
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Progress:
    def __init__(self, stream: TextIO | None = None, interval: float | None = None,
                 live: bool | None = None, window_s: float = 10.0, width: int | None = None):
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self.interval = interval if interval is not None else (0.5 if self.live else 10.0)
        self.window_s = window_s
        self._history: dict[str, deque[tuple[float, int]]] = {}
        self._drawn = 0  # lines on screen from the last live redraw
        self._width = width  # None: the terminal's, at each redraw

    @property
    def width(self) -> int:
        return self._width or shutil.get_terminal_size((100, 24)).columns

    def _rate(self, state: JudgeState, now: float) -> float:
        """Calls/s over the last ``window_s`` seconds (the whole run until then); the run's
        average once the judge has ended."""
        if state.ended is not None or (state.remaining == 0 and state.ok):
            return state.ok / state.elapsed if state.elapsed > 0 else 0.0
        hist = self._history.setdefault(state.judge_id, deque())
        hist.append((now, state.ok))
        while len(hist) > 2 and now - hist[1][0] >= self.window_s:
            hist.popleft()
        (t0, n0), (t1, n1) = hist[0], hist[-1]
        if t1 > t0:
            return (n1 - n0) / (t1 - t0)
        return state.ok / state.elapsed if state.elapsed > 0 else 0.0  # the first report

    def line(self, state: JudgeState, now: float | None = None) -> str:
        now = time.monotonic() if now is None else now
        done = state.done_before + state.ok
        frac = done / state.planned if state.planned else 1.0
        rate = self._rate(state, now)
        eta = _clock(state.remaining / rate) if rate > 0 and state.remaining > 0 else "-"
        status = " STOPPED" if state.stopped else ""
        # Fields from the most to the least needed; the live line drops from the end to fit.
        fields = [f"{done}/{state.planned} ({frac:4.0%})", f"{rate:.1f} calls/s", f"ETA {eta}",
                  f"err {state.failed}", f"retry {state.retries}"]
        if not self.live:  # a log line: every field, in the words log readers already grep for
            return (f"{state.name:<{NAME}} {done}/{state.planned} ({frac:4.0%}) {rate:7.1f} calls/s ETA {eta}  "
                    f"retries {state.retries}  errors {state.failed}{'  STOPPED' if state.stopped else ''}")
        return self._fit(state.name, frac, fields, status)

    def _fit(self, name: str, frac: float, fields: list[str], status: str) -> str:
        """The live line in at most ``width - 1`` columns: shrink the bar, then the name, then
        drop fields from the end."""
        room = self.width - 1
        for keep in range(len(fields), 0, -1):
            tail = " ".join(fields[:keep]) + status
            for name_w in (NAME, 8):
                bar = room - name_w - len(tail) - 2
                if bar >= MIN_BAR:
                    bar = min(BAR, bar)
                    filled = round(frac * bar)
                    return f"{name[:name_w]:<{name_w}} {'█' * filled}{'·' * (bar - filled)} {tail}"
            if len(tail) + 9 <= room:
                return f"{name[:8]:<8} {tail}"
        return f"{name[:8]} {fields[0]}{status}"[:room]

    def draw(self, states: Sequence[JudgeState]) -> None:
        now = time.monotonic()
        lines = [neutralise(self.line(s, now)) for s in states]  # names come from the manifest
        if self.live:
            up = f"\x1b[{self._drawn}F" if self._drawn else ""
            # Our own control sequences go to the raw stream, past the CLI's SafeStream.
            getattr(self.stream, "raw", self.stream).write(up + "".join(f"\x1b[2K{line}\n" for line in lines))
            self._drawn = len(lines)
        else:
            self.stream.write("".join(f"progress: {line}\n" for line in lines))
        self.stream.flush()

    def note(self, message: str) -> None:
        self.stream.write(neutralise(message) + "\n")
        self.stream.flush()
        self._drawn = 0  # the note scrolled the bars: draw them afresh below it

    async def run(self, states: Sequence[JudgeState]) -> None:
        while True:
            await anyio.sleep(self.interval)
            self.draw(states)

    def finish(self, states: Sequence[JudgeState]) -> None:
        if self.live:
            self.draw(states)
