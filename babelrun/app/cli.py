"""The ``babelrun`` command line. User errors print one line and exit non-zero; ``--debug``
shows the traceback."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .. import __version__

EPILOG = """\
exit codes: 0 done; 1 incomplete (a judge stopped or calls failed after retries: run the
same command again to retry them); 2 bad input (nothing written); 130 interrupted (resumable).
"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="babelrun",
        description="Audit LLM judges: degrade good reference answers in controlled ways, show "
        "each pair to the judge in both orders, and report per-language reliability cards. Agent "
        "trajectories (tool calls) are audited the same way: a corpus source of kind: trajectories "
        "and an agentic: section (examples/agentic.yaml); their cards are reported apart. "
        "Mitigations (dual_order, ensemble, cascade, calibrated) are judges built from judges, in a "
        "composites: section (examples/mitigation.yaml): they make no calls of their own and get "
        "the same cards, with their cost and their change against the base judge.",
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
    a.add_argument("--shard", metavar="I/N",
                   help="judge only shard I of N (0 <= I < N) of the plan's keys, e.g. one task of a "
                   "Slurm array; shards run side by side on one run directory, each paced at 1/N of "
                   "the rate limits. No cards: finish with `babelrun merge RUN_DIR`")
    a.add_argument("--executor", choices=("local", "ray"),
                   help="run here (local) or as shards on Ray workers (overrides the manifest's executor)")
    a.add_argument("--address", metavar="ADDR",
                   help="the Ray cluster to join (implies --executor ray; default: start one here)")
    a.add_argument("--workers", type=int, metavar="N", help="Ray workers, one shard each (default: ray.workers, 2)")

    v = sub.add_parser("validate", help="check a manifest without running anything",
                       description="Decode and check a manifest: fields, types, files, "
                       "languages, perturbations, key variables. Prints the plan's size.")
    v.add_argument("manifest", type=Path)

    s = sub.add_parser("score", help="recompute cards and report from a run directory's log",
                       description="Rebuild judgements.parquet, cards.json and report.md from "
                       "RUN_DIR/log alone (no judge calls).")
    s.add_argument("run_dir", type=Path)

    r = sub.add_parser("report", help="write the report (Markdown, HTML, plots) of one or more runs",
                       description="Rebuild the report from the run directories' logs alone (cards are "
                       "re-scored, no judge calls): report.md (leaderboard, recommendations, cards, "
                       "perturbation audit, analyses, run statistics, judge identities, example "
                       "failures), and with --html (the default) a self-contained report.html and "
                       "plots/*.png, *.svg. Several run directories make one report over all their "
                       "judges. audit writes the same report at the end of every run.")
    r.add_argument("run_dirs", type=Path, nargs="+", metavar="RUN_DIR")
    r.add_argument("--out", type=Path, metavar="DIR",
                   help="where to write (default: the run directory; required with several)")
    r.add_argument("--html", action=argparse.BooleanOptionalAction, default=True,
                   help="also write report.html and plots/ (default; --no-html: Markdown only)")

    c = sub.add_parser("compact", help="write RUN_DIR/judgements.parquet from the log",
                       description="Write the counted records (one per key) of RUN_DIR's log to "
                       "judgements.parquet, for scoring and for pandas / polars / DuckDB. "
                       "audit does this at the end of every run.")
    c.add_argument("run_dir", type=Path)

    mg = sub.add_parser("merge", help="unify the shards of a run directory and score them",
                        description="After `audit --shard` processes (or Ray workers) have written "
                        "their log segments into RUN_DIR: cut torn lines, count each key's first "
                        "successful record once (a key written by two shards counts once), write "
                        "judgements.parquet, cards.json and report.md, and say how many planned keys "
                        "are still missing. Idempotent; refused while a shard is still running.")
    mg.add_argument("run_dir", type=Path)

    g = sub.add_parser("languages", help="list the languages a manifest's corpus offers",
                       description="For the corpus sources of a manifest (all of them, before "
                       "the language choice and sampling): each language's code, name, script, "
                       "direction and how many references and labelled pairs it has.")
    g.add_argument("manifest", type=Path)

    inv = sub.add_parser("invariance", help="language-switch flip rates on a parallel corpus",
                         description="For a run over a parallel corpus (UDHR, FLORES): per judge "
                         "and language, how often the verdict and its correctness flip between the "
                         "pivot language and that language for the same unit, perturbation and "
                         "order, with Wilson intervals and an exact McNemar test. Also written to "
                         "RUN_DIR/invariance.json, which babelrun report shows.")
    inv.add_argument("run_dir", type=Path)
    inv.add_argument("--pivot", default="en", help="the pivot language (default en)")

    cal = sub.add_parser("calibrate", help="CBC: remove judges' language-specific bias",
                         description="From several judges audited over the same languages and "
                         "perturbations (one or more run directories): the judge x language means, "
                         "their language x judge interaction (double-centred), calibrated scores, "
                         "per-language rankings before and after, held-out cross-language rank "
                         "agreement (Kendall tau) under a task bootstrap, and rank reversals "
                         "(Benjamini-Hochberg adjusted). Also written to RUN_DIR/calibration.json "
                         "(each RUN_DIR), which babelrun report shows.")
    cal.add_argument("run_dirs", type=Path, nargs="+", metavar="RUN_DIR")
    cal.add_argument("--replicates", type=int, default=200, help="task-bootstrap replicates (default 200)")
    cal.add_argument("--seed", type=int, default=0)

    ag = sub.add_parser("agree", help="agreement of a run's verdicts with human labels",
                        description="Compare the judges' verdicts on a run's labelled pairs with "
                        "human labels (an LLMBar/MT-Bench-format folder or dataset.json, or a CSV "
                        "of item,label with label 1 or 2): accuracy with a Wilson interval, Cohen's "
                        "kappa with its Landis-Koch band, and n, per order and both orders.")
    ag.add_argument("run_dir", type=Path)
    ag.add_argument("labels", type=Path)

    df = sub.add_parser("diff", help="drift between two runs over the same items",
                        description="The same items judged in two runs (a judge before and after "
                        "a provider update, two prompt versions): per-language change of every "
                        "metric with paired-bootstrap intervals, exact McNemar on correctness, and "
                        "a flag when the provider-reported model or fingerprint changed.")
    df.add_argument("run_a", type=Path)
    df.add_argument("run_b", type=Path)

    b = sub.add_parser("bench-judge", help="find the concurrency each judge can use",
                       description="Run a small sample of the manifest's real requests against "
                       "each judge at concurrency 1, 2, 4, ... up to --max-concurrency, and report "
                       "calls/s, tokens/s and latency percentiles per level, and where throughput "
                       "stops growing: the concurrency to set for the audit. Rate limits in the "
                       "manifest apply. Nothing is written to the run directory.")
    b.add_argument("manifest", type=Path)
    b.add_argument("--sample", type=int, default=64, metavar="N", help="requests per level (default 64)")
    b.add_argument("--max-concurrency", type=int, default=64, metavar="C", help="the highest level (default 64)")
    b.add_argument("--judge", metavar="NAME", help="only this judge")
    b.add_argument("--json", action="store_true", help="print the results as JSON")
    return p


def _validate(args) -> int:
    from .. import manifest
    from ..plan import Plan
    from .phases import check_plan

    m = manifest.load(args.manifest)
    p = Plan.from_manifest(m)
    check_plan(p)
    skipped = sum(row.skipped for row in p.audit)
    agentic = sum(row.emitted for row in p.audit if row.perturbation.startswith("agent:"))
    lazy = sum(j.calls == "escalations" for j in m.judges)
    calls = f"{p.calls_per_judge * (len(m.judges) - lazy)} judge calls"
    if lazy:
        calls += f" + up to {p.calls_per_judge * lazy} escalations"
    composites = f", {len(m.composites)} composite(s)" if m.composites else ""
    print(f"{args.manifest}: ok — {len(m.judges)} judge(s){composites}, {len(p.languages)} "
          f"language(s), {p.n_items} items ({f'{agentic} agentic; ' if agentic else ''}"
          f"{skipped} no-op perturbations skipped), {calls}; output: {m.run_dir}")
    return 0


def _audit(args) -> int:
    from .. import manifest
    from ..engine.progress import Progress
    from . import audit as run

    m = _executor(manifest.load(args.manifest), args)
    shard = _shard(args, m)
    result = run.audit(m, progress=Progress(interval=args.progress_every), shard=shard)
    what = f"shard {shard.index}/{shard.count}: " if shard is not None else ""
    print(f"{result.run_dir}: {what}{result.new_records} new records; "
          f"{result.already_done} of {result.planned_calls} planned calls were already done")
    for reason in result.stop_reasons:
        print(f"error: {reason}", file=sys.stderr)
    if result.interrupted:
        print(f"interrupted: the log is intact; run `babelrun audit {args.manifest}` again to "
              "resume", file=sys.stderr)
    elif result.failed_calls:
        print(f"incomplete: {result.failed_calls} call(s) have no verdict yet; run "
              f"`babelrun audit {args.manifest}` again to retry them", file=sys.stderr)
    print(stats_table(result.stats))
    _warn(result.warnings)
    if shard is not None and not result.interrupted:
        print(f"shard done; when every shard is: `babelrun merge {result.run_dir}` (or `babelrun score "
              f"{result.run_dir}`) writes the cards")
    if result.cards is not None:
        print(f"cards: {Path(result.run_dir) / 'cards.json'}  report: {Path(result.run_dir) / 'report.html'}, report.md")
        for jc in result.cards.judges:
            r = jc.overall.reliability
            print(f"  {jc.judge}: R = {r.value} [{r.lo}, {r.hi}] over {jc.overall.items} items")
        for ac in result.cards.agentic:
            r = ac.overall.reliability
            print(f"  {ac.judge} (agentic): R_agent = {r.value} [{r.lo}, {r.hi}] over {ac.overall.items} items")
    return result.exit_code


def _executor(m, args):
    """The manifest with the command line's executor settings applied."""
    import msgspec

    from ..errors import UsageError

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
    from ..core.keys import Shard
    from ..errors import UsageError

    if args.shard is None:
        return None
    if m.executor == "ray":
        raise UsageError("--shard runs one shard here; the Ray executor runs them all: use one or the other")
    try:
        return Shard.parse(args.shard)
    except Exception as e:
        raise UsageError(str(e)) from None


def _merge(args) -> int:
    from .audit import merge_run

    m = merge_run(args.run_dir)
    print(f"{args.run_dir}: {m.segments} segment(s), {m.ok_records} successful records; "
          f"{m.counted} of {m.planned} planned keys counted once each "
          f"({m.ok_records - m.counted} repeated or outside the plan)")
    print(f"cards: {args.run_dir / 'cards.json'}  report: {args.run_dir / 'report.md'}")
    _warn(m.warnings)
    if m.counted < m.planned:
        print(f"incomplete: {m.planned - m.counted} planned key(s) have no verdict yet; run the "
              "missing shards, or `babelrun audit MANIFEST` to finish them here", file=sys.stderr)
        return 1
    return 0


def stats_table(stats) -> str:
    """The run's statistics per judge, as aligned text."""
    head = ("judge", "ok", "failed", "calls", "retries", "429s", "p50 ms", "p95 ms", "p99 ms",
            "tok in", "tok out", "calls/s")
    rows = [head]
    for j in stats.judges:
        lat = j.latency_ms
        rows.append((j.judge, j.ok, j.failed, j.calls, j.retries, j.rate_limited,
                     lat["p50"], lat["p95"], lat["p99"], j.tokens_in, j.tokens_out, j.calls_per_s))
    cells = [[("-" if v is None else str(v)) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(head))]
    lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
             for r in cells]
    for j in stats.judges:
        if j.errors:
            lines.append(f"{j.judge}: failed calls by kind: " + ", ".join(f"{k} {n}" for k, n in j.errors.items()))
    return "\n".join(lines)


def _report(args) -> int:
    from .. import report
    from ..errors import UsageError
    from ..store.rundir import read_run_info

    if args.out is None and len(args.run_dirs) > 1:
        raise UsageError("several run directories make one report: say where with --out DIR")
    for run_dir in args.run_dirs:
        read_run_info(run_dir)
    out = args.out or args.run_dirs[0]
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: is a file; give a folder")
    data = report.write(args.run_dirs, out, html=args.html)
    print(report.markdown_leaderboard(data), end="")
    written = ["report.md"] + (["report.html", "plots/"] if args.html else [])
    print(f"\n{out}: " + ", ".join(written))
    return 0


def _compact(args) -> int:
    from .audit import compact_run

    path = compact_run(args.run_dir)
    print(f"{path}")
    return 0


def _bench_judge(args) -> int:
    import msgspec

    from .. import manifest
    from ..errors import UsageError
    from . import benchjudge

    m = manifest.load(args.manifest)
    if args.judge is not None and args.judge not in {j.name for j in m.judges}:
        raise UsageError(f"no judge named {args.judge!r} in {args.manifest}")
    if args.sample < 1 or args.max_concurrency < 1:
        raise UsageError("--sample and --max-concurrency must be at least 1")
    results = benchjudge.run(m, sample=args.sample, cap=args.max_concurrency, only=args.judge)
    if args.json:
        print(msgspec.json.format(msgspec.json.encode(results), indent=2).decode())
    else:
        print("\n\n".join(benchjudge.table(r) for r in results))
    return 0


def _languages(args) -> int:
    from collections import Counter

    from .. import corpus, manifest
    from ..core import languages

    m = manifest.load(args.manifest)
    refs = Counter(r.lang for r in corpus.read(m.corpus.sources))
    pairs = Counter(p.lang for p in corpus.read_pairs(m.corpus.sources))
    trajectories = Counter(t.lang for t in corpus.read_trajectories(m.corpus.sources))
    rows = [("code", "language", "script", "direction", "references", "pairs", "trajectories")]
    for lang in sorted(set(refs) | set(pairs) | set(trajectories)):
        rows.append((lang, languages.name(lang), languages.script(lang), languages.direction(lang),
                     str(refs[lang]), str(pairs[lang]), str(trajectories[lang])))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    print(f"{len(rows) - 1} languages")
    return 0


def _invariance(args) -> int:
    from ..analyses import invariance
    from ..store.rundir import read_run_info

    read_run_info(args.run_dir)
    result = invariance.run(args.run_dir, args.pivot)
    _save(result, [args.run_dir], "invariance.json")
    print(invariance.text(result), end="")
    return 0


def _calibrate(args) -> int:
    from ..analyses import calibrate

    result = calibrate.run(args.run_dirs, replicates=args.replicates, seed=args.seed)
    _save(result, args.run_dirs, "calibration.json")
    print(calibrate.text(result), end="")
    return 0


def _save(result, run_dirs: list[Path], name: str) -> None:
    """An analysis's result as JSON in each run directory it read, for ``babelrun report``."""
    import msgspec

    from ..store.files import write_atomic

    body = msgspec.json.format(msgspec.json.encode(result), indent=2) + b"\n"
    for run_dir in run_dirs:
        write_atomic(Path(run_dir) / name, body)


def _agree(args) -> int:
    from ..analyses import agree

    print(agree.text(agree.run(args.run_dir, args.labels)), end="")
    return 0


def _diff(args) -> int:
    from ..analyses import drift

    print(drift.text(drift.run(args.run_a, args.run_b)), end="")
    return 0


def _score(args) -> int:
    from .audit import score_run
    from .phases import warnings

    cards = score_run(args.run_dir)
    print(f"{args.run_dir}: cards for {len(cards.judges)} judge(s) -> cards.json, report.md")
    _warn(warnings(args.run_dir))
    return 0


def _warn(lines: list[str]) -> None:
    for line in lines:
        print(f"warning: {line}", file=sys.stderr)


def _lean_arrow() -> None:
    # Arrow's default allocator keeps freed memory for reuse; a CLI run parses its log once,
    # so an allocator that hands memory back at once keeps peak RSS lower (measured on a
    # 120k-record compaction: jemalloc with no decay 149 MB, system 159 MB, mimalloc 179 MB).
    import pyarrow as pa

    try:
        pa.set_memory_pool(pa.jemalloc_memory_pool())
        pa.jemalloc_set_decay_ms(0)
    except NotImplementedError:  # a pyarrow build without jemalloc
        pa.set_memory_pool(pa.system_memory_pool())


def main(argv: list[str] | None = None) -> int:
    """Run one command. Everything it prints goes through ``SafeStream`` (the one
    terminal-safe printer): provider text, names from manifests and corpus text can carry
    escape sequences and bidi controls, which are shown, never obeyed."""
    from ..core.text import SafeStream

    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = SafeStream(out), SafeStream(err)
    try:
        return _main(argv)
    finally:
        sys.stdout, sys.stderr = out, err


def _main(argv: list[str] | None) -> int:
    from ..errors import UserError

    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv  # before or after the command
    args = _parser().parse_args([a for a in argv if a != "--debug"])
    _lean_arrow()
    handler = {"audit": _audit, "validate": _validate, "score": _score, "compact": _compact, "merge": _merge,
               "report": _report,
               "bench-judge": _bench_judge, "languages": _languages,
               "invariance": _invariance, "calibrate": _calibrate, "agree": _agree,
               "diff": _diff}[args.command]
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


if __name__ == "__main__":
    sys.exit(main())
