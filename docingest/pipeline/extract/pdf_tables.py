"""Tables of a tagged PDF, read from its structure tree: rows of cells, in order.

Word, LibreOffice and Chromium write tagged PDFs: a `Table` element holds `TR` rows (maybe
inside `THead`/`TBody`/`TFoot`) of `TH`/`TD` cells, and each cell points at its marked
content by id (MCID). Each character of PDFium's text page belongs to a text object that
carries its MCID (`FPDFText_GetTextObject`), so a cell's text is its characters in text
order, spaced as everywhere else on the page; a row's cells are put in order by where they
stand, left to right (Excel tags them in the order it wrote them). A table nested in a cell
is read as the cell's text, on one line. The lines mostly made of a table's characters leave
the flow and the table takes the place of its first line; its `Caption` stays a paragraph
of its own just before it.

Bounds: `MAX_ELEMENTS` structure elements per page are visited at most, and characters are
mapped to objects only on a page whose tree has a table; a page past its bound keeps its
text as lines. Untagged pages' tables come from their rules (`pdf_ruled`) and from text
aligned in columns (`pdf_aligned`).
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from dataclasses import dataclass

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from docingest.pipeline.extract.page_lines import join_cell
from docingest.pipeline.extract.pdf_broken_words import PAD, Span, runs_on
from docingest.pipeline.extract.pdf_calls import marked_content_id, text_object

MAX_ELEMENTS = 20_000
"""Structure elements visited per page at most."""

_TYPE_SIZE = 64
_ROW_PARTS = frozenset({"THead", "TBody", "TFoot"})
_CELLS = frozenset({"TH", "TD"})


@dataclass(frozen=True, slots=True)
class PdfTable:
    """A table's rows (cells as text) and how many of them are header rows."""

    rows: tuple[tuple[str, ...], ...]
    header_rows: int
    caption: str = ""

    def text(self) -> str:
        """One row per line, cells joined by " | " (as every extractor's tables)."""
        return "\n".join(" | ".join(row) for row in self.rows)


@dataclass(slots=True)
class _Cell:
    mcids: set[int]
    header: bool


class _Budget:
    def __init__(self) -> None:
        self.left = MAX_ELEMENTS

    def take(self) -> bool:
        self.left -= 1
        return self.left >= 0


def page_tables(
    page: pdfium.PdfPage, textpage: pdfium.PdfTextPage, text: str
) -> tuple[list[PdfTable], list[int]]:
    """Return the page's tables and, per character of `text`, the table it belongs to (-1:
    none). Empty lists when the page has no tagged table."""
    tree = pdfium_c.FPDF_StructTree_GetForPage(page)
    if not tree:
        return [], []
    try:
        budget = _Budget()
        raw_tables: list[list[list[_Cell]]] = []
        for index in range(pdfium_c.FPDF_StructTree_CountChildren(tree)):
            element = pdfium_c.FPDF_StructTree_GetChildAtIndex(tree, index)
            raw_tables.extend(_find_tables(element, budget))
        if not raw_tables or budget.left < 0:
            return [], []
        owner_of_mcid: dict[int, tuple[int, int, int]] = {}  # → (table, row, cell)
        for t, rows in enumerate(raw_tables):
            for r, cells in enumerate(rows):
                for c, cell in enumerate(cells):
                    for mcid in cell.mcids:
                        owner_of_mcid.setdefault(mcid, (t, r, c))
        owners = [-1] * len(text)
        runs: dict[tuple[int, int, int], list[tuple[int, int]]] = {}  # cell → its characters
        current: tuple[int, int, int] | None = None
        run_start = 0
        for index, mcid in enumerate([*_char_mcids(textpage, len(text)), -1]):
            owner = owner_of_mcid.get(mcid)
            if owner != current:  # by runs: a cell's characters mostly follow each other
                if current is not None:
                    runs.setdefault(current, []).append((run_start, index))
                    owners[run_start:index] = [current[0]] * (index - run_start)
                current, run_start = owner, index
        firsts = {cell: spans[0][0] for cell, spans in runs.items()}
        tables = []
        for t, rows in enumerate(raw_tables):
            rendered: list[tuple[str, ...]] = []
            header_rows = 0
            caption = _cell_text(textpage, text, runs.get((t, 0, 0), []))
            for r, cells in enumerate(rows[1:], 1):
                lefts = _lefts(textpage, [firsts.get((t, r, c)) for c in range(len(cells))])
                order = _left_to_right(lefts)
                # a cell's edges: where the next cell's text starts, less its margin, and
                # where the text before it ends
                edges = [lefts[c] for c in order[1:]] + [None]
                row = tuple(
                    _cell_text(
                        textpage, text, runs.get((t, r, c), []), right=edge,
                        before=runs.get((t, r, order[k - 1])) if k else None,
                    )
                    for k, (c, edge) in enumerate(zip(order, edges, strict=True))
                )  # fmt: skip
                if not any(row):
                    continue
                if all(cell.header for cell in cells) and header_rows == len(rendered):
                    header_rows += 1
                rendered.append(row)
            tables.append(PdfTable(tuple(rendered), header_rows, caption))
        return tables, owners
    finally:
        pdfium_c.FPDF_StructTree_Close(tree)


def _cell_text(
    textpage: pdfium.PdfTextPage,
    text: str,
    spans: list[Span],
    *,
    right: float | None = None,
    before: list[Span] | None = None,
) -> str:
    """A cell's runs of characters as one line: runs on one line joined by a space, its
    printed lines by `join_cell` (which knows where a wrapped line needs none); a word broken
    by the cell's width runs on (`pdf_broken_words`) where the cell's `right` edge is known."""
    lines: list[list[Span]] = [[]]
    end = -1
    for start, stop in spans:
        if end >= 0 and "\n" in text[end:start]:
            lines.append([])
        cut = start
        while (found := text.find("\r\n", cut, stop)) >= 0:
            lines[-1].append((cut, found))
            lines.append([])
            cut = found + 2
        lines[-1].append((cut, stop))
        end = stop
    parts = [" ".join(text[a:b] for a, b in line) for line in lines]
    kept = [n for n, part in enumerate(parts) if part.strip()]
    run_on = set()
    if right is not None and len(kept) > 1:
        left = _right_of(textpage, before)  # where the text before the cell ends
        for above, below in zip(kept, kept[1:], strict=False):
            if len(lines[above]) == 1 and runs_on(
                textpage, text, lines[above][0], lines[below][0], right=right - PAD, left=left
            ):
                run_on.add(below)
    return join_cell(parts, run_on=run_on)


def _right_of(textpage: pdfium.PdfTextPage, spans: list[Span] | None) -> float | None:
    """Where a cell's text ends: its last character's right (None: an empty cell)."""
    if not spans:
        return None
    box = pdfium_c.FS_RECTF()
    pdfium_c.FPDFText_GetLooseCharBox(textpage.raw, spans[-1][1] - 1, box)
    return box.right


def _lefts(textpage: pdfium.PdfTextPage, firsts: list[int | None]) -> list[float | None]:
    """Where each cell's first character stands (None: an empty cell)."""
    box = pdfium_c.FS_RECTF()
    lefts: list[float | None] = []
    for first in firsts:
        if first is None:
            lefts.append(None)
        else:
            pdfium_c.FPDFText_GetLooseCharBox(textpage.raw, first, box)
            lefts.append(box.left)
    return lefts


def _left_to_right(lefts: list[float | None]) -> list[int]:
    """The cells' order by where their first characters stand, left to right; the tags'
    order where a cell is empty (Excel tags a row's cells in the order it wrote them)."""
    if any(left is None for left in lefts):
        return list(range(len(lefts)))
    return sorted(range(len(lefts)), key=lambda n: lefts[n] or 0.0)


def _type(element: pdfium_c.FPDF_STRUCTELEMENT) -> str:
    buffer = ctypes.create_string_buffer(_TYPE_SIZE)
    length = pdfium_c.FPDF_StructElement_GetType(element, buffer, _TYPE_SIZE)
    if length <= 0 or length > _TYPE_SIZE:
        return ""
    return buffer.raw[: length - 2].decode("utf-16-le", errors="replace")


def _children(element: pdfium_c.FPDF_STRUCTELEMENT) -> Iterator[pdfium_c.FPDF_STRUCTELEMENT]:
    for index in range(max(pdfium_c.FPDF_StructElement_CountChildren(element), 0)):
        child = pdfium_c.FPDF_StructElement_GetChildAtIndex(element, index)
        if child:
            yield child


def _find_tables(
    element: pdfium_c.FPDF_STRUCTELEMENT, budget: _Budget
) -> Iterator[list[list[_Cell]]]:
    """Yield each outermost table under `element` (depth first, bounded): its caption as a
    row of one cell, then its rows."""
    stack = [element]
    while stack:
        current = stack.pop()
        if not budget.take():
            return
        if _type(current) == "Table":
            captions = [child for child in _children(current) if _type(child) == "Caption"]
            caption = set().union(*(_mcids(child, budget) for child in captions))
            yield [[_Cell(caption, header=False)], *_rows(current, budget)]
        else:
            stack.extend(reversed(list(_children(current))))


def _rows(table: pdfium_c.FPDF_STRUCTELEMENT, budget: _Budget) -> Iterator[list[_Cell]]:
    for child in _children(table):
        kind = _type(child)
        if kind in _ROW_PARTS:
            for row in _rows(child, budget):
                yield [_Cell(cell.mcids, cell.header or kind == "THead") for cell in row]
        elif kind == "TR":
            cells = [
                _Cell(_mcids(cell, budget), _type(cell) == "TH")
                for cell in _children(child)
                if _type(cell) in _CELLS
            ]
            if cells:
                yield cells


def _mcids(element: pdfium_c.FPDF_STRUCTELEMENT, budget: _Budget) -> set[int]:
    """The marked-content ids of `element` and everything under it, on this page only.

    A paragraph that runs on to the next page (a cell split by a page break) lists its ids on
    both pages; ids are numbered per page, so the other page's would claim this page's text.
    PDFium's per-kid id answers only for kids on the page the tree was loaded for."""
    found: set[int] = set()
    stack = [element]
    get_mcid = pdfium_c.FPDF_StructElement_GetChildMarkedContentID
    while stack and budget.take():
        current = stack.pop()
        for index in range(max(pdfium_c.FPDF_StructElement_CountChildren(current), 0)):
            mcid = get_mcid(current, index)
            if mcid >= 0:
                found.add(mcid)
        stack.extend(_children(current))
    return found


def _char_mcids(textpage: pdfium.PdfTextPage, count: int) -> list[int]:
    """The marked-content id of each character's text object (-1: none, or generated)."""
    raw = textpage.raw  # the handle itself: no conversion per call
    mcids = []
    for index in range(count):
        obj = text_object(raw, index)
        mcids.append(marked_content_id(obj) if obj else -1)
    return mcids
