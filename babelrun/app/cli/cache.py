"""``cache stats`` and ``cache prune``: the response cache a manifest's ``cache: {dir}``
shares across runs (``store/cache.py``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .command import Command, print_result


def _arguments(c: argparse.ArgumentParser) -> None:
    sub = c.add_subparsers(dest="action", required=True, metavar="ACTION")
    for name, what in (("stats", "entries and bytes, in all and per judge id"),
                       ("prune", "remove entries: of one judge id, older than some days, then the least "
                                 "recently used until the cache fits (default: the manifest's max_mb)")):
        a = sub.add_parser(name, help=what, description=what)
        a.add_argument("where", type=Path, metavar="CACHE_DIR_OR_MANIFEST",
                       help="the cache folder, or a manifest whose cache: names it")
        a.add_argument("--json", action="store_true", help="the result as JSON")
        if name == "prune":
            a.add_argument("--max-mb", type=float, metavar="MB", help="prune until the cache holds at most MB")
            a.add_argument("--older-than-days", type=float, metavar="D", help="remove entries unused for D days")
            a.add_argument("--judge-id", metavar="ID", help="remove every entry of this judge id")


def _locate(where: Path) -> tuple[Path, float | None]:
    """The cache folder, and the manifest's ``max_mb`` when given a manifest."""
    from ...errors import NotApplicable
    from ...manifest import load

    if where.is_dir():
        return where, None
    if where.is_file() and where.suffix in (".yaml", ".yml", ".json"):
        manifest = load(where)
        if manifest.cache is None:
            raise NotApplicable(f"{where}: the manifest has no cache: section")
        return Path(manifest.cache.dir), manifest.cache.max_mb
    raise NotApplicable(f"{where}: neither a cache folder nor a manifest")


def _run(args: argparse.Namespace) -> int:
    from ...errors import NotApplicable, UsageError
    from ...store import cache

    root, max_mb = _locate(args.where)
    if args.action == "stats":
        s = cache.stats(root)
        lines = [f"{s['dir']}: {s['entries']} entries, {s['bytes'] / (1 << 20):.2f} MB"]
        lines += [f"  {jid}: {row['entries']} entries, {row['bytes'] / (1 << 20):.2f} MB"
                  for jid, row in s["judges"].items()]
        print_result(s, "\n".join(lines) + "\n", args.json)
        return 0
    for name in ("max_mb", "older_than_days"):
        value = getattr(args, name)
        if value is not None and value < 0:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 0")
    limit = args.max_mb if args.max_mb is not None else max_mb
    if limit is None and args.older_than_days is None and args.judge_id is None:
        raise NotApplicable("nothing to prune by: give --max-mb, --older-than-days or --judge-id "
                            "(or a manifest, whose cache.max_mb is the default)")
    before = cache.stats(root)
    removed = cache.prune(root, limit, args.older_than_days, args.judge_id)
    after = cache.stats(root)
    result = {"dir": after["dir"], "removed": removed, "entries": after["entries"], "bytes": after["bytes"],
              "freed_bytes": before["bytes"] - after["bytes"]}
    print_result(result, f"{after['dir']}: removed {removed} entries ({result['freed_bytes'] / (1 << 20):.2f} MB); "
                         f"{after['entries']} left, {after['bytes'] / (1 << 20):.2f} MB\n", args.json)
    return 0


CACHE = Command("cache", "inspect or prune the response cache (cache: in the manifest)",
                "cache stats: how many entries the response cache holds, per judge id. cache prune: remove "
                "entries (of a judge id, unused for some days, then the least recently used until it fits). "
                "Safe while audits use the cache: a removed entry is a miss.",
                _arguments, _run, exit_codes=(0, 2))
