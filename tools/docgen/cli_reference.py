"""The command-line reference, rendered from the parser `docingest` itself runs
(`docingest.cli.build_parser`): every command, its help, usage, arguments and defaults."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator

from docingest.cli import build_parser

USAGE_WIDTH = 88


def subcommands(
    parser: argparse.ArgumentParser,
) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of each subcommand, in the parser's order."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, helps.get(name, ""), sub


def _usage(parser: argparse.ArgumentParser) -> str:
    """The usage line at a fixed width, so the page is the same on every terminal."""
    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(USAGE_WIDTH)
    try:
        return parser.format_usage().removeprefix("usage: ").strip()
    finally:
        if columns is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = columns


def _names(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`"
    metavar = ""
    if action.nargs != 0:
        shown = action.metavar or action.dest.upper()
        metavar = f" {shown if isinstance(shown, str) else ' '.join(shown)}"
    return ", ".join(f"`{option}{metavar}`" for option in action.option_strings)


def _meaning(action: argparse.Action) -> str:
    parts = [action.help or ""]
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        parts.append("one of " + ", ".join(f"`{choice}`" for choice in action.choices))
    if action.nargs in ("+", "*") or isinstance(action, argparse._AppendAction):
        parts.append("repeatable" if action.option_strings else "one or more")
    default = action.default
    if (
        action.option_strings
        and default not in (None, False, [], argparse.SUPPRESS)
        and action.nargs != 0
        and "default" not in (action.help or "")
    ):
        parts.append(f"default `{default}`")
    text = "; ".join(part for part in parts if part)
    return " ".join(text.split()).replace("|", "\\|")


def _arguments(parser: argparse.ArgumentParser) -> list[str]:
    rows = [
        f"| {_names(action)} | {_meaning(action)} |"
        for action in parser._actions
        if not isinstance(action, argparse._HelpAction | argparse._SubParsersAction)
    ]
    return ["| argument | meaning |", "| --- | --- |", *rows] if rows else []


def render_markdown(parser: argparse.ArgumentParser | None = None) -> str:
    """The command-line reference page."""
    parser = build_parser() if parser is None else parser
    out = [
        "# Command line",
        "",
        "Generated from the parser `docingest` runs (`docingest.cli.build_parser`). The",
        "[command-line guide](../guides/command-line.md) shows the commands at work.",
        "`pip install docingest` brings the client commands; a command marked with an extra",
        '(*service*, *mcp*) needs it installed too: `pip install "docingest[service]"`.',
        "",
        "```text",
        _usage(parser),
        "```",
        "",
        " ".join((parser.description or "").split()),
        "",
        "Options of every client command (before or after the command's name):",
        "",
        *_arguments(parser),
        "",
    ]
    for name, summary, sub in subcommands(parser):
        extra = sub.get_default("extra")
        needs = f" (*{extra}*)" if extra else ""
        heading = f"## `docingest {name}`{needs} {{#docingest-{name}}}"  # a stable anchor
        out += [heading, "", f"{summary[0].upper()}{summary[1:]}."]
        if sub.description:
            out += ["", " ".join(sub.description.split())]
        out += ["", "```text", _usage(sub), "```", "", *_arguments(sub), ""]
    return "\n".join(out)
