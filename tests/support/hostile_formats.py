"""Hostile slide decks, workbooks, e-books and e-mails, built at test time (none committed).

One per format of issue 16, each cheap to build and each claiming far more than it holds.
"""

from __future__ import annotations

import re

import openpyxl

from tests.pipeline.extract.test_eml import nested_message
from tests.pipeline.extract.test_epub import build_epub
from tests.pipeline.extract.test_pptx import build_deck
from tests.pipeline.extract.test_xlsx import build_xlsx, rewrite_member
from tests.support.hostile_files import with_zip_bomb

FULL_GRID = "A1:XFD1048576"
"""Every cell of an Excel sheet: 1,048,576 rows × 16,384 columns."""


def pptx_zip_bomb(*, declared_mib: int | None = None) -> bytes:
    """A real deck with a 2 GiB member of zeros (~2 MB compressed) among its media."""
    return with_zip_bomb(build_deck(), "ppt/media/zeros.bin", declared_mib=declared_mib)


def xlsx_declaring_the_full_grid(word: str) -> bytes:
    """A workbook whose sheet declares all 17 billion cells and holds a header, one row with
    `word`, and a cell in the last row of the last column."""

    def fill(workbook: openpyxl.Workbook) -> None:
        sheet = workbook.active
        assert sheet is not None
        sheet.title = "Grid"
        sheet.append(["Item", "Note"])
        sheet.append(["first", f"the row that mentions {word}"])
        sheet["XFD1048576"] = "the far corner"

    return rewrite_member(
        build_xlsx(fill),
        "xl/worksheets/sheet1.xml",
        lambda xml: re.sub(r'<dimension ref="[^"]*"/>', f'<dimension ref="{FULL_GRID}"/>', xml),
    )


def epub_with_looping_spine(repeats: int = 10_000) -> bytes:
    """An e-book whose spine lists its two chapters `repeats` times over."""
    return build_epub(spine='<itemref idref="one"/><itemref idref="two"/>' * repeats)


def email_nested(depth: int = 100) -> bytes:
    """A message forwarding a message ... `depth` levels deep, each with a body of its own."""
    return nested_message(depth)
