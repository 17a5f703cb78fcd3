"""The analyses of finished runs: one command per entry of the analyses registry
(``babelrun.analyses.registry.ANALYSES``), built here from the entry alone, and ``diff``.

Every generated command takes the entry's own arguments (its ``Argument`` data, made into the
parser's arguments here: the analyses know no argparse) and ``--json``; it computes the
result from the parsed values, writes it as the entry's file into each run directory it read (what the report
shows), prints it (its text, or JSON), and exits 1 when the entry's gate trips."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .command import Command, gate, print_result, save

if TYPE_CHECKING:
    from ...analyses.registry import Analysis, Argument


def add_argument(p: argparse.ArgumentParser, argument: Argument) -> None:
    """One ``registry.Argument`` as the parser's argument."""
    options: dict[str, Any] = {"type": argument.type}
    if argument.help is not None:
        options["help"] = argument.help
    if argument.metavar is not None:
        options["metavar"] = argument.metavar
    if argument.many:
        options["nargs"] = "+"
    if argument.optional:
        options["nargs"] = "?"
    if argument.name.startswith("-"):
        options["default"] = argument.default
    p.add_argument(argument.name, **options)


def command(analysis: Analysis) -> Command:
    """The command of one analysis registry entry."""

    def add_arguments(p: argparse.ArgumentParser) -> None:
        for argument in analysis.arguments:
            add_argument(p, argument)
        p.add_argument("--json", action="store_true", help=f"print the result as JSON (as {analysis.output})")

    def run(args: argparse.Namespace) -> int:
        values = {a.dest: getattr(args, a.dest) for a in analysis.arguments}
        result = analysis.compute(values)
        save(result, analysis.run_dirs(values), analysis.output)
        print_result(result, analysis.text(result), args.json)
        tripped = analysis.gate(values, result) if analysis.gate is not None else None
        return 0 if tripped is None else gate(*tripped)

    return Command(analysis.name, analysis.help, analysis.description, add_arguments, run,
                   (0, 2) if analysis.gate is None else (0, 1, 2))


def commands() -> tuple[Command, ...]:
    """One command per registry entry, in registry order (read when called)."""
    from ...analyses import registry

    return tuple(command(a) for a in registry.ANALYSES)


def _diff_arguments(df: argparse.ArgumentParser) -> None:
    df.add_argument("run_a", type=Path)
    df.add_argument("run_b", type=Path)
    df.add_argument("--json", action="store_true", help="print the result as JSON")
    df.add_argument("--fail-if-worse", nargs="?", const="", default=None, metavar="METRICS",
                    help="exit 1 when a judge is worse in RUN_B over all matched presentations on one of "
                    "METRICS (comma-separated card metrics, e.g. accuracy,reliability; R for reliability): "
                    "its paired change interval wholly on the bad side of 0 (for accuracy, also right less "
                    "often with McNemar p < --alpha). Bare: accuracy,reliability")
    df.add_argument("--alpha", type=float, default=0.05, help="McNemar level for --fail-if-worse (default 0.05)")


def _diff(args: argparse.Namespace) -> int:
    from ...analyses import drift

    metrics = None if args.fail_if_worse is None else drift.gate_metrics(args.fail_if_worse or None)
    result = drift.run(args.run_a, args.run_b)
    print_result(result, drift.text(result), args.json)
    return 0 if metrics is None else gate(drift.worse(result, args.alpha, metrics), "worse in B")


# Not a registry entry: it compares two runs and writes nothing into either, so it has no
# file and no report section.
DIFF = Command(
    "diff", "drift between two runs over the same items",
    "The same items judged in two runs (a judge before and after "
    "a provider update, two prompt versions): per-language change of every "
    "metric with paired-bootstrap intervals, exact McNemar on correctness, and "
    "a flag when the provider-reported model or fingerprint changed.",
    _diff_arguments, _diff, (0, 1, 2))
