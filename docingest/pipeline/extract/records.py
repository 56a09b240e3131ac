"""Render table rows (a spreadsheet's, a CSV file's) as lines that keep their column names.

A chunk cut from row 5,000 of a sheet would otherwise hold bare numbers; rendered as
`Region: North; Sales: 1200`, every line still says what its values are. The header row is
the first row with two or more filled cells; single-cell rows before it (a sheet's title,
a note) become paragraphs. Empty cells are left out of a line; a column without a header
is named by its letter (A, B, ..., AA), as the spreadsheet shows it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import date, datetime, time, timedelta

from docingest.pipeline.document import Block, BlockKind
from docingest.pipeline.errors import DocumentTooLarge

_RUNS_OF_SPACE = re.compile(r"\s\s|[^\S ]")  # two in a row, or any but a plain space

ROWS_PER_BLOCK = 100
"""Rows per TABLE block; the chunker cuts tables at line ends, so this only bounds a block."""


def column_letter(index: int) -> str:
    """The spreadsheet name of the 0-based column `index` (0 → A, 26 → AA)."""
    letters = ""
    index += 1
    while index:
        index, remainder = divmod(index - 1, 26)
        letters = chr(65 + remainder) + letters
    return letters


def cell_text(value: object) -> str:
    """A cell value as it reads: whole numbers without ".0", dates in ISO 8601, one line."""
    if type(value) is str:  # the common case first: this runs once per cell
        text = value.strip()
        return " ".join(text.split()) if _RUNS_OF_SPACE.search(text) else text
    if value is None:
        return ""
    if type(value) is int:
        return str(value)
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float):
        return format(value, ".15g")
    if isinstance(value, datetime):
        return value.date().isoformat() if value.time() == time() else value.isoformat(" ")
    if isinstance(value, date | time):
        return value.isoformat()
    if isinstance(value, timedelta):
        return str(value)
    return " ".join(str(value).split())


class RowRenderer:
    """Collect rows into blocks: paragraphs before the header row, then TABLE blocks.

    Raises `DocumentTooLarge` as soon as the text passes `max_chars`, so a huge sheet is
    refused while streaming rather than after it was all rendered.
    """

    def __init__(self, *, max_chars: int, chars_so_far: int = 0) -> None:
        self.blocks: list[Block] = []
        self.chars = chars_so_far
        self.rows = 0
        self._max_chars = max_chars
        self._header: list[str] | None = None
        self._names: list[str] = []  # the header's names, a column letter where it has none
        self._lines: list[str] = []

    def add(self, values: Iterable[object]) -> None:
        """Add one row of cell values (None or "" for empty cells)."""
        cells = [cell_text(value) for value in values]
        if self._header is None:
            filled = [text for text in cells if text]
            if len(filled) == 1:
                self._add_block(Block(filled[0]))
            elif filled:
                self._header = cells
                self._names = [name or column_letter(i) for i, name in enumerate(cells)]
            return
        names = self._names
        if len(cells) > len(names):  # cells right of the header: named by their letter
            names.extend(column_letter(index) for index in range(len(names), len(cells)))
        line = "; ".join([f"{names[index]}: {text}" for index, text in enumerate(cells) if text])
        if not line:
            return
        self._lines.append(line)
        self.rows += 1
        self._count(len(line) + 1)
        if len(self._lines) >= ROWS_PER_BLOCK:
            self._flush()

    def finish(self) -> list[Block]:
        """Return the blocks; a header row with nothing under it is kept as a table line."""
        if self._header is not None and not self.rows and not self._lines:
            self._lines.append(" | ".join(text for text in self._header if text))
        self._flush()
        return self.blocks

    def _flush(self) -> None:
        if self._lines:
            self.blocks.append(Block("\n".join(self._lines), BlockKind.TABLE))
            self._lines = []

    def _add_block(self, block: Block) -> None:
        self.blocks.append(block)
        self._count(len(block.text) + 2)

    def _count(self, chars: int) -> None:
        self.chars += chars
        if self.chars > self._max_chars:
            raise DocumentTooLarge(
                f"The table yields more than {self._max_chars:,} characters of text, the limit."
            )


def sheet_section(title: str, rendered: list[Block]) -> list[Block]:
    """A sheet's rendered rows under its name as a heading; nothing for an empty sheet. Leading
    rows that only repeat the name (a title cell) are dropped, since the heading says it."""
    while len(rendered) > 1 and rendered[0].text == title:
        rendered.pop(0)
    return [Block(title, BlockKind.HEADING, level=1), *rendered] if rendered else []
