"""``pin``, ``check``, ``bench-judge``, ``languages``: a judge's identity over time, its
throughput, and what a manifest's corpus offers it."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from .command import Command

if TYPE_CHECKING:
    from ..lockfile import LockedJudge


def _pin_arguments(pn: argparse.ArgumentParser) -> None:
    pn.add_argument("run_dir", type=Path)
    pn.add_argument("--out", type=Path, metavar="LOCKFILE", help="where to write (default RUN_DIR/judge.lock.json)")
    pn.add_argument("--canary", type=int, default=24, metavar="N",
                    help="canary items per judge, each asked in both orders (default 24, at most 500)")
    pn.add_argument("--alpha", type=float, default=0.05, help="check's significance level (default 0.05)")
    pn.add_argument("--labels", type=Path, help="human labels, as for `babelrun agree`, to record agreement")
    pn.add_argument("--tolerance", type=float, default=0.05,
                    help="the verdict-flip rate check tolerates for a judge whose own was not measured (default 0.05)")
    pn.add_argument("--manifest", type=Path, metavar="MANIFEST",
                    help="the manifest whose judges pin asks each canary again, to measure their own flip rate "
                    "(never built from the run directory); without it no self-flip rate is recorded, unless "
                    "the run asked the judge samples: k > 1 (its later samples are the re-asks)")
    pn.add_argument("--repeats", type=int, default=2, metavar="N",
                    help="with --manifest: asks of each canary presentation (default 2, 2 to 10)")


def _self_flip_line(j: LockedJudge, tolerance: float) -> str:
    f = j.self_flip
    if f is None:
        return (f"  no self-flip rate recorded (no --manifest, or no re-ask answered): check will test flips "
                f"against the tolerance {tolerance:g}")
    if f.source == "samples":
        return (f"  self-flip rate {f.rate:.3f} [{f.lo:.3f}, {f.hi:.3f}]: {f.flips} of {f.asked} later samples "
                f"the run asked (up to {f.repeats} per presentation) differ from the pinned sample 0 (no call made)")
    return (f"  self-flip rate {f.rate:.3f} [{f.lo:.3f}, {f.hi:.3f}]: {f.flips} of {f.asked} re-asks "
            f"({f.repeats} per presentation) differ from the pinned answer")


def _pin(args: argparse.Namespace) -> int:
    from ... import manifest
    from .. import lockfile, pin

    lockfile.check_numbers(args.canary, args.alpha, args.tolerance, args.repeats)
    m = None if args.manifest is None else manifest.load(args.manifest)
    lock = pin.pin(args.run_dir, args.canary, args.alpha, args.labels, args.tolerance, m, args.repeats)
    out = args.out or args.run_dir / lockfile.LOCK_NAME
    lock = lockfile.write_new(lock, out)  # over an existing lock file: its checks kept
    for j in lock.judges:
        print(f"{j.name}: judge_id {j.judge_id}, served {j.served_model or '-'} ({j.fingerprint or 'no fingerprint'}), "
              f"{len(j.canary)} canary items")
        print(_self_flip_line(j, lock.tolerance))
    kept = f"; {len(lock.checks)} earlier check(s) kept" if lock.checks else ""
    print(f"lock file: {out}{kept}  (re-ask with `babelrun check {out} --manifest MANIFEST`)")
    return 0


def _check_arguments(ck: argparse.ArgumentParser) -> None:
    ck.add_argument("lockfile", type=Path)
    ck.add_argument("--manifest", type=Path, metavar="MANIFEST",
                    help="the manifest whose judges are re-asked (required: a lock file never names "
                    "an endpoint, key, backend or code to run; it is compared with them)")
    ck.add_argument("--judge", metavar="NAME", help="only this judge")
    ck.add_argument("--alpha", type=float, help="significance level (default: the lock file's)")
    ck.add_argument("--tolerance", type=float, help="tolerated verdict-flip rate (default: the lock file's)")


def _check(args: argparse.Namespace) -> int:
    from ... import manifest
    from ...errors import UsageError
    from .. import checktext, lockfile, recheck

    lockfile.check_numbers(None, args.alpha, args.tolerance)
    lock = lockfile.read(args.lockfile)
    if args.manifest is None:
        raise UsageError("check needs --manifest MANIFEST: the judges are built from your manifest and "
                         "compared with the lock file, never built from it (docs/trust.md)")
    m = manifest.load(args.manifest)
    alpha = lock.alpha if args.alpha is None else args.alpha
    results = recheck.check(lock, m, args.judge, alpha, tolerance=args.tolerance)
    lock = lockfile.append_checks(args.lockfile, results)  # re-read under a lock: a concurrent check kept
    print(checktext.summary(results, alpha))
    bad = [r.judge for r in results if not r.ok]
    print(f"{args.lockfile}: check appended ({len(lock.checks)} results in all); "
          + ("drift or change in: " + ", ".join(bad) if bad else "no drift"))
    return 1 if bad else 0


def _bench_arguments(b: argparse.ArgumentParser) -> None:
    b.add_argument("manifest", type=Path)
    b.add_argument("--sample", type=int, default=64, metavar="N",
                   help="distinct requests drawn from the plan, cycled (default 64)")
    b.add_argument("--seconds", type=float, default=5.0, metavar="S", help="seconds per level at least (default 5)")
    b.add_argument("--min-calls", type=int, default=32, metavar="N", help="calls per level at least (default 32)")
    b.add_argument("--max-concurrency", type=int, default=64, metavar="C", help="the highest level (default 64)")
    b.add_argument("--judge", metavar="NAME", help="only this judge")
    b.add_argument("--json", action="store_true", help="print the results as JSON")


def _bench_judge(args: argparse.Namespace) -> int:
    import msgspec

    from ... import manifest
    from ...errors import UsageError
    from .. import benchjudge

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


def _manifest(p: argparse.ArgumentParser) -> None:
    p.add_argument("manifest", type=Path)


def _languages(args: argparse.Namespace) -> int:
    from collections import Counter

    from ... import corpus, manifest
    from ...core import languages
    from ...plan import segmentation

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


LANGUAGES = Command(
    "languages", "list the languages a manifest's corpus offers",
    "For the corpus sources of a manifest (all of them, before "
    "the language choice and sampling): each language's code, name, script, "
    "direction and how many references and labelled pairs it has.",
    _manifest, _languages)
PIN = Command(
    "pin", "write a lock file that pins each judge of a run",
    "Per judge of RUN_DIR: judge_id, model, endpoint, prompt template and "
    "its hash, the served model and fingerprint the records report, the date, accuracy "
    "on the run's labelled pairs (and agreement with human labels, with --labels), and a "
    "fixed canary set of items with their recorded verdicts. With --manifest (judges are built "
    "from it, never from the run directory), each canary presentation is asked --repeats more "
    "times and the judge's own flip rate recorded: the baseline `babelrun check` holds its flips "
    "to; a judge the run asked samples: k > 1 has it from its later samples, with no call. Over "
    "an existing lock file, its checks are kept.",
    _pin_arguments, _pin)
CHECK = Command(
    "check", "re-ask a lock file's canary set: has the judge drifted?",
    "Ask each pinned judge, built from --manifest (never from the lock file), its canary items "
    "again (both orders) and compare "
    "with the recorded verdicts: verdict flips against the pinned self-flip rate (one-sided Fisher "
    "exact; a lock without one: against --tolerance), exact McNemar on correctness, the served "
    "model and fingerprint. A judge whose identity (judge_id, template, endpoint, key and "
    "header variables, backend, callable) differs from the lock's is reported changed before "
    "any call and not asked. Exit 1 when a judge drifted (p < alpha / 2 in either test), its identity changed "
    "or canary calls failed; 0 otherwise. Each check is appended to the lock file.",
    _check_arguments, _check, (0, 1, 2))
BENCH_JUDGE = Command(
    "bench-judge", "find the concurrency each judge can use, and what limits it",
    "Run the manifest's real requests against each judge at concurrency "
    "1, 2, 4, ... up to --max-concurrency, each level for --seconds (and at least "
    "--min-calls calls), through the audit's own call pipeline (rate limits, retries). "
    "Per level: calls/s, tokens/s, latency percentiles, 429s, retries, failures. "
    "Says what binds: the provider's rate limit (with the limit observed), "
    "concurrency (the level to set), or nothing yet (still growing at the top "
    "level). The manifest's concurrency does not apply. Nothing is written.",
    _bench_arguments, _bench_judge)
