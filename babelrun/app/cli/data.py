"""``data get`` and ``data list``: the public data sets the examples read (``corpus/data.py``),
fetched into the user data folder and checked against pinned sha256 hashes
(``app/datafetch.py``)."""

from __future__ import annotations

import argparse

from .command import Command, print_result


def _arguments(c: argparse.ArgumentParser) -> None:
    sub = c.add_subparsers(dest="action", required=True, metavar="ACTION")
    get = sub.add_parser("get", help="download a data set, check its pinned sha256, unpack it",
                         description="Download data set NAME, refuse it unless every file has its pinned "
                                     "sha256 (exit 2, nothing left behind), unpack it (no links, no path "
                                     "outside its folder) into the data folder ($BABELRUN_DATA_DIR, else the "
                                     "platform's user data folder), where a manifest's data:NAME path finds it.")
    get.add_argument("name", metavar="NAME", help="udhr, llmbar or judge-prompts (data list shows them)")
    get.add_argument("--from", dest="mirror", metavar="URL",
                     help="a mirror: a base URL the file names are appended to, or the file's own URL "
                          "(http://, https:// or file:); the pinned hashes apply all the same")
    ls = sub.add_parser("list", help="the data sets, where they come from, and whether they are here",
                        description="The data sets babelrun data get knows, and whether the data folder holds them.")
    ls.add_argument("--json", action="store_true", help="the list as JSON")


def _run(args: argparse.Namespace) -> int:
    from ...corpus.data import CATALOGUE, data_home
    from .. import datafetch

    if args.action == "get":
        folder, files = datafetch.get(args.name, args.mirror)
        print(f"{args.name}: {files} files in {folder} (sha256 checked: {CATALOGUE[args.name].pinned})")
        return 0
    here = datafetch.present()
    rows = [{"name": d.name, "what": d.what, "from": d.base_url, "licence": d.licence, "pinned": d.pinned,
             "here": here[d.name]} for d in CATALOGUE.values()]
    lines = [f"data folder: {data_home()}"]
    lines += [f"  {r['name']:<14} {'here' if r['here'] else 'not fetched':<12} {r['what']}" for r in rows]
    print_result({"data_dir": str(data_home()), "datasets": rows}, "\n".join(lines) + "\n", args.json)
    return 0


DATA = Command("data", "fetch the public data sets the examples read (data get NAME)",
               "data get NAME [--from URL]: download a public data set (udhr, llmbar, judge-prompts), check "
               "it against its pinned sha256, and unpack it into the user data folder, where a corpus path "
               "data:NAME finds it. data list: what is known and what is here.",
               _arguments, _run, exit_codes=(0, 2))
