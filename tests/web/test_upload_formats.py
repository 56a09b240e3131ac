"""The web page's file chooser and its hint name every format the service reads, the legacy
Office and e-mail ones included (docs/guides/formats.md)."""

from __future__ import annotations

import re
from pathlib import Path

import docingest.api
from docingest.pipeline.document import DocumentFormat

PAGE = Path(docingest.api.__file__).parent / "static" / "index.html"
SUFFIX = {DocumentFormat.MARKDOWN: ".md", DocumentFormat.TXT: ".txt", DocumentFormat.IMAGE: ".png"}
"""The suffix a format is chosen by, where it is not the format's own name."""


def chooser() -> tuple[set[str], str]:
    """The upload input's `accept` list and the hint under it."""
    html = PAGE.read_text()
    accept = re.search(r'id="file-input"[^>]*accept="([^"]*)"', html, re.DOTALL)
    hint = re.search(r'<p id="upload-formats" class="hint">(.*?)</p>', html, re.DOTALL)
    assert accept and hint, "no file input with accept, or no hint beside it"
    return set(accept.group(1).split(",")), hint.group(1)


def test_every_format_can_be_chosen() -> None:
    accepted, _ = chooser()
    missing = [f.value for f in DocumentFormat if SUFFIX.get(f, f".{f.value}") not in accepted]
    assert not missing, f"the page's file chooser leaves out {missing}"


def test_the_hint_names_the_legacy_formats() -> None:
    _, hint = chooser()
    for name in (".doc", ".ppt", ".xls", "RTF", ".msg", "mbox", "spreadsheet", "presentation"):
        assert name in hint, name
