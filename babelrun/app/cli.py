"""The ``babelrun`` command line. User errors print one line and exit non-zero; ``--debug``
shows the traceback."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..core.version import __version__

EPILOG = """\
exit codes (every command; the README's table gives them command by command):
  0    done
  1    incomplete (a judge stopped or calls failed after retries: run the same command
       again to retry them; merge: planned keys missing), or a gate tripped (diff
       --fail-if-worse, agree --min-kappa), or the run directory is busy
  2    bad input: a wrong manifest field or argument, a folder that is no run directory,
       nothing the command can work on (one judge for calibrate, no matched units for
       invariance, no labelled pair for agree, an unknown item for show); nothing written
  130  interrupted (resumable)
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
    a.add_argument("--judge", action="append", metavar="NAME",
                   help="audit only this judge (repeatable); the others keep their records, untouched")
    a.add_argument("--limit", type=int, metavar="N",
                   help="judge at most N new presentations per judge in this process (a trial run; "
                   "the same command without --limit continues where it stopped)")

    v = sub.add_parser("validate", help="check a manifest without running anything",
                       description="Decode and check a manifest: fields, types, files, "
                       "languages, perturbations, key variables. Prints the plan's size and, per "
                       "judge, the estimated tokens in and out, and the cost where the judge has a "
                       "price: {input_per_mtok, output_per_mtok} in the manifest.")
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

    inv = sub.add_parser("invariance", help="language-switch flip rates on a parallel corpus or labelled pairs",
                         description="For a run over a parallel corpus (UDHR, FLORES): per judge "
                         "and language, how often the verdict and its correctness flip between the "
                         "pivot language and that language for the same unit, perturbation and "
                         "order, with Wilson intervals and an exact McNemar test. For labelled pairs in "
                         "several conditions (Judge-LS): strict and tie-half accuracy, flips against the "
                         "pivot condition, position inconsistency, per subset, and a transformation audit "
                         "with every figure given for all pairs and for audit-passing pairs. Also written "
                         "to RUN_DIR/invariance.json, which babelrun report shows.")
    inv.add_argument("run_dir", type=Path)
    inv.add_argument("--pivot", help="the pivot language or condition (default: the run's corpus.parallel.pivot, "
                     "else en)")
    inv.add_argument("--json", action="store_true", help="print the result as JSON (as invariance.json)")
    inv.add_argument("--audit-min-length-ratio", type=float, metavar="R",
                     help="transformation audit: flag a variant whose text is shorter than R times the "
                     "pivot's, in characters (default 0.15)")
    inv.add_argument("--audit-max-number-change", type=int, metavar="N",
                     help="transformation audit: flag a variant whose count of numbers differs from the "
                     "pivot's by more than N (default 1)")

    sp = sub.add_parser("self-preference", help="how much each judge favours its own model family's answers",
                        description="For judges that declare a family (family: in the manifest) and labelled "
                        "pairs whose outputs name theirs (family_1, family_2): how often the judge names the "
                        "worse output when its own family wrote it, against when its family wrote neither; "
                        "the difference (Newcombe interval, Fisher exact p), the self-preference share with a "
                        "bootstrap interval, a paired McNemar test against the other families' judges on the "
                        "same presentations, and all of it again on pairs where the worse output is not the "
                        "longer. Also written to RUN_DIR/self_preference.json.")
    sp.add_argument("run_dir", type=Path)

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
    cal.add_argument("--json", action="store_true", help="print the result as JSON (as calibration.json)")

    ag = sub.add_parser("agree", help="agreement of a run's verdicts with human labels",
                        description="Compare the judges' verdicts on a run's labelled pairs with "
                        "human labels (an LLMBar/MT-Bench-format folder or dataset.json, or a CSV "
                        "of item,label with label 1 or 2): accuracy with a Wilson interval, Cohen's "
                        "kappa with its Landis-Koch band, and n, per order and both orders. Also "
                        "written to RUN_DIR/agreement.json, which babelrun report shows.")
    ag.add_argument("run_dir", type=Path)
    ag.add_argument("labels", type=Path)
    ag.add_argument("--json", action="store_true", help="print the result as JSON (as agreement.json)")
    ag.add_argument("--min-kappa", type=float, metavar="K",
                    help="exit 1 when a judge's kappa (both orders, all sets) is below K or undefined")

    df = sub.add_parser("diff", help="drift between two runs over the same items",
                        description="The same items judged in two runs (a judge before and after "
                        "a provider update, two prompt versions): per-language change of every "
                        "metric with paired-bootstrap intervals, exact McNemar on correctness, and "
                        "a flag when the provider-reported model or fingerprint changed.")
    df.add_argument("run_a", type=Path)
    df.add_argument("run_b", type=Path)
    df.add_argument("--json", action="store_true", help="print the result as JSON")
    df.add_argument("--fail-if-worse", action="store_true",
                    help="exit 1 when a judge is worse in RUN_B over all matched presentations: right less "
                    "often with McNemar p < --alpha, or R's paired change interval wholly below 0")
    df.add_argument("--alpha", type=float, default=0.05, help="McNemar level for --fail-if-worse (default 0.05)")

    sh = sub.add_parser("show", help="one item as the judges saw it, and their replies",
                        description="The item's question and both answers, regenerated from the run's "
                        "manifest and corpus, and for every presentation (judge, order): the chat "
                        "messages the judge was sent, its raw reply, the verdict, latency and attempts. "
                        "ITEM_ID: from report.html's examples or judgements.parquet; a unique prefix is "
                        "enough.")
    sh.add_argument("run_dir", type=Path)
    sh.add_argument("item_id")
    sh.add_argument("--judge", metavar="NAME", help="only this judge's presentations")
    sh.add_argument("--json", action="store_true", help="print as JSON")

    ex = sub.add_parser("export", help="a run's cards and presentations as flat tables",
                        description="Write cards.FMT (one row per judge, family, language, perturbation "
                        "and metric: run, judge, judge_id, family, lang, perturbation, metric, value, lo, "
                        "hi, n) and presentations.FMT (one row per counted record, with a correct column "
                        "and ts as a UTC timestamp) for pandas, polars, DuckDB or a spreadsheet.")
    ex.add_argument("run_dir", type=Path)
    ex.add_argument("--format", choices=("parquet", "csv", "json"), default="parquet",
                    help="parquet (default), csv, or json (JSON Lines, .jsonl)")
    ex.add_argument("--out", type=Path, metavar="DIR", help="where to write (default RUN_DIR/export)")

    pn = sub.add_parser("pin", help="write a lock file that pins each judge of a run",
                        description="Per judge of RUN_DIR: judge_id, model, endpoint, prompt template and "
                        "its hash, the served model and fingerprint the records report, the date, accuracy "
                        "on the run's labelled pairs (and agreement with human labels, with --labels), and a "
                        "fixed canary set of items with their recorded verdicts. `babelrun check` re-asks it.")
    pn.add_argument("run_dir", type=Path)
    pn.add_argument("--out", type=Path, metavar="LOCKFILE", help="where to write (default RUN_DIR/judge.lock.json)")
    pn.add_argument("--canary", type=int, default=24, metavar="N",
                    help="canary items per judge, each asked in both orders (default 24)")
    pn.add_argument("--alpha", type=float, default=0.05, help="check's significance level (default 0.05)")
    pn.add_argument("--labels", type=Path, help="human labels, as for `babelrun agree`, to record agreement")
    pn.add_argument("--tolerance", type=float, default=0.05,
                    help="the verdict-flip rate a re-ask may show without drift (default 0.05)")

    ck = sub.add_parser("check", help="re-ask a lock file's canary set: has the judge drifted?",
                        description="Ask each pinned judge its canary items again (both orders) and compare "
                        "with the recorded verdicts: verdict flips, exact McNemar on correctness, the served "
                        "model and fingerprint. Exit 1 when a judge drifted (p < alpha), its identity changed "
                        "or canary calls failed; 0 otherwise. Each check is appended to the lock file.")
    ck.add_argument("lockfile", type=Path)
    ck.add_argument("--judge", metavar="NAME", help="only this judge")
    ck.add_argument("--alpha", type=float, help="significance level (default: the lock file's)")
    ck.add_argument("--tolerance", type=float, help="tolerated verdict-flip rate (default: the lock file's)")

    b = sub.add_parser("bench-judge", help="find the concurrency each judge can use, and what limits it",
                       description="Run the manifest's real requests against each judge at concurrency "
                       "1, 2, 4, ... up to --max-concurrency, each level for --seconds (and at least "
                       "--min-calls calls), through the audit's own call pipeline (rate limits, retries). "
                       "Per level: calls/s, tokens/s, latency percentiles, 429s, retries, failures. "
                       "Says what binds: the provider's rate limit (with the limit observed), "
                       "concurrency (the level to set), or nothing yet (still growing at the top "
                       "level). The manifest's concurrency does not apply. Nothing is written.")
    b.add_argument("manifest", type=Path)
    b.add_argument("--sample", type=int, default=64, metavar="N",
                   help="distinct requests drawn from the plan, cycled (default 64)")
    b.add_argument("--seconds", type=float, default=5.0, metavar="S", help="seconds per level at least (default 5)")
    b.add_argument("--min-calls", type=int, default=32, metavar="N", help="calls per level at least (default 32)")
    b.add_argument("--max-concurrency", type=int, default=64, metavar="C", help="the highest level (default 64)")
    b.add_argument("--judge", metavar="NAME", help="only this judge")
    b.add_argument("--json", action="store_true", help="print the results as JSON")
    return p


def _validate(args) -> int:
    from .. import manifest
    from ..core.items import is_family
    from ..plan import Plan
    from .phases import check_plan

    m = manifest.load(args.manifest)
    p = Plan.from_manifest(m)
    check_plan(p)
    skipped = sum(row.skipped for row in p.audit)
    agentic = sum(row.emitted for row in p.audit if is_family(row.perturbation, "agentic"))
    lazy = sum(j.calls == "escalations" for j in m.judges)
    calls = f"{p.calls_per_judge * (len(m.judges) - lazy)} judge calls"
    if lazy:
        calls += f" + up to {p.calls_per_judge * lazy} escalations"
    composites = f", {len(m.composites)} composite(s)" if m.composites else ""
    merged = sum(row.merged for row in p.audit)
    print(f"{args.manifest}: ok — {len(m.judges)} judge(s){composites}, {len(p.languages)} "
          f"language(s), {p.n_items} items ({f'{agentic} agentic; ' if agentic else ''}"
          f"{skipped} no-op perturbations skipped, {merged} identical severities merged), {calls}; "
          f"output: {m.run_dir}")
    for line in _unjudged(p):
        print(f"  {line}")
    from . import estimate

    print(estimate.text(estimate.estimate(m, p)), end="")
    return 0


def _unjudged(plan) -> list[str]:
    """The plan's languages that will get no card or no verdict, and why (validate)."""
    emitted: dict[str, int] = {}
    for row in plan.audit:
        if not row.perturbation.startswith(("pairs:", "agent:")):
            emitted[row.lang] = emitted.get(row.lang, 0) + row.emitted
    out = [f"segmentation weak: {s.lang} ({s.sentences_per_unit:.2f} sentences per unit over "
           f"{s.units} units): its card will carry no verdict" for s in plan.segmentation if s.weak]
    out += [f"not judged: {lang}: no items (every perturbation was a no-op)"
            for lang, n in sorted(emitted.items()) if n == 0]
    return out


def _audit(args) -> int:
    from .. import manifest
    from ..engine.progress import Progress
    from . import audit as run

    m = _executor(manifest.load(args.manifest), args)
    shard = _shard(args, m)
    result = run.audit(m, progress=Progress(interval=args.progress_every), shard=shard, judges=args.judge,
                       limit=args.limit)
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
    left = sum(j.planned - j.done_before - j.ok for j in result.stats.judges)
    if args.limit is not None and left and not result.interrupted:
        print(f"limited to {args.limit} per judge: {left} presentation(s) left; run without --limit to "
              "judge them")
    _warn(result.warnings)
    if shard is not None and not result.interrupted:
        print(f"shard done; when every shard is: `babelrun merge {result.run_dir}` (or `babelrun score "
              f"{result.run_dir}`) writes the cards")
    if result.cards is not None:
        print(f"cards: {Path(result.run_dir) / 'cards.json'}  "
              f"report: {Path(result.run_dir) / 'report.html'}, report.md")
        for jc in result.cards.judges:
            r = jc.overall.reliability
            print(f"  {jc.judge}: R = {r.value} [{r.lo}, {r.hi}] over {jc.overall.items} items")
        for ac in result.cards.agentic:
            r = ac.overall.reliability
            print(f"  {ac.judge} (agentic): R_agent = {r.value} [{r.lo}, {r.hi}] over {ac.overall.items} items")
        for pc in result.cards.pointwise or []:
            r, d = pc.overall.reliability, pc.overall.discrimination
            print(f"  {pc.judge} (pointwise): R_pw = {r.value} [{r.lo}, {r.hi}], discrimination {d.value} "
                  f"over {pc.overall.items} items")
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
    if min(args.sample, args.max_concurrency, args.min_calls) < 1 or not 0 < args.seconds <= 600:
        raise UsageError("--sample, --min-calls and --max-concurrency must be at least 1; --seconds in (0, 600]")
    if args.max_concurrency > 4096:
        raise UsageError("--max-concurrency: at most 4096")
    results = benchjudge.run(m, sample=args.sample, cap=args.max_concurrency, only=args.judge,
                             seconds=args.seconds, min_calls=args.min_calls)
    if args.json:
        print(msgspec.json.format(msgspec.json.encode(results), indent=2).decode())
    else:
        print("\n\n".join(benchjudge.table(r) for r in results))
    return 0


def _languages(args) -> int:
    from collections import Counter

    from .. import corpus, manifest
    from ..core import languages
    from ..plan import segmentation

    m = manifest.load(args.manifest)
    seg = {s.lang: s for s in segmentation(list(corpus.read(m.corpus.sources)))}
    pairs = Counter(p.lang for p in corpus.read_pairs(m.corpus.sources))
    trajectories = Counter(t.lang for t in corpus.read_trajectories(m.corpus.sources))
    rows = [("code", "language", "script", "direction", "references", "sentences/unit", "pairs", "trajectories")]
    for lang in sorted(set(seg) | set(pairs) | set(trajectories)):
        s = seg.get(lang)
        per_unit = "–" if s is None else f"{s.sentences_per_unit:.2f}" + (" (weak)" if s.weak else "")
        rows.append((lang, languages.name(lang), languages.script(lang), languages.direction(lang),
                     str(s.units if s else 0), per_unit, str(pairs[lang]), str(trajectories[lang])))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    print(f"{len(rows) - 1} languages")
    return 0


def _print(result, text: str, as_json: bool) -> None:
    import msgspec

    if as_json:
        print(msgspec.json.format(msgspec.json.encode(result), indent=2).decode())
    else:
        print(text, end="")


def _invariance(args) -> int:
    import msgspec

    from ..analyses import invariance
    from ..errors import NotApplicable
    from ..store.rundir import INVARIANCE_JSON, read_run_info

    info = read_run_info(args.run_dir)
    parallel = info.manifest.corpus.parallel
    pivot = args.pivot or (parallel.pivot if parallel else "en")
    rules = invariance.AuditRules()
    if args.audit_min_length_ratio is not None:
        rules = msgspec.structs.replace(rules, min_length_ratio=args.audit_min_length_ratio)
    if args.audit_max_number_change is not None:
        rules = msgspec.structs.replace(rules, max_number_change=args.audit_max_number_change)
    result = invariance.run(args.run_dir, pivot, rules=rules)
    if not any(r.matched for r in result.rows) and not result.code_switched and not result.tie_probes \
            and result.labelled is None:
        raise NotApplicable(f"{args.run_dir}: no unit was judged both in {pivot} and in another language "
                            "(is the corpus parallel, UDHR or FLORES, or labelled pairs in several conditions, "
                            "with the pivot among them?)")
    _save(result, [args.run_dir], INVARIANCE_JSON)
    _print(result, invariance.text(result), args.json)
    return 0


def _self_preference(args) -> int:
    from ..analyses import selfpref
    from ..store.rundir import SELF_PREFERENCE_JSON, read_run_info

    read_run_info(args.run_dir)
    result = selfpref.run(args.run_dir)
    _save(result, [args.run_dir], SELF_PREFERENCE_JSON)
    print(selfpref.text(result), end="")
    return 0


def _pin(args) -> int:
    from ..errors import UsageError
    from . import pin

    if args.canary < 1 or not 0 < args.alpha < 1 or not 0 <= args.tolerance < 1:
        raise UsageError("--canary must be at least 1, --alpha in (0, 1) and --tolerance in [0, 1)")
    lock = pin.pin(args.run_dir, args.canary, args.alpha, args.labels, args.tolerance)
    out = args.out or args.run_dir / pin.LOCK_NAME
    pin.write(lock, out)
    for j in lock.judges:
        print(f"{j.name}: judge_id {j.judge_id}, served {j.served_model or '-'} ({j.fingerprint or 'no fingerprint'}), "
              f"{len(j.canary)} canary items")
    print(f"lock file: {out}  (re-ask with `babelrun check {out}`)")
    return 0


def _check(args) -> int:
    from ..errors import UsageError
    from . import pin

    if args.alpha is not None and not 0 < args.alpha < 1:
        raise UsageError("--alpha must be in (0, 1)")
    if args.tolerance is not None and not 0 <= args.tolerance < 1:
        raise UsageError("--tolerance must be in [0, 1)")
    lock = pin.read(args.lockfile)
    alpha = lock.alpha if args.alpha is None else args.alpha
    results = pin.check(lock, args.judge, alpha, tolerance=args.tolerance)
    lock.checks = [*lock.checks, *results]
    pin.write(lock, args.lockfile)
    print(pin.summary(results, alpha))
    bad = [r.judge for r in results if not r.ok]
    print(f"{args.lockfile}: check {len(lock.checks) // max(len(results), 1)} appended; "
          + ("drift or change in: " + ", ".join(bad) if bad else "no drift"))
    return 1 if bad else 0


def _calibrate(args) -> int:
    from ..analyses import calibrate
    from ..store.rundir import CALIBRATION_JSON

    result = calibrate.run(args.run_dirs, replicates=args.replicates, seed=args.seed)
    _save(result, args.run_dirs, CALIBRATION_JSON)
    _print(result, calibrate.text(result), args.json)
    return 0


def _save(result, run_dirs: list[Path], name: str) -> None:
    """An analysis's result as JSON in each run directory it read, for ``babelrun report``."""
    import msgspec

    from ..store.files import write_atomic

    body = msgspec.json.format(msgspec.json.encode(result), indent=2) + b"\n"
    for run_dir in run_dirs:
        write_atomic(Path(run_dir) / name, body)


def _gate(reasons: list[str], what: str) -> int:
    """Exit 1 with one line per reason when a CI gate tripped, else 0."""
    for reason in reasons:
        print(f"{what}: {reason}", file=sys.stderr)
    return 1 if reasons else 0


def _agree(args) -> int:
    from ..analyses import agree
    from ..errors import NotApplicable
    from ..store.rundir import AGREEMENT_JSON

    result = agree.run(args.run_dir, args.labels)
    if result.matched == 0:
        raise NotApplicable(f"no label in {args.labels} matches a pair judged in {args.run_dir} "
                            f"({result.labels_read} read, {result.unknown.count} unknown ids)")
    _save(result, [args.run_dir], AGREEMENT_JSON)
    _print(result, agree.text(result), args.json)
    return _gate(agree.below(result, args.min_kappa), "below --min-kappa") if args.min_kappa is not None else 0


def _diff(args) -> int:
    from ..analyses import drift

    result = drift.run(args.run_a, args.run_b)
    _print(result, drift.text(result), args.json)
    return _gate(drift.worse(result, args.alpha), "worse in B") if args.fail_if_worse else 0


def _show(args) -> int:
    from . import show

    result = show.show(args.run_dir, args.item_id, args.judge)
    _print(result, show.text(result), args.json)
    return 0


def _export(args) -> int:
    from .export import export

    for path in export(args.run_dir, args.out, args.format):
        print(path)
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
               "self-preference": _self_preference, "pin": _pin, "check": _check,
               "diff": _diff, "show": _show, "export": _export}[args.command]
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
