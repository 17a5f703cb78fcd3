"""The ``babelrun`` command line. User errors print one line and exit non-zero; ``--debug``
shows the traceback."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import __version__

EPILOG = """\
exit codes: 0 done; 1 incomplete (a judge stopped or calls failed after retries: run the
same command again to retry them); 2 bad input (nothing written); 130 interrupted (resumable).
"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="babelrun",
        description="Audit LLM judges: degrade good reference answers in controlled ways, show "
        "each pair to the judge in both orders, and report per-language reliability cards.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"babelrun {__version__}")
    p.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    a = sub.add_parser("audit", help="run (or resume) the audit a manifest describes",
                       description="Judge every planned (judge, item, order) key that has no "
                       "successful record yet, then write cards.json and report.md. Interrupt "
                       "with Ctrl-C at any time; running the same command again continues "
                       "where it stopped, repeating nothing that finished.")
    a.add_argument("manifest", type=Path, help="the manifest YAML file")
    a.add_argument("--progress-every", type=float, metavar="SECONDS",
                   help="progress line interval (default: live on a terminal, 10 s otherwise)")

    v = sub.add_parser("validate", help="check a manifest without running anything",
                       description="Decode and check a manifest: fields, types, files, "
                       "languages, perturbations, key variables. Prints the plan's size.")
    v.add_argument("manifest", type=Path)

    s = sub.add_parser("score", help="recompute cards and report from a run directory's log",
                       description="Rebuild judgements.parquet, cards.json and report.md from "
                       "RUN_DIR/log alone (no judge calls).")
    s.add_argument("run_dir", type=Path)
    return p


def _validate(args) -> int:
    from . import manifest, run

    m = manifest.load(args.manifest)
    planned_items, plan_audit = run.plan(m)
    skipped = sum(row.skipped for row in plan_audit)
    print(f"{args.manifest}: ok — {len(m.judges)} judge(s), {len({i.lang for i in planned_items})} "
          f"language(s), {len(planned_items)} items ({skipped} no-op perturbations skipped), "
          f"{2 * len(planned_items) * len(m.judges)} judge calls; output: {m.run_dir}")
    return 0


def _audit(args) -> int:
    from . import manifest, run

    m = manifest.load(args.manifest)
    result = run.audit(m, progress_interval=args.progress_every)
    print(f"{result.run_dir}: {result.new_records} new records; "
          f"{result.already_done} of {result.planned_calls} planned calls were already done")
    for reason in result.stop_reasons:
        print(f"error: {reason}", file=sys.stderr)
    if result.interrupted:
        print(f"interrupted: the log is intact; run `babelrun audit {args.manifest}` again to "
              "resume", file=sys.stderr)
    elif result.failed_calls:
        print(f"incomplete: {result.failed_calls} call(s) have no verdict yet; run "
              f"`babelrun audit {args.manifest}` again to retry them", file=sys.stderr)
    if result.cards is not None:
        print(f"cards: {Path(result.run_dir) / 'cards.json'}  report: {Path(result.run_dir) / 'report.md'}")
        for jc in result.cards.judges:
            r = jc.overall.reliability
            print(f"  {jc.judge}: R = {r.value} [{r.lo}, {r.hi}] over {jc.overall.items} items")
    return result.exit_code


def _score(args) -> int:
    from .run import score_run

    cards = score_run(args.run_dir)
    print(f"{args.run_dir}: cards for {len(cards.judges)} judge(s) -> cards.json, report.md")
    return 0


def main(argv: list[str] | None = None) -> int:
    from .errors import UserError

    args = _parser().parse_args(argv)
    handler = {"audit": _audit, "validate": _validate, "score": _score}[args.command]
    try:
        return handler(args)
    except UserError as e:
        if args.debug:
            raise
        print(f"babelrun: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("babelrun: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
