"""The plots drawn in child processes (``python -m babelrun.report.plots``, see
``__main__``), so that matplotlib and its figures never enter the caller's memory."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec

from ...store.files import UnsafePath, safe_dir
from ..data import ReportData
from .figures import GROUPS, PLOTS
from .files import Plot


class Painter:
    """``render`` in child processes: matplotlib (about 40 MB once imported) and its figures
    never enter the caller's memory, so an audit's peak stays that of judging and scoring
    (bench/full_plan.py). The report data goes in and the plots come back as msgpack.

    The children start when the Painter is made and import matplotlib (and load its font)
    while the caller works: ``audit`` makes one before it plans and judges, so the report
    does not wait for those imports. With two or more CPUs the plots are shared between two
    children (``GROUPS``), drawn side by side; on Linux the second is forked by the first once
    the data is in, so matplotlib is imported once (~0.7 CPU-s, which an audit's judging
    would otherwise share its cores with). ``draw`` once (or ``start``, then ``collect``), then
    ``close`` (always: a Painter never drawn ends its children)."""

    def __init__(self, out_dir: Path, *, parts: int | None = None, png: bool = False):
        import subprocess
        import sys

        self.out_dir = Path(out_dir)
        self.started = False  # whether the children were given their data
        if parts is None:
            parts = 2 if _cpus() >= 2 else 1
        groups = GROUPS if parts >= 2 else (tuple(name for name, _, _ in PLOTS),)
        # each child's argument: its groups, one argument each (names joined by commas)
        children = [groups] if len(groups) > 1 and _forks() else [(group,) for group in groups]
        flags = ["--png"] if png else []
        self._procs = [subprocess.Popen([sys.executable, "-m", __package__, *flags, str(self.out_dir),
                                         *(",".join(group) for group in child)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        start_new_session=True)  # a Ctrl-C drains the audit, not them
                       for child in children]

    def draw(self, data: ReportData) -> list[Plot]:
        self.start(data)
        return self.collect()

    def start(self, data: ReportData) -> None:
        """Hand ``data`` to the children, which draw it while the caller goes on; ``collect``
        waits for the plots. The figures read only the cards and the analyses' results
        (``report.data.plotted``), so an audit starts them as soon as it has scored."""
        safe_dir(self.out_dir, "plots")  # a link at plots/ refused here, in one line
        payload = msgspec.msgpack.encode(data)
        for proc in self._procs:  # every child reads all its input before it draws
            assert proc.stdin is not None
            try:
                proc.stdin.write(payload)
                proc.stdin.close()
            except BrokenPipeError:
                pass  # it failed early: its stderr says why
            proc.stdin = None
        self.started = True

    def collect(self) -> list[Plot]:
        """The plots of the data ``start`` was given, in report order, once every child is done."""
        drawn: dict[str, Plot] = {}
        for proc in self._procs:
            stdout, stderr = proc.communicate()
            if proc.returncode != 0:
                self._failed(proc.returncode, stderr)
            drawn.update((p.name, p) for p in msgspec.msgpack.decode(stdout, type=list[Plot]))
        return [drawn[name] for name, _, _ in PLOTS if name in drawn]  # report order

    def _failed(self, returncode: int, err: bytes):
        stderr = err.decode(errors="replace").strip()
        system = re.match(r"\w*Error: \[Errno (\d+)\] (.*)$", stderr.splitlines()[-1] if stderr else "")
        if returncode == 2 and stderr.startswith("UnsafePath: "):
            raise UnsafePath(stderr.removeprefix("UnsafePath: "))
        if system:  # a full disk, a read-only folder: the caller reports it as the OSError it is
            raise OSError(int(system.group(1)), system.group(2), str(self.out_dir / "plots"))
        raise RuntimeError(f"drawing the plots failed: {stderr}")

    def close(self) -> None:
        """End the children that are still running (a Painter never drawn, or a failed draw)."""
        import os
        import signal

        for proc in self._procs:
            if proc.returncode is None:
                try:  # the child leads its own process group: a forked drawer goes with it
                    os.killpg(proc.pid, signal.SIGKILL)
                except OSError:
                    proc.kill()
                proc.communicate()

    def __enter__(self) -> Painter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _cpus() -> int:
    import os

    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _forks() -> bool:
    """Whether a child may fork its sibling after importing matplotlib (Linux: fork is
    safe with the Agg backend; elsewhere each child imports its own)."""
    import os
    import sys

    return sys.platform.startswith("linux") and hasattr(os, "fork")


def render_apart(data: ReportData, out_dir: Path, *, png: bool = False) -> list[Plot]:
    """``render`` in child processes, started now (``Painter``)."""
    with Painter(out_dir, png=png) as painter:
        return painter.draw(data)
