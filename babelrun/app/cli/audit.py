"""``audit``, ``validate``, ``merge``: running an audit, checking one before, finishing shards."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import summary
from .command import Command, diagnose, warn


def _audit_arguments(a: argparse.ArgumentParser) -> None:
    a.add_argument("manifest", type=Path, help="the manifest YAML file")
    a.add_argument("--progress-every", type=float, metavar="SECONDS",
                   help="progress line interval (default: live on a terminal, 10 s otherwise)")
    a.add_argument("--shard", metavar="I/N",
                   help="judge only shard I of N (0 <= I < N) of the plan's keys, e.g. one task of a "
                   "Slurm array; shards run side by side on one run directory, each paced at 1/N of "
                   "the rate limits. No cards: finish with `babelrun merge RUN_DIR`")
    a.add_argument("--executor", choices=("local", "ray"),
                   help="run here (local) or as shards on Ray workers (overrides the manifest's executor)")
    a.add_argument("--address", metavar="ADDR",
                   help="the Ray cluster to join (implies --executor ray; default: start one here)")
    a.add_argument("--workers", type=int, metavar="N", help="Ray workers, one shard each (default: ray.workers, 2)")
    a.add_argument("--judge", action="append", metavar="NAME",
                   help="audit only this judge (repeatable); the others keep their records, untouched")
    a.add_argument("--limit", type=int, metavar="N",
                   help="judge at most N new presentations per judge in this process (a trial run; "
                   "the same command without --limit continues where it stopped)")
    a.add_argument("--budget", type=float, metavar="USD",
                   help="stop issuing a judge's calls once this run has spent USD on it (needs the "
                   "judges' price:); the calls in flight finish, and the next run continues")


def _audit(args: argparse.Namespace) -> int:
    import math

    from ... import manifest
    from ...engine.progress import Progress
    from ...errors import UsageError
    from .. import audit as run

    if args.budget is not None and not (math.isfinite(args.budget) and args.budget > 0):
        raise UsageError(f"--budget must be a finite amount above 0 (got {args.budget!r})")  # before anything
    m = _executor(manifest.load(args.manifest), args)
    shard = _shard(args, m)
    result = run.audit(m, progress=Progress(interval=args.progress_every), shard=shard, judges=args.judge,
                       limit=args.limit, budget=args.budget)
    what = f"shard {shard.index}/{shard.count}: " if shard is not None else ""
    print(f"{result.run_dir}: {what}{result.new_records} new records; "
          f"{result.already_done} of {result.planned_calls} planned calls were already done"
          f"{summary.spent(result.stats)}")
    for reason in result.stop_reasons:
        print(f"error: {reason}", file=sys.stderr)
    if result.interrupted:
        print(f"interrupted: the log is intact; run `babelrun audit {args.manifest}` again to "
              "resume", file=sys.stderr)
    elif result.failed_calls:
        print(f"incomplete: {result.failed_calls} call(s) have no verdict yet; run "
              f"`babelrun audit {args.manifest}` again to retry them", file=sys.stderr)
    print(summary.stats_table(result.stats))
    left = sum(j.planned - j.done_before - j.ok for j in result.stats.judges)
    if args.limit is not None and left and not result.interrupted:
        print(f"limited to {args.limit} per judge: {left} presentation(s) left; run without --limit to "
              "judge them")
    warn(result.warnings)
    if shard is not None and not result.interrupted:
        print(f"shard done; when every shard is: `babelrun merge {result.run_dir}` (or `babelrun score "
              f"{result.run_dir}`) writes the cards")
    if result.cards is not None:
        summary.cards(result)
        return diagnose(Path(result.run_dir), result.exit_code, result.diagnoses)
    return result.exit_code


def _executor(m, args):
    """The manifest with the command line's executor settings applied."""
    import msgspec

    from ...errors import UsageError

    ray = m.ray
    if args.address is not None:
        ray = msgspec.structs.replace(ray, address=args.address)
    if args.workers is not None:
        if args.workers < 1:
            raise UsageError("--workers must be at least 1")
        ray = msgspec.structs.replace(ray, workers=args.workers)
    executor = args.executor or ("ray" if args.address is not None else m.executor)
    return msgspec.structs.replace(m, executor=executor, ray=ray)


def _shard(args, m):
    from ...core.keys import Shard
    from ...errors import UsageError

    if args.shard is None:
        return None
    if m.executor == "ray":
        raise UsageError("--shard runs one shard here; the Ray executor runs them all: use one or the other")
    try:
        return Shard.parse(args.shard)
    except Exception as e:
        raise UsageError(str(e)) from None


def _validate(args: argparse.Namespace) -> int:
    from ... import manifest
    from ...core.items import is_family
    from ...plan import Plan
    from .. import estimate
    from ..runfiles import check_plan

    m = manifest.load(args.manifest)
    p = Plan.from_manifest(m)
    check_plan(p)
    skipped = sum(row.skipped for row in p.audit)
    agentic = sum(row.emitted for row in p.audit if is_family(row.perturbation, "agentic"))
    lazy = sum(j.calls == "escalations" for j in m.judges)
    asks = sum(j.samples for j in m.judges if j.calls != "escalations")  # every sample is a call
    calls = f"{p.calls_per_judge * asks} judge calls"
    if lazy:
        escalated = sum(j.samples for j in m.judges if j.calls == "escalations")
        calls += f" + up to {p.calls_per_judge * escalated} escalations"
    composites = f", {len(m.composites)} composite(s)" if m.composites else ""
    merged = sum(row.merged for row in p.audit)
    print(f"{args.manifest}: ok — {len(m.judges)} judge(s){composites}, {len(p.languages)} "
          f"language(s), {p.n_items} items ({f'{agentic} agentic; ' if agentic else ''}"
          f"{skipped} no-op perturbations skipped, {merged} identical severities merged), {calls}; "
          f"output: {m.run_dir}")
    for line in _unjudged(p):
        print(f"  {line}")
    print(estimate.text(estimate.estimate(m, p)), end="")
    return 0


def _unjudged(plan) -> list[str]:
    """The plan's languages that will get no card or no verdict, and why (validate)."""
    from ...core.items import is_family

    emitted: dict[str, int] = {}
    for row in plan.audit:
        if not (is_family(row.perturbation, "labelled") or is_family(row.perturbation, "agentic")):
            emitted[row.lang] = emitted.get(row.lang, 0) + row.emitted
    out = [f"segmentation weak: {s.lang} ({s.sentences_per_unit:.2f} sentences per unit over "
           f"{s.units} units): its card will carry no verdict" for s in plan.segmentation if s.weak]
    out += [f"not judged: {lang}: no items (every perturbation was a no-op)"
            for lang, n in sorted(emitted.items()) if n == 0]
    return out


def _merge(args: argparse.Namespace) -> int:
    from ..audit import merge_run

    m = merge_run(args.run_dir)
    print(f"{args.run_dir}: {m.segments} segment(s), {m.ok_records} successful records; "
          f"{m.counted} of {m.planned} planned keys counted once each "
          f"({m.ok_records - m.counted} repeated or outside the plan)")
    print(f"cards: {args.run_dir / 'cards.json'}  report: {args.run_dir / 'report.md'}")
    warn(m.warnings)
    if m.counted < m.planned:
        print(f"incomplete: {m.planned - m.counted} planned key(s) have no verdict yet; run the "
              "missing shards, or `babelrun audit MANIFEST` to finish them here", file=sys.stderr)
        return diagnose(args.run_dir, 1)
    return diagnose(args.run_dir, 0)


def _manifest(p: argparse.ArgumentParser) -> None:
    p.add_argument("manifest", type=Path)


def _run_dir(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", type=Path)


AUDIT = Command(
    "audit", "run (or resume) the audit a manifest describes",
    "Judge every planned (judge, item, order) key that has no "
    "successful record yet, then write cards.json and report.md. Interrupt "
    "with Ctrl-C at any time; running the same command again continues "
    "where it stopped, repeating nothing that finished.",
    _audit_arguments, _audit, (0, 1, 2, 3, 130))
VALIDATE = Command(
    "validate", "check a manifest without running anything",
    "Decode and check a manifest: fields, types, files, "
    "languages, perturbations, key variables. Prints the plan's size and, per "
    "judge, the estimated tokens in and out, and the cost where the judge has a "
    "price: {input_per_mtok, output_per_mtok} in the manifest.",
    _manifest, _validate)
MERGE = Command(
    "merge", "unify the shards of a run directory and score them",
    "After `audit --shard` processes (or Ray workers) have written "
    "their log segments into RUN_DIR: cut torn lines, count each key's first "
    "successful record once (a key written by two shards counts once), write "
    "judgements.parquet, cards.json and report.md, and say how many planned keys "
    "are still missing. Idempotent; refused while a shard is still running.",
    _run_dir, _merge, (0, 1, 2, 3))
