"""Ruled tables of untagged PDFs: a grid of horizontal and vertical rules drawn on the page,
its cells the grid's, each character placed in the cell that holds its centre.

Rules are the page's path objects thinner than `RULE` points (Chromium and LibreOffice draw
each cell's border as a thin rectangle or a stroked segment); collinear pieces are merged,
and rules that cross one another form a grid. A grid of at least two rows and two columns
that holds text in two cells of a row becomes a table line (`PdfLine.table`): rows on lines,
cells joined by " | ", a cell's lines joined by a space, so a cell that wraps stays in its
row (which text aligned in columns, `pdf_aligned`, cannot tell). Where every line between
two rules fills the first cell and another (LaTeX rules only the header and the foot), each
line is a row. Rules that form no grid (an
underline, a frame around a paragraph) change nothing; horizontal rules of one span with no
vertical ones may band a table's rows, its columns from the gaps (`pdf_banded`).

Cost: a page whose objects are nearly all text (`FPDFPage_CountObjects` against PDFium's
text rectangles: LaTeX and most prose) is passed over after two calls. Pages past
`MAX_OBJECTS` objects, or whose rules would take more than `MAX_CROSSINGS` comparisons
(thousands of tiny rules that do not merge), keep their lines. Written here rather than
taken from pdfplumber or Camelot for the reason `pdf_aligned` gives.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from docingest.pipeline.extract.page_lines import join_cell
from docingest.pipeline.extract.pdf_banded import banded_grids
from docingest.pipeline.extract.pdf_lines import PdfLine
from docingest.pipeline.extract.pdf_paths import MAX_OBJECTS, object_count, path_bounds

RULE = 2.0
"""Thickness (points) below which a path object is a rule."""

SNAP = 2.0
"""Distance (points) within which two rules' ends or positions are the same."""

MAX_CROSSINGS = 250_000
"""Horizontal × vertical rules (after merging) compared per page at most."""

_MIN_PATHS = 4
"""Objects besides text a page needs before its rules are read (a grid needs more)."""

_ROW_SPAN = 0.5
"""Share of the table's widest rule a rule must span to part rows."""

_PROSE_CHARS = 150
"""A banded row with two cells this long is columns of prose, not a table's row (a third of
the rows such: the Federal Register's three columns between its rules)."""

_Rule = tuple[float, float, float]
"""A horizontal rule (y, x0, x1) or a vertical one (x, y0, y1)."""


def ruled_tables(
    page: pdfium.PdfPage,
    textpage: pdfium.PdfTextPage,
    text: str,
    lines: list[PdfLine],
    tidy: Callable[[str], str] = str.strip,
) -> list[PdfLine]:
    """Return `lines` with the lines inside each ruled grid replaced by one table line."""
    count = object_count(page)
    if count > MAX_OBJECTS:
        return lines
    if count - pdfium_c.FPDFText_CountRects(textpage.raw, 0, -1) < _MIN_PATHS:
        return lines
    across, down = _rules(page, count)
    if len(across) < 3 or len(across) * len(down) > MAX_CROSSINGS:
        return lines
    for grid in _grids(across, down):
        lines = _fill(grid, textpage, text, lines, tidy)
    for rows, columns in banded_grids(across, textpage, text, lines):  # ruled across only
        lines = _fill(_Grid(rows, columns, banded=True), textpage, text, lines, tidy)
    return lines


def _rules(page: pdfium.PdfPage, count: int) -> tuple[list[_Rule], list[_Rule]]:
    """The page's horizontal and vertical rules, collinear pieces merged."""
    across: list[_Rule] = []
    down: list[_Rule] = []
    for left, bottom, right, top in path_bounds(page, count):
        width, height = right - left, top - bottom
        if height <= RULE and width > SNAP:
            across.append(((top + bottom) / 2, left, right))
        elif width <= RULE and height > SNAP:
            down.append(((left + right) / 2, bottom, top))
    return _merge(across), _merge(down)


def _merge(rules: list[_Rule]) -> list[_Rule]:
    """Join rules on one line whose pieces touch (a border drawn cell by cell)."""
    merged: list[list[float]] = []
    for position, start, end in sorted(rules):
        last = merged[-1] if merged else None
        if last and position - last[0] <= SNAP and start <= last[2] + SNAP:
            last[2] = max(last[2], end)
        else:
            merged.append([position, start, end])
    return [(a, b, c) for a, b, c in merged]


class _Grid:
    def __init__(self, rows: list[float], columns: list[float], *, banded: bool = False) -> None:
        self.rows = rows  # y of the horizontal rules, top down
        self.columns = columns  # x of the vertical boundaries, left to right
        self.banded = banded  # columns from gaps (`pdf_banded`), not drawn
        self._inner = [-edge for edge in rows[1:-1]]  # ascending, for bisection

    def holds(self, x: float, y: float) -> bool:
        return (
            self.columns[0] - SNAP < x < self.columns[-1] + SNAP
            and self.rows[-1] - SNAP < y < self.rows[0] + SNAP
        )

    def cell(self, x: float, y: float) -> tuple[int, int]:
        row = bisect_left(self._inner, -y)  # the rules above y: a long table stays linear
        column = bisect_right(self.columns, x, 1, len(self.columns) - 1) - 1
        return row, column


def _grids(across: list[_Rule], down: list[_Rule]) -> list[_Grid]:
    """The grids the rules form: groups of crossing rules (union-find) of at least three
    horizontal rules (two rows) and two column bands."""
    parent = list(range(len(across) + len(down)))

    def find(node: int) -> int:
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for h, (y, x0, x1) in enumerate(across):
        for v, (x, y0, y1) in enumerate(down):
            if x0 - SNAP <= x <= x1 + SNAP and y0 - SNAP <= y <= y1 + SNAP:
                parent[find(h)] = find(len(across) + v)
    groups: dict[int, tuple[list[_Rule], list[_Rule]]] = {}
    for h, rule in enumerate(across):
        groups.setdefault(find(h), ([], []))[0].append(rule)
    for v, rule in enumerate(down):
        groups.setdefault(find(len(across) + v), ([], []))[1].append(rule)
    grids = []
    for rules, columns in groups.values():
        # A row's border spans most of the table; a link's underline in a cell does not.
        widest = max((rule[2] - rule[1] for rule in rules), default=0.0)
        rows = [rule for rule in rules if rule[2] - rule[1] >= _ROW_SPAN * widest]
        if len(rows) < 3 or not columns:
            continue
        x0, x1 = min(rule[1] for rule in rows), max(rule[2] for rule in rows)
        edges = sorted({x0, x1, *(rule[0] for rule in columns)})
        xs = [edge for n, edge in enumerate(edges) if n == 0 or edge - edges[n - 1] > SNAP]
        ys = sorted({rule[0] for rule in rows}, reverse=True)
        if len(xs) >= 3:
            grids.append(_Grid(ys, xs))
    return grids


def _fill(
    grid: _Grid,
    textpage: pdfium.PdfTextPage,
    text: str,
    lines: list[PdfLine],
    tidy: Callable[[str], str],
) -> list[PdfLine]:
    """Place the characters of the lines inside `grid` in its cells; the table replaces
    those lines at the first of them (no change when the grid holds no table)."""
    inside = [
        n for n, line in enumerate(lines)
        if line.styled and not line.table and line.start >= 0
        and grid.holds((line.left + line.right) / 2, (line.top + line.bottom) / 2)
    ]  # fmt: skip
    if not inside:
        return lines
    cells: dict[tuple[int, int, int], list[str]] = {}  # (row, column, line) → characters
    box, raw = pdfium_c.FS_RECTF(), textpage.raw
    for n in inside:
        start = lines[n].start
        end = text.find("\r\n", start)
        end = len(text) if end < 0 else end
        where: tuple[int, int] | None = None
        for index in range(start, end):
            char = text[index]
            # A word's first character places it: PDFium parts words that stand apart,
            # so no word crosses a rule (a fifth of the calls a character each would take).
            if not char.isspace() and (index == start or text[index - 1].isspace()):
                pdfium_c.FPDFText_GetLooseCharBox(raw, index, box)
                where = grid.cell((box.left + box.right) / 2, (box.top + box.bottom) / 2)
            if where is not None:
                cells.setdefault((*where, n), []).append(char)
    width = len(grid.columns) - 1
    rows: list[list[str]] = []
    wrapped = False  # a row of more than one line
    for row in range(len(grid.rows) - 1):
        band = sorted({n for r, _, n in cells if r == row})
        if not band:
            continue
        texts = {
            n: [tidy("".join(cells.get((row, column, n), []))) for column in range(width)]
            for n in band
        }
        first = min(c for line in texts.values() for c, cell in enumerate(line) if cell)
        texts = _first_cells_joined(texts, first)
        # Lines set between two rules, a row each (LaTeX's): each line fills the first cell
        # and another. Ruled across only (`pdf_banded`), a statement's `Revenue:` rows and
        # LaTeX's multirow cells too: each line fills the first cell, or each after the
        # first fills two (a wrapped cell's next line mostly fills one).
        lines_of = list(texts.values())
        if len(band) > 1 and (
            all(line[first] and sum(map(bool, line)) >= 2 for line in lines_of)
            or grid.banded and (
                all(line[first] for line in lines_of)
                or all(sum(map(bool, line)) >= 2 for line in lines_of[1:])
            )
        ):  # fmt: skip
            rows += texts.values()  # rows set between two rules (LaTeX's), a line each
        else:
            wrapped = wrapped or len(band) > 1
            stacked = zip(*texts.values(), strict=True)
            rows.append([join_cell(column) for column in stacked])
    used = [column for column in range(len(grid.columns) - 1) if any(row[column] for row in rows)]
    rows = [[row[column] for column in used] for row in rows if any(row)]
    if len(used) < 2 or sum(sum(map(bool, row)) >= 2 for row in rows) < 2:
        return lines
    if grid.banded and not wrapped:  # a row a line: alignment reads it, with finer columns
        return lines
    if grid.banded and 3 * sum(_prose(row) for row in rows) >= len(rows):
        return lines  # columns of running text between rules (the Federal Register's)
    table = PdfLine("\n".join(" | ".join(row) for row in rows), table=True)
    taken = set(inside)
    first = inside[0]
    return [
        *lines[:first],
        table,
        *(line for n, line in enumerate(lines) if n > first and n not in taken),
    ]


def _first_cells_joined(texts: dict[int, list[str]], first: int) -> dict[int, list[str]]:
    """A band's lines with a first cell that wraps joined into one line: a line holding only
    its first cell, not a label (no closing colon), runs on into the next line when that
    one fills the first cell and another and its first cell goes on the phrase (lower case,
    a digit, a currency sign: "At least $100,000 but not over" over "$160,850 | × 28%")."""
    if len(texts) < 2:
        return texts
    joined: dict[int, list[str]] = {}
    held: list[str] | None = None
    held_at = -1
    for n, line in texts.items():
        if held is not None:
            head = line[first][:1]
            if sum(map(bool, line)) >= 2 and (head.islower() or head.isdigit() or head in "$€£¥"):
                line = [*line[:first], join_cell([held[first], line[first]]), *line[first + 1 :]]
            else:
                joined[held_at] = held
        held = None
        if line[first] and sum(map(bool, line)) == 1 and not line[first].endswith(":"):
            held, held_at = line, n
        else:
            joined[n] = line
    if held is not None:
        joined[held_at] = held
    return joined


def _prose(row: list[str]) -> bool:
    return sum(len(cell) >= _PROSE_CHARS for cell in row) >= 2
