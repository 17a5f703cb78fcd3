"""Where one `babelrun audit` spends its time: phase marks (wall and CPU seconds) of an audit
run in this process, against the loopback fake judge, with the bare aiohttp loop on the same
bodies timed first. ``bench/whole_audit.py``'s manifest and corpus (65 languages, openai backend,
concurrency 16). CPU seconds are firmer than wall time on a shared machine; the plot children's
CPU is counted apart (they draw from the end of scoring on, while the parent gathers the rest
of the report, then it waits for them in ``plots(wait)``). The process is set up as the
``babelrun`` program sets up its own (Arrow's allocator, pyarrow's pandas probe answered: see
``app.cli``); ``--library`` leaves both as a program that calls ``babelrun.audit()`` has them.

    python bench/audit_phases.py [--refs 10] [--library]
"""

from __future__ import annotations

import argparse
import functools
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).parent))
from _common import fake_judge  # noqa: E402
from engine_overhead import bare_loop  # noqa: E402
from full_plan import write_corpus  # noqa: E402
from whole_audit import bodies, manifest  # noqa: E402

WALL: dict[str, float] = {}
CPU: dict[str, float] = {}


def _mark(label: str, started: float, cpu: float) -> None:
    WALL[label] = WALL.get(label, 0.0) + time.perf_counter() - started
    CPU[label] = CPU.get(label, 0.0) + time.process_time() - cpu


def timed(owner, name: str, label: str) -> None:
    """Wrap ``owner.name`` so that its calls add to the phase ``label``."""
    f = getattr(owner, name)

    @functools.wraps(f)
    def wrapped(*args, **kwargs):
        started, cpu = time.perf_counter(), time.process_time()
        try:
            return f(*args, **kwargs)
        finally:
            _mark(label, started, cpu)

    setattr(owner, name, wrapped)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--refs", type=int, default=10, help="references per language (65 languages)")
    p.add_argument("--library", action="store_true",
                   help="no program set-up: pyarrow as a caller's process has it")
    args = p.parse_args()
    if not args.library:
        from babelrun.app import cli

        cli._lean_arrow()
        cli._arrow_without_pandas_probe()
    import babelrun.app.audit as audit
    from babelrun.plan import Plan
    from babelrun.report.plots import painter

    survey = Plan.from_manifest.__func__  # type: ignore[attr-defined]

    def planned(cls, *a, **k):
        started, cpu = time.perf_counter(), time.process_time()
        try:
            return survey(cls, *a, **k)
        finally:
            _mark("plan", started, cpu)

    phases = [(audit, "write_run_files", "run files"), (audit, "run_shard", "engine"),
              (audit, "return_freed_memory", "hand-backs"), (audit.compact, "write_parquet", "compaction"),
              (audit, "score_run", "scoring"), (audit, "run_warnings", "warnings"),
              (audit.report, "write", "report"), (painter.Painter, "collect", "plots(wait)")]
    for owner, name, label in phases:
        timed(owner, name, label)
    with tempfile.TemporaryDirectory() as tmp, fake_judge() as server:
        folder = Path(tmp)
        write_corpus(folder / "refs.jsonl", args.refs)
        sent = bodies(manifest(folder, server.url, args.refs, "probe"))
        bare = anyio.run(bare_loop, server.url, sent, 16)
        Plan.from_manifest = classmethod(planned)  # type: ignore[method-assign,assignment]
        os.chdir(folder)
        path = manifest(folder, server.url, args.refs, "run")
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        started, cpu = time.perf_counter(), time.process_time()
        audit.audit(path, handle_signals=False)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    plots = after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime
    print(f"{'library' if args.library else 'program'} set-up: pandas imported {'pandas' in sys.modules}")
    print(f"calls={len(sent)} bare={bare:.2f}s audit (in process, no start-up)={wall:.2f}s "
          f"ratio={bare / wall:.3f}; load average {os.getloadavg()[0]:.1f}")
    print("wall s:", "  ".join(f"{k} {v:.2f}" for k, v in WALL.items()))
    print("CPU s: ", "  ".join(f"{k} {v:.2f}" for k, v in CPU.items()), f" (audit {cpu:.2f};"
          f" plot children {plots:.2f})")


if __name__ == "__main__":
    main()
