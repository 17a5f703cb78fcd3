"""A child of a Painter (``plots.painter``; arguments ``[--png] OUT_DIR GROUP...``): it loads
matplotlib, reads the report data on stdin, draws its groups of plots (all but the first in
forked processes) and writes them back on stdout as msgpack; an ``UnsafePath`` is one line on
stderr and exit code 2."""

from __future__ import annotations

import io
from pathlib import Path

import msgspec

from ...store.files import UnsafePath
from ..data import ReportData
from . import canvas
from .files import Plot, render


def _render_groups(data: ReportData, out_dir: Path, groups: list[list[str] | None], png: bool = False) -> list[Plot]:
    """``render`` of each group; every group after the first in a forked process, side by
    side (they share the imported matplotlib). A forked drawer that fails exits as this
    process would (its stderr is this one's), and this process exits with its code."""
    import os
    import signal
    import sys

    forked = []
    for group in groups[1:]:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the forked drawer
            os.close(read)
            code = 0
            try:
                with os.fdopen(write, "wb") as out:
                    out.write(msgspec.msgpack.encode(render(data, out_dir, group, png=png)))
            except UnsafePath as e:
                print(f"UnsafePath: {e}", file=sys.stderr)
                code = 2
            except BaseException:
                import traceback

                traceback.print_exc()
                code = 1
            sys.stderr.flush()
            os._exit(code)
        os.close(write)
        forked.append((pid, read))
    try:
        plots = render(data, out_dir, groups[0], png=png)
    except BaseException:  # the drawers forked are ended, not left writing to a pipe no one reads
        for pid, read in forked:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(read)
        raise
    for pid, read in forked:
        with os.fdopen(read, "rb") as f:
            given = f.read()
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            sys.exit(code if code > 0 else 1)
        plots += msgspec.msgpack.decode(given, type=list[Plot])
    return plots


def _warm(png: bool) -> None:
    """Load what the first figure would: the font and the SVG writer (and the PNG one)."""
    plt = canvas.pyplot()
    fig = plt.figure(figsize=(1, 1))
    try:
        fig.text(0.5, 0.5, "babelrun 0.5")
        fig.savefig(io.StringIO(), format="svg")
        if png:
            fig.savefig(io.BytesIO(), format="png", dpi=20)
    finally:
        plt.close(fig)


if __name__ == "__main__":  # a child of a Painter
    import os
    import sys

    args = sys.argv[1:]
    png = args[:1] == ["--png"]  # the Painter's own arguments: [--png] OUT_DIR GROUP...
    out_dir, groups = args[png], args[png + 1:]
    _warm(png)
    given = sys.stdin.buffer.read()
    if not given:  # the Painter was closed without drawing
        sys.exit(0)
    try:
        plots = _render_groups(msgspec.msgpack.decode(given, type=ReportData), Path(out_dir),
                               [arg.split(",") for arg in groups] or [None], png)
    except UnsafePath as e:
        print(f"UnsafePath: {e}", file=sys.stderr)  # one line, re-raised as such by the parent
        sys.exit(2)
    sys.stdout.buffer.write(msgspec.msgpack.encode(plots))
    sys.stdout.buffer.flush()
    sys.stderr.flush()
    # Out without the interpreter's teardown (matplotlib, numpy and the rest freed one by one,
    # ~0.1-0.3 s): the Painter reads the plots until this process has ended.
    os._exit(0)
