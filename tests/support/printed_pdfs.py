"""PDFs printed at test time by headless Chromium (`--print-to-pdf`), which writes tagged
PDFs as browsers' users get them: tables, headings and text from HTML made in the test."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import pytest

from tests.support.browser import CHROMIUM, FLAGS


def print_html(html: str, directory: Path, name: str = "printed") -> bytes:
    """Print `html` to PDF with Chromium and return the PDF's bytes (skip without Chromium:
    `.ci/system-deps` installs it)."""
    if not CHROMIUM.is_file():
        pytest.skip(f"{CHROMIUM} not found: apt-get install chromium (.ci/run does)")
    source, target = directory / f"{name}.html", directory / f"{name}.pdf"
    source.write_text(html, encoding="utf-8")
    subprocess.run(
        [
            str(CHROMIUM),
            *FLAGS,
            f"--user-data-dir={directory / 'chromium-profile'}",
            "--no-pdf-header-footer",
            f"--print-to-pdf={target}",
            source.as_uri(),
        ],
        capture_output=True,
        timeout=600,
        check=True,
    )
    return target.read_bytes()


def without_tags(pdf: bytes) -> bytes:
    """`pdf` without its structure tree (pypdf drops `StructTreeRoot` and `MarkInfo`): the
    untagged path LaTeX and exports without "Tagged PDF" take."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf)))
    for key in ("/StructTreeRoot", "/MarkInfo"):
        writer._root_object.pop(key, None)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()
