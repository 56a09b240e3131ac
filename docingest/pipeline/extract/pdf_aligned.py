"""Tables of untagged PDFs (LaTeX, most exports without "Tagged PDF"), found from text set in
columns: consecutive lines whose wide gaps between words stand at the same places.

PDFium's text already holds a table row on one line ("None BM25 59.1 66.9 …"), one space
between cells; what is lost is that the line is a row and where its cells part. Each line is
first measured by what it already carries (`PdfLine` extent, size, length): a row with wide
gaps spans more width per character than prose does (DPR's table rows 0.64-1.2 of the type
size per character, its prose 0.41 median, 0.55 at the 95th percentile; BENCHMARKS.md "PDF
structure"). Only runs of `MIN_ROWS` such sparse lines are looked at closer: the boxes of the
letters either side of each space give the gaps, a gap wider than `GAP` type sizes parts two
cells, and the run is a table when most of its lines have a gap that lines up with a gap of
most others. A page without such a run costs nothing beyond a division per line.

Written here rather than taken from pdfplumber (MIT) or Camelot: both read every character
as a Python object (pdfplumber cost 3-18× this extractor's CPU on the same pages), where this
reads only the characters next to the spaces of the sparse lines.
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Callable
from dataclasses import replace

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from docingest.pipeline.extract.page_lines import join_cell
from docingest.pipeline.extract.pdf_calls import loose_char_box
from docingest.pipeline.extract.pdf_layout import BAND
from docingest.pipeline.extract.pdf_lines import PdfLine

SPARSE = 0.6
"""Width per character, in type sizes, above which a line may be a table row."""

GAP = 0.8
"""A gap between two words wider than this many type sizes parts two cells (a space of prose
is about 0.3, LaTeX's column gap 1.2, Word's cell margins about 1)."""

MIN_ROWS = 3
"""Lines a run of aligned rows needs to be a table."""

MAX_ROWS = 2000
"""Lines of one run measured at most (a page of tiny text objects stays lines)."""

ALIGNED = 0.6
"""Share of the nearby rows a row's gap must line up with."""

NEAR = 8
"""Rows either side a row is compared with: linear work on a long table."""

_CELL_CHARS = 60
"""Mean cell length above which two "columns" are prose in two columns, not a table."""

_PROSE_WORDS = 5
"""Words from which a cell may be a line of prose: rows with two such cells in a third of
the run are columns of text that PDFium read across (the IRS instructions), not a table."""

_LEADER = re.compile(r"^\s*(?:(?:…|[.·]\s*[.·…])[.·…\s]*)?$")
"""A cell of leader dots (a table of contents' "Title . . . . 23") is left out; a lone "."
is a value (SAS prints a missing one so: `2.0000 | . | . | 2 | 44`)."""

_MONOSPACED = re.compile(r"mono|courier|typewriter|cmtt|sftt|lmtt|inconsolata|consol", re.I)
"""Code set in a fixed-width font keeps its own alignment (`x <- 1   # comment`)."""


def aligned_tables(
    textpage: pdfium.PdfTextPage,
    text: str,
    lines: list[PdfLine],
    height: float,
    tidy: Callable[[str], str] = str.strip,
) -> list[PdfLine]:
    """Return `lines` (of a page `height` high) with each run of column-aligned rows
    replaced by one table line (`PdfLine.table`, a row per line of its text, cells joined
    by " | "). Lines in the top and bottom bands stay out: running heads are set apart
    from their page numbers as cells are (`pdf_layout` drops them later)."""
    original, lines = lines, _true_sizes(textpage, lines)
    sparse = [_sparse(line) for line in lines]  # first the cheap test: most pages end here
    if sum(sparse) < MIN_ROWS:
        return original
    low, high = height * BAND, height * (1 - BAND)
    candidates = [_candidate(lines, n, low, high) for n in range(len(lines))]
    reader = _GapReader(textpage, text)
    reader.index(lines)
    # A row whose cell wraps may come as its first part, the wrapped lines, then the rest of
    # the row on the first part's baseline (`split_rows`): measured as one row.
    heads = split_rows(lines, candidates, reader.split)
    originals = [*heads, len(lines)]  # the lines of unit k: originals[k] .. originals[k+1]
    units = [lines[n] for n in heads]
    # a split row stands apart as rows do: counted sparse whatever its characters
    sparse = [candidates[n] and (sparse[n] or n in reader.split) for n in heads]
    candidates = [candidates[n] for n in heads]
    result: list[PdfLine] = []
    done = 0  # units before this one are in `result`
    position = 0
    while position < len(units):
        end = position
        while end < len(units) and sparse[end] and end - position < MAX_ROWS:
            end += 1
        found = _run(reader, units[position:end]) if end - position >= MIN_ROWS else None
        if found is None:
            position = max(end, position + 1)
            continue
        first, last, rows = found
        first, last = first + position, last + position
        # Rows that are not sparse (a long first cell) join when their gaps line up.
        while first > done and candidates[first - 1]:
            if (row := _joins(reader, units[first - 1], rows[:NEAR])) is None:
                break
            rows.insert(0, row)
            first -= 1
        while last + 1 < len(units) and candidates[last + 1]:
            if (row := _joins(reader, units[last + 1], rows[-NEAR:])) is None:
                break
            rows.append(row)
            last += 1
        cells = [_cells(text, row, tidy) for row in rows]
        cells = [[cell for cell in row if not _LEADER.match(cell)] for row in cells]
        table = PdfLine("\n".join(" | ".join(row) for row in cells), table=True)
        result.extend([*original[originals[done] : originals[first]], table])
        done = position = last + 1
    return [*result, *original[originals[done] :]]


def _true_sizes(textpage: pdfium.PdfTextPage, lines: list[PdfLine]) -> list[PdfLine]:
    """`lines` with their type sizes as printed: PDFium's size is the font's set size, which
    leaves out the matrices (Chromium sets 13.33 under a 0.75 matrix: 10 points), and would
    make a row's gaps look narrower than a cell gap. The scale of three lines' first
    characters, the middle one's, is the page's; a line whose size was measured from its
    glyphs instead (PDFium said 1 or less: `pdf_lines`) is scaled already, and so is left."""
    styled = [line for line in lines if line.styled and line.start >= 0]
    if not styled:
        return lines
    raw, matrix, scales = textpage.raw, pdfium_c.FS_MATRIX(), []
    for line in (styled[0], styled[len(styled) // 2], styled[-1]):
        size = pdfium_c.FPDFText_GetFontSize(raw, line.start)
        if size <= 1.5 or abs(size - line.size) > 0.05 * size + 0.1:
            scales.append(1.0)  # measured from the glyphs, or a line of mixed type
        elif pdfium_c.FPDFText_GetMatrix(raw, line.start, matrix):
            scales.append(abs(matrix.a * matrix.d - matrix.b * matrix.c) ** 0.5)
    scale = sorted(scales)[len(scales) // 2] if scales else 1.0
    if abs(scale - 1) < 0.02 or scale <= 0:
        return lines
    return [replace(line, size=line.size * scale) if line.styled else line for line in lines]


def _cells(text: str, row: _Row, tidy: Callable[[str], str]) -> list[str]:
    """A row's cells as text, the wrapped lines under a cell joined to it."""
    gaps, cells, under = row
    parts: list[list[str]] = [[text[a:b]] for a, b in cells]
    for cell, (a, b) in under:
        parts[cell].append(text[a:b])
    return [join_cell([tidy(part) for part in cell]) for cell in parts]


Split = dict[int, tuple[list[int], list[int]]]
"""A split row: its first line → the lines of the rest of the row, and the wrapped lines."""

_SPLIT_LOOKAHEAD = 4
"""Lines after a row's first part within which the rest of the row is looked for."""


def split_rows(lines: list[PdfLine], candidates: list[bool], split: Split) -> list[int]:
    """The lines that head a row, `split` filled with the rows PDFium gave in parts.

    Chromium prints a row whose cell wraps as its first cells, the wrapped lines, then the
    rest of the row (a text object each): PDFium reads `10.1 Lease agreement with … 6980`,
    `O'Bannon Drive (related party)`, `10-K 000-30653 10.2 April 1, 2013` (the SEC filing's
    exhibit index; BENCHMARKS.md, "Broken words, single dots and fonts"). The rest stands on
    the first part's baseline, a cell gap to its right; the lines between stand under the
    first part, left of the rest, a line or more below it (not a subscript)."""
    heads: list[int] = []
    taken: set[int] = set()
    for n, line in enumerate(lines):
        if n in taken:
            continue
        heads.append(n)
        if not candidates[n]:
            continue
        for k in range(n + 2, min(n + 2 + _SPLIT_LOOKAHEAD, len(lines))):
            rest = lines[k]
            # the rest may be one word (an `X` in the last column): a candidate but for that
            if (
                not (candidates[k] or _part(rest) and " " not in rest.text)
                or abs(rest.top - line.top) > 0.2 * line.size
            ):
                continue
            between = lines[n + 1 : k]
            if rest.left - line.right > GAP * line.size and all(
                _part(below)
                and line.left - 1 <= below.left and below.right < rest.left
                and 0.8 * line.size < line.bottom - below.bottom < 1.6 * line.size * len(between)
                for below in between
            ):  # fmt: skip
                split[n] = ([k], list(range(n + 1, k)))
                taken.update(range(n + 1, k + 1))
            break
    return heads


def _part(line: PdfLine) -> bool:
    """Whether the line may be part of a row split in several lines (`split_rows`)."""
    return line.styled and not line.table and line.start >= 0


def _candidate(lines: list[PdfLine], number: int, low: float, high: float) -> bool:
    """Whether line `number` may be a table row at all: styled, spaced, not code, and in
    the page's body or close to the line next to it (a header row at the top of a page, not
    a running head set apart from the body)."""
    line = lines[number]
    if not (
        line.styled
        and not line.table
        and line.start >= 0
        and " " in line.text
        and not _MONOSPACED.search(line.family)
    ):
        return False
    if line.bottom >= high and number + 1 < len(lines):
        return line.bottom - lines[number + 1].top < line.size
    if line.top <= low and number > 0:
        return lines[number - 1].bottom - line.top < line.size
    return low < line.top and line.bottom < high


def _sparse(line: PdfLine) -> bool:
    """Whether the line spans more width per character than prose (`SPARSE`)."""
    return line.right - line.left > SPARSE * line.size * len(line.text) > 0


class _GapReader:
    def __init__(self, textpage: pdfium.PdfTextPage, text: str) -> None:
        self.textpage = textpage.raw  # the handle itself: no conversion per call
        self.text = text
        self.box = pdfium_c.FS_RECTF()
        self.box_ref = ctypes.byref(self.box)
        self.split: Split = {}  # filled by `split_rows`
        self._all: list[PdfLine] = []
        self._number: dict[int, int] = {}

    def index(self, lines: list[PdfLine]) -> None:
        """Know the page's `lines`: a split row's parts are read with its first."""
        self._all = lines
        self._number = {line.start: n for n, line in enumerate(lines) if line.start >= 0}

    def row(self, line: PdfLine) -> _Row:
        """The line's wide gaps (x intervals), its cells (character ranges) and the lines
        of wrapped cells under them (a split row's: `split_rows`)."""
        gaps, cells = self._gaps(line)
        under: list[tuple[int, tuple[int, int]]] = []
        number = self._number.get(line.start, -1)
        if number in self.split:
            rest, wrapped = self.split[number]
            previous = line
            for part in (self._all[n] for n in rest):
                more, more_cells = self._gaps(part)
                gaps += [(previous.right, part.left), *more]
                cells += more_cells
                previous = part
            lefts = [line.left] + [right for _, right in gaps]
            for below in (self._all[n] for n in wrapped):
                cell = max(
                    k for k, left in enumerate(lefts) if k == 0 or left <= below.left + below.size
                )
                end = self.text.find("\r\n", below.start)
                under.append((cell, (below.start, len(self.text) if end < 0 else end)))
        return gaps, cells, under

    def _gaps(self, line: PdfLine) -> tuple[list[tuple[float, float]], list[tuple[int, int]]]:
        text, start = self.text, line.start
        end = text.find("\r\n", start)
        end = len(text) if end < 0 else end
        gaps: list[tuple[float, float]] = []
        cells: list[tuple[int, int]] = []
        cell_start = start
        raw, box, box_ref, wide = self.textpage, self.box, self.box_ref, GAP * line.size
        index = text.find(" ", start, end)  # from space to space: most characters are not
        while index >= 0:
            after = index + 1
            while after < end and text[after] == " ":
                after += 1
            # A run of spaces is a monospaced layout (code), not a cell gap.
            if after == index + 1 and index > start and after < end:
                loose_char_box(raw, index - 1, box_ref)
                right = box.right
                loose_char_box(raw, after, box_ref)
                if box.left - right > wide:
                    gaps.append((right, box.left))
                    cells.append((cell_start, index))
                    cell_start = after
            index = text.find(" ", after, end)
        cells.append((cell_start, end))
        return gaps, cells


_Row = tuple[list[tuple[float, float]], list[tuple[int, int]], list[tuple[int, tuple[int, int]]]]
"""A line's wide gaps (x intervals), cells (character ranges) and wrapped lines (the cell
each goes under, its character range)."""


def _run(reader: _GapReader, run: list[PdfLine]) -> tuple[int, int, list[_Row]] | None:
    """The first and last line of the run's aligned stretch and its rows, if it is a table."""
    rows = [reader.row(line) for line in run]
    gaps = [row[0] for row in rows]
    aligned = [gaps_line_up(gaps[n], gaps[max(n - NEAR, 0) : n] + gaps[n + 1 : n + 1 + NEAR])
               for n in range(len(rows))]  # fmt: skip
    first = next((n for n, ok in enumerate(aligned) if ok), None)
    if first is None:
        return None
    last = max(n for n, ok in enumerate(aligned) if ok)
    body = rows[first : last + 1]
    if last + 1 - first < MIN_ROWS or sum(aligned[first : last + 1]) < ALIGNED * len(body):
        return None
    lengths = [b - a for _, cells, _ in body for a, b in cells]
    if sum(lengths) > _CELL_CHARS * len(lengths):
        return None
    text = reader.text
    prose = sum(
        sum(text.count(" ", a, b) + 1 >= _PROSE_WORDS for a, b in cells) >= 2
        for _, cells, _ in body
    )
    if 3 * prose >= len(body):
        return None
    return first, last, body


def _joins(reader: _GapReader, line: PdfLine, rows: list[_Row]) -> _Row | None:
    """The line as a row of the table of `rows`, if its gaps line up with theirs."""
    row = reader.row(line)
    return row if gaps_line_up(row[0], [other[0] for other in rows]) else None


def gaps_line_up(gaps: list[tuple[float, float]], others: list[list[tuple[float, float]]]) -> bool:
    """Whether one of a row's `gaps` (x intervals) overlaps a gap in `ALIGNED` of the
    `others` rows' (also used for OCR's word boxes, `ocr_tables`)."""
    needed = ALIGNED * len(others)
    if needed == 0:
        return bool(gaps)
    spare = len(others) - needed  # rows that may miss before this gap cannot line up
    for left, right in gaps:
        # Counted with early exits both ways: this runs for every row of every run and was
        # most of the alignment's CPU on table-heavy pages (BENCHMARKS.md, "CPU per page").
        support = missed = 0
        for other in others:
            for a, b in other:
                if a < right and left < b:
                    support += 1
                    break
            else:
                missed += 1
                if missed > spare:
                    break
            if support >= needed:
                return True
    return False
