"""The ``babelrun`` command line. User errors print one line and exit non-zero; ``--debug``
shows the traceback.

One module per command group, each holding its commands' arguments and handlers side by side
(``audit``: audit, validate, merge; ``outputs``: score, report, compact, show, export;
``judge``: languages, pin, check, bench-judge; ``analyses``: one command per entry of the
analyses registry, and diff; ``cache``: cache stats and prune). ``COMMANDS`` is the table of
them all, in ``--help`` order; ``build_parser`` makes the parser from it and ``main`` runs one
command."""

from __future__ import annotations

import argparse
import sys

from ...core.version import __version__
from . import analyses, audit, cache, data, judge, outputs
from .command import Command

__all__ = ["COMMANDS", "EPILOG", "Command", "build_parser", "commands", "main", "run"]

EPILOG = """\
exit codes (every command; docs/operations.md, Exit codes, gives them command by command):
  0    done
  1    incomplete (a judge stopped or calls failed after retries: run the same command
       again to retry them; merge: planned keys missing), or a gate tripped (diff
       --fail-if-worse, agree --min-kappa), or the run directory is busy
  2    bad input: a wrong manifest field or argument, a folder that is no run directory,
       nothing the command can work on (one judge for calibrate, no matched units for
       invariance, no labelled pair for agree, an unknown item for show); nothing written
  3    misconfigured judge (audit, score, merge): over 20 % of a judge's replies did not
       match its verdict pattern, or it refused; the cards are written, the judge not judged
  130  interrupted (resumable)
"""

DESCRIPTION = (
    "Audit LLM judges: degrade good reference answers in controlled ways, show "
    "each pair to the judge in both orders, and report per-language reliability cards. Agent "
    "trajectories (tool calls) are audited the same way: a corpus source of kind: trajectories "
    "and an agentic: section (examples/agentic.yaml); their cards are reported apart. "
    "Mitigations (dual_order, ensemble, cascade, calibrated) are judges built from judges, in a "
    "composites: section (examples/mitigation.yaml): they make no calls of their own and get "
    "the same cards, with their cost and their change against the base judge.")


def commands() -> tuple[Command, ...]:
    """Every command, in ``--help`` order; the analyses' as the registry has them now."""
    return (
        audit.AUDIT, audit.VALIDATE, outputs.SCORE, outputs.REPORT, outputs.COMPACT, audit.MERGE,
        judge.LANGUAGES, *analyses.commands(), analyses.DIFF, outputs.SHOW, outputs.EXPORT, judge.PIN,
        judge.CHECK, judge.BENCH_JUDGE, cache.CACHE, data.DATA,
    )


COMMANDS: tuple[Command, ...] = commands()


def build_parser(table: tuple[Command, ...] | None = None) -> argparse.ArgumentParser:
    """The parser of every command of ``table`` (default: ``commands()``)."""
    p = argparse.ArgumentParser(prog="babelrun", description=DESCRIPTION, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"babelrun {__version__}")
    p.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for c in commands() if table is None else table:
        c.add_arguments(sub.add_parser(c.name, help=c.help, description=c.description))
    return p


def _lean_arrow() -> None:
    # Arrow's allocators keep freed memory for reuse; a CLI run parses its log once, so an
    # allocator that hands memory back at once keeps peak RSS lower (measured on a 120k-record
    # compaction: jemalloc with no decay 149 MB, system 159 MB, mimalloc 179 MB).
    # ``pa.set_memory_pool`` reaches pyarrow's own allocations only: the Parquet reader and the
    # compute kernels take the C++ default pool (mimalloc, unless ARROW_DEFAULT_MEMORY_POOL
    # says otherwise), and ``jemalloc_set_decay_ms`` reaches only the arenas made after it.
    # Both are read when libarrow loads, so they are set here, before pyarrow is imported (a
    # user's own values win). On the 508,820-call probes audit (``bench/udhr_all.py --probes``) the report's reads
    # had left ~100 MB resident in the two allocators with no Arrow buffer alive.
    import os

    if sys.platform.startswith("linux") and "pyarrow" not in sys.modules:  # Linux wheels carry jemalloc
        os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "jemalloc")
        os.environ.setdefault("JE_ARROW_MALLOC_CONF", "dirty_decay_ms:0,muzzy_decay_ms:0")
    import pyarrow as pa

    try:
        pa.set_memory_pool(pa.jemalloc_memory_pool())
        pa.jemalloc_set_decay_ms(0)
    except NotImplementedError:  # a pyarrow build without jemalloc
        pa.set_memory_pool(pa.system_memory_pool())


def _arrow_without_pandas_probe() -> None:
    # pyarrow asks, on the first array or scalar it makes from Python values or numpy arrays
    # (the log writer's first index, or the compaction), whether the value is a pandas object,
    # and on its first type inference for pandas's null values; where pandas is installed it
    # imports pandas to find out: 0.4–0.5 s and ~18 MB of modules (pandas 3.1, pyarrow 26),
    # ~6 % of a 20,000-call audit. babelrun never hands pyarrow a pandas value, so in its own
    # program both questions are answered "no pandas", as an install without pandas answers
    # them: pandas is hidden from the two probes alone, then importable again as before.
    # pyarrow imports pandas anew when its pandas API is asked for by name (``to_pandas``,
    # ``Table.from_pandas``), so a user's Python judge that converts DataFrames still can; only
    # ``pa.array`` of a Series, or of a list holding ``pd.NA`` / ``pd.NaT``, reads as it would
    # without pandas. A process that imported pandas already keeps pyarrow's own behaviour.
    if "pandas" in sys.modules:
        return
    import pyarrow as pa

    hidden = _Hidden("pandas")
    sys.meta_path.insert(0, hidden)
    try:
        pa.array([""])  # both probes (the array's and the type inference's): each remembers its answer
    finally:
        sys.meta_path.remove(hidden)


class _Hidden:
    """An import finder under which one module is not installed. (Not ``sys.modules[name] =
    None``: Cython's import takes that None for the module.)"""

    def __init__(self, name: str):
        self.name = name

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == self.name:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


def main(argv: list[str] | None = None, *, program: bool = False) -> int:
    """Run one command. Everything it prints goes through ``SafeStream`` (the one
    terminal-safe printer): provider text, names from manifests and corpus text can carry
    escape sequences and bidi controls, which are shown, never obeyed. ``program``: this
    process is the ``babelrun`` program's (``run``), not a caller's that imported ``main``."""
    from ...core.text import SafeStream

    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = SafeStream(out), SafeStream(err)
    try:
        return _main(argv, program)
    finally:
        sys.stdout, sys.stderr = out, err


def run() -> None:
    """The ``babelrun`` program: ``main``, then out of the process without tearing the
    interpreter down (``_leave``). The process is the program's own, so pyarrow is told
    here that babelrun hands it no pandas object (``_arrow_without_pandas_probe``)."""
    _leave(main(program=True))


def _leave(code: int) -> None:
    """Exit with ``code`` the way the interpreter would, less its teardown: after an audit,
    freeing every module and object one by one took ~0.3 s, once the work was done and
    written. The exit handlers still run (llama.cpp's models are freed by one) and the output
    streams are flushed; with a thread still working (not a daemon), the ordinary exit waits
    for it."""
    import atexit
    import os
    import threading

    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: what the interpreter's exit would meet
            code = code or 120
    os._exit(code)


def _main(argv: list[str] | None, program: bool) -> int:
    from ...errors import UserError

    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv  # before or after the command
    table = commands()
    args = build_parser(table).parse_args([a for a in argv if a != "--debug"])
    _lean_arrow()
    if program:
        _arrow_without_pandas_probe()
    handler = {c.name: c.run for c in table}[args.command]
    try:
        return handler(args)
    except KeyboardInterrupt:
        print("babelrun: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        # A task group wraps what its tasks raised: find the cause a person can act on.
        cause = _leaf(e, UserError) or _leaf(e, OSError)
        if debug or cause is None:
            raise
        if isinstance(cause, UserError):
            print(f"babelrun: error: {cause}", file=sys.stderr)
            return cause.exit_code
        # The disk is full, a folder is read-only, a file vanished: what, where, and that
        # what was written is resumable once fixed.
        assert isinstance(cause, OSError)
        where = f"{cause.filename}: " if cause.filename else ""
        print(f"babelrun: error: {where}{cause.strerror or cause}", file=sys.stderr)
        return 1


def _leaf(error: BaseException, kind: type[BaseException]) -> BaseException | None:
    """``error`` itself if it is a ``kind``, else the first ``kind`` inside an exception group."""
    if isinstance(error, kind):
        return error
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            found = _leaf(inner, kind)
            if found is not None:
                return found
    return None
