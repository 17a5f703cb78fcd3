"""What a command is (``Command``), and the few helpers every command group shares."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Command:
    """One ``babelrun`` command: its parser's contents and its handler, side by side.

    ``exit_codes``: every code it can return (docs/operations.md, *Exit codes*; ``tests/e2e/test_exit_codes.py``
    runs each)."""

    name: str
    help: str
    description: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    exit_codes: tuple[int, ...] = (0, 2)


def print_result(result: Any, text: str, as_json: bool) -> None:
    import msgspec

    if as_json:
        print(msgspec.json.format(msgspec.json.encode(result), indent=2).decode())
    else:
        print(text, end="")


def save(result: Any, run_dirs: Sequence[Path], name: str) -> None:
    """An analysis's result as JSON in each run directory it read, for ``babelrun report``."""
    import msgspec

    from ...store.files import write_atomic

    body = msgspec.json.format(msgspec.json.encode(result), indent=2) + b"\n"
    for run_dir in run_dirs:
        write_atomic(Path(run_dir) / name, body)


def gate(reasons: list[str], what: str) -> int:
    """Exit 1 with one line per reason when a CI gate tripped, else 0."""
    for reason in reasons:
        print(f"{what}: {reason}", file=sys.stderr)
    return 1 if reasons else 0


def warn(lines: list[str]) -> None:
    for line in lines:
        print(f"warning: {line}", file=sys.stderr)


def diagnose(run_dir: Path, code: int, found: list | None = None) -> int:
    """Say, one line each, which judges are misconfigured (``score/diagnose.py``: replies that
    did not match the verdict pattern, refusals); ``EXIT_MISCONFIGURED`` where there is one
    and ``code`` (what the command would return otherwise) is 0, else ``code``. ``found``: the
    diagnoses already made of the run (an audit's report), not made again."""
    from ...score.diagnose import EXIT_MISCONFIGURED, of_run

    if found is None:
        found = of_run(run_dir)
    for d in found:
        print(f"misconfigured: {d.line()}", file=sys.stderr)
    return EXIT_MISCONFIGURED if found and code == 0 else code
