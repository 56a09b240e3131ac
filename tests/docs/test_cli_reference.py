"""The command-line reference, rendered from the parser `docingest` runs: every command and
every option appears, with the extra a command needs."""

from __future__ import annotations

import argparse

import pytest

from docingest.cli import build_parser
from tools.docgen.cli_reference import render_markdown, subcommands


def test_every_command_and_option_is_in_the_reference() -> None:
    page = render_markdown()
    commands = list(subcommands(build_parser()))
    assert len(commands) >= 12
    for name, _, parser in commands:
        assert f"## `docingest {name}`" in page, name
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            for option in action.option_strings:
                assert f"`{option}" in page, (name, option)


def test_a_command_added_to_the_parser_is_rendered() -> None:
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    extra = commands.add_parser("frobnicate", help="a command the reference has never seen")
    extra.add_argument("--level", type=int, default=3, help="how much")
    page = render_markdown(parser)
    assert "## `docingest frobnicate` {#docingest-frobnicate}\n\nA command the reference" in page
    assert "| `--level LEVEL` | how much; default `3` |" in page


def test_commands_name_the_extra_they_need() -> None:
    page = render_markdown()
    for name in ("serve", "api", "worker", "inspect", "export", "import"):
        assert f"## `docingest {name}` (*service*) {{#docingest-{name}}}\n" in page
    assert "## `docingest mcp` (*mcp*) {#docingest-mcp}\n" in page
    for name in ("ingest", "sync", "search", "status", "eval"):
        assert f"## `docingest {name}` {{#docingest-{name}}}\n" in page


def test_the_page_does_not_depend_on_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    narrow = render_markdown()
    monkeypatch.setenv("COLUMNS", "200")
    assert render_markdown() == narrow
