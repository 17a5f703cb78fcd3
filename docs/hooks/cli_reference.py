"""mkdocs hook: the CLI reference page, generated from the command table at build time.

``docs/cli.md`` holds the marker ``<!-- cli-reference -->``; this hook replaces it with every
subcommand's usage, description and arguments as ``babelrun.app.cli`` defines them
(``build_parser()``, or the older ``_parser()`` where the command package has not landed), so
the flags are written in one place: the parser. Nothing here is hand-kept.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path

MARKER = "<!-- cli-reference -->"


def _cli():
    return importlib.import_module("babelrun.app.cli")


def _parser() -> argparse.ArgumentParser:
    cli = _cli()
    build = getattr(cli, "build_parser", None) or cli._parser
    return build()


def _exit_codes() -> dict[str, tuple[int, ...]]:
    """Each command's declared exit codes, where the command table declares them."""
    return {c.name: tuple(c.exit_codes) for c in getattr(_cli(), "COMMANDS", ()) if hasattr(c, "exit_codes")}


def _subcommands(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    raise RuntimeError("babelrun's parser has no subcommands")


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def _help(action: argparse.Action) -> str:
    text = action.help or ""
    if "%(" in text:
        text = text % {**vars(action), "prog": "babelrun"}
    extra = []
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        extra.append("choices: " + ", ".join(f"`{c}`" for c in action.choices))
    default = action.default
    if (default not in (None, False, argparse.SUPPRESS, [], "") and action.option_strings
            and not isinstance(action, (argparse._StoreTrueAction, argparse._VersionAction))):
        extra.append(f"default: `{default}`")
    if isinstance(action, argparse._AppendAction) and "repeatable" not in text:
        extra.append("repeatable")
    return _cell(" ".join([text, *(f"({e})" for e in extra)]).strip())


def _name(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`"
    takes = action.nargs != 0
    metavar = action.metavar or (action.dest.upper() if takes else None)
    if isinstance(metavar, tuple):
        metavar = " ".join(metavar)
    names = ", ".join(action.option_strings)
    return f"`{names} {metavar}`" if takes else f"`{names}`"


def _arguments(parser: argparse.ArgumentParser) -> list[str]:
    rows = [a for a in parser._actions
            if a.help != argparse.SUPPRESS and not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]
    if not rows:
        return []
    return ["| argument | what |", "|---|---|", *(f"| {_name(a)} | {_help(a)} |" for a in rows), ""]


def _usage(parser: argparse.ArgumentParser) -> list[str]:
    usage = parser.format_usage().strip()
    usage = usage.removeprefix("usage: ")
    return ["```text", usage, "```", ""]


def render() -> str:
    # argparse wraps usage to the terminal's width: fix it, so every build gives the same page.
    width = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        return _render(_parser())
    finally:
        if width is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = width


def _render(parser: argparse.ArgumentParser) -> str:
    sub = _subcommands(parser)
    helps = {a.dest: a.help for a in sub._choices_actions}
    out = ["## `babelrun` {#babelrun}", "", *_usage(parser), _cell(parser.description or ""), ""]
    out += _arguments(parser)
    if parser.epilog:
        out += ["```text", parser.epilog.rstrip(), "```", ""]
    out += ["| command | what |", "|---|---|"]
    out += [f"| [`{name}`](#{name}) | {_cell(helps.get(name) or '')} |" for name in sub.choices]
    out.append("")
    codes = _exit_codes()
    for name, command in sub.choices.items():
        out += [f"## `babelrun {name}` {{#{name}}}", ""]
        if helps.get(name):
            out += [f"*{_cell(helps[name])}*", ""]
        if name in codes:
            out += ["Exit codes: " + ", ".join(f"`{c}`" for c in codes[name])
                    + " ([what each means](operations.md#exit-codes)).", ""]
        out += _usage(command)
        if command.description:
            out += [_cell(command.description), ""]
        out += _arguments(command)
        if command.epilog:
            out += ["```text", command.epilog.rstrip(), "```", ""]
        out += _actions(name, command)
    return "\n".join(out)


def _actions(name: str, command: argparse.ArgumentParser) -> list[str]:
    """A command group's own subcommands (``cache stats``, ``cache prune``), each with its
    usage and arguments."""
    nested = next((a for a in command._actions if isinstance(a, argparse._SubParsersAction)), None)
    if nested is None:
        return []
    out: list[str] = []
    for action, parser in nested.choices.items():
        out += [f"### `babelrun {name} {action}` {{#{name}-{action}}}", "", *_usage(parser)]
        if parser.description:
            out += [_cell(parser.description), ""]
        out += _arguments(parser)
    return out


def on_config(config, **kwargs):
    # The repository root (where mkdocs.yml is) first, so the babelrun being documented is this
    # checkout's, not whichever one is installed.
    root = str(Path(config.config_file_path).resolve().parent)
    if root not in sys.path:
        sys.path.insert(0, root)
    return config


def on_page_markdown(markdown: str, page, config, files, **kwargs) -> str:
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, render())
    return markdown
