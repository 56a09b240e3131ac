"""Reading order of a page set in two columns whose content stream runs across them.

PDFium's text follows the content stream. LaTeX, Word and GPO output write a two-column page
column by column (the DPR, NAACL and IEEE papers of the corpus read right as they are, and
no corpus page is reordered here), but a producer may write it line by line across the
page: PDFium then joins a line of each column that share a baseline into one line across
the gutter, and the text alternates between the columns mid-sentence.

`split_across`: on a page where most lines (`MIN_COLUMN_LINES` or more) have no character
near their middle (one PDFium call a line), each of those lines with a gap of a type size
or more there is cut in two. `reading_order`: an x position that most lines stand clear of,
with `MIN_COLUMN_LINES` or more on each side, is a gutter. When the stream crosses it more
than once in `CROSSINGS` of the lines beside it, and both columns are set as text is (of
like widths, most lines filling their column, words rather than figures: a table's narrow
first column of short cells, or two tables side by side, read rightly row by row), the page
is put in reading order: lines spanning the gutter (a title, a wide figure) cut the page
into bands; in each band the left column is read top down, then the right one. Blank lines
and lines without a place (tables, unstyled text) travel with the line read before them.
The cuts are kept only on a page put in order.

Written here, not taken from a library: pdfminer's layout analysis (which unstructured and
pdfplumber use) re-reads every character at many times PDFium's cost (BENCHMARKS.md,
"PDF structure"), and only the lines' boxes are needed.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Callable

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from docingest.pipeline.extract.pdf_lines import PdfLine

MIN_COLUMN_LINES = 6
"""Lines each column needs before a page counts as two columns."""

CROSSINGS = 0.25
"""Share of the column lines at which the stream crosses the gutter that marks it as
written across the page (a page read column by column crosses once per band)."""

FILLED = 0.7
"""Share of its column's width the median line of a text column spans (justified text)."""

PROSE = 0.6
"""Share of letters among a text column's visible characters."""

LIKE_WIDTHS = 0.75
"""The narrower column is at least this share of the wider one."""

_GUTTER_STEPS = 24
_PROBES = 3


def reading_order(lines: list[PdfLine], width: float) -> list[PdfLine]:
    """Return the page's `lines` in reading order (see the module docstring); unchanged
    when the page is not in two columns or its stream already reads them in order."""
    placed = [line for line in lines if line.styled and line.text]
    if width <= 0 or len(placed) < 2 * MIN_COLUMN_LINES:
        return lines
    left = sum(1 for line in placed if line.right <= 0.75 * width)
    right = sum(1 for line in placed if line.left >= 0.25 * width)
    if min(left, right) < MIN_COLUMN_LINES:  # no gutter can have enough on both sides
        return lines
    gutter = _gutter(placed, width)
    if gutter is None:
        return lines
    sides = [_side(line, gutter) for line in placed]
    in_columns = [side for side in sides if side]
    crossings = sum(1 for a, b in zip(in_columns, in_columns[1:], strict=False) if a != b)
    if crossings <= CROSSINGS * len(in_columns) or not _text_columns(placed, sides):
        return lines
    return _reorder(lines, gutter)


def _text_columns(lines: list[PdfLine], sides: list[int]) -> bool:
    """Whether both columns are of like widths, most of their lines fill them, and they
    hold words rather than figures."""
    widths = []
    for side in (-1, 1):
        column = [line for line, where in zip(lines, sides, strict=True) if where == side]
        width = max(line.right for line in column) - min(line.left for line in column)
        spans = sorted(line.right - line.left for line in column)
        if width <= 0 or spans[len(spans) // 2] < FILLED * width:
            return False
        chars = "".join(line.text for line in column).replace(" ", "")
        if sum(char.isalpha() for char in chars) < PROSE * len(chars):
            return False  # figures: tables side by side
        widths.append(width)
    return min(widths) >= LIKE_WIDTHS * max(widths)


def in_reading_order(
    textpage: pdfium.PdfTextPage,
    text: str,
    lines: list[PdfLine],
    width: float,
    tidy: Callable[[str], str],
) -> list[PdfLine]:
    """The page's `lines` in reading order: lines across the gutter cut (`split_across`)
    and columns read one after the other (`reading_order`); `lines` themselves when that
    changes nothing (the cuts are kept only for a page put in order)."""
    cut = split_across(textpage, text, lines, tidy)
    ordered = reading_order(cut, width)
    return lines if ordered is cut else ordered


def split_across(
    textpage: pdfium.PdfTextPage, text: str, lines: list[PdfLine], tidy: Callable[[str], str]
) -> list[PdfLine]:
    """Cut in two each line that spans an empty middle, when most of the page's lines do
    (see the module docstring); `text` is the text page's, `tidy` the lines' cleaning."""
    placed = [line for line in lines if line.styled and line.text and line.start >= 0]
    if len(placed) < 2 * MIN_COLUMN_LINES:
        return lines
    extent = max(line.right for line in placed) - min(line.left for line in placed)
    if sum(line.right - line.left >= 0.7 * extent for line in placed) < 0.5 * len(placed):
        return lines  # lines joined across a gutter span the page: most lines would
    raw = textpage.raw
    step = max(len(placed) // _PROBES, 1)
    if not all(_gap_at_middle(raw, line) for line in placed[step // 2 :: step][:_PROBES]):
        return lines  # a look at a few lines first: PDFium's lookup reads the whole page
    gaps = {id(line) for line in placed if _gap_at_middle(raw, line)}
    if len(gaps) < MIN_COLUMN_LINES or len(gaps) < 0.5 * len(placed):
        return lines
    box = pdfium_c.FS_RECTF()
    result: list[PdfLine] = []
    cuts = 0
    for line in lines:
        pieces = _cut(raw, box, text, line) if id(line) in gaps else None
        if pieces is None:
            result.append(line)
            continue
        (cut, end, right, left) = pieces
        result.append(dataclasses.replace(line, text=tidy(text[line.start : cut]), right=right))
        result.append(dataclasses.replace(line, text=tidy(text[cut:end]), left=left, start=cut))
        cuts += 1
    return result if cuts >= max(MIN_COLUMN_LINES, 0.5 * len(placed)) else lines


def _gap_at_middle(raw: pdfium_c.FPDF_TEXTPAGE, line: PdfLine) -> bool:
    """Whether no character stands within 0.6 type sizes of the line's middle: wider than
    a space between words, or than the gaps of leader dots."""
    middle, height = (line.left + line.right) / 2, (line.top + line.bottom) / 2
    return pdfium_c.FPDFText_GetCharIndexAtPos(raw, middle, height, 0.6 * line.size, 1) < 0


def _cut(
    raw: pdfium_c.FPDF_TEXTPAGE, box: pdfium_c.FS_RECTF, text: str, line: PdfLine
) -> tuple[int, int, float, float] | None:
    """Where to cut the line: (index of the first character after the gap, end of the
    line, right of the part before, left of the part after); None without a gap of a type
    size or more at its middle."""
    middle, end = (line.left + line.right) / 2, text.find("\r\n", line.start)
    end = len(text) if end < 0 else end
    right = None
    for index in range(line.start, end):
        if text[index].isspace():
            continue
        pdfium_c.FPDFText_GetLooseCharBox(raw, index, box)
        if box.left >= middle:
            if right is None or box.left - right < line.size:
                return None
            return index, end, right, box.left
        right = box.right
    return None


def _side(line: PdfLine, gutter: float) -> int:
    """-1 left of the gutter, 1 right of it, 0 across it."""
    if line.right <= gutter:
        return -1
    if line.left >= gutter:
        return 1
    return 0


def _gutter(lines: list[PdfLine], width: float) -> float | None:
    """The x in the middle half of the page that the most lines stand clear of, if both
    sides hold `MIN_COLUMN_LINES` and few lines span it."""
    best: tuple[int, float] | None = None
    rights = sorted(line.right for line in lines)
    lefts = sorted(line.left for line in lines)
    for step in range(_GUTTER_STEPS + 1):
        x = width * (0.25 + 0.5 * step / _GUTTER_STEPS)
        left = bisect.bisect_right(rights, x)
        right = len(lefts) - bisect.bisect_left(lefts, x)
        if min(left, right) < MIN_COLUMN_LINES or left + right < 0.7 * len(lines):
            continue
        if best is None or left + right > best[0]:
            best = (left + right, x)
    return None if best is None else best[1]


def _reorder(lines: list[PdfLine], gutter: float) -> list[PdfLine]:
    groups: list[list[PdfLine]] = []  # a placed line and the lines that travel with it
    for line in lines:
        if line.styled and line.text or not groups:
            groups.append([line])
        else:
            groups[-1].append(line)
    head = groups[0][0]
    ordered: list[list[PdfLine]] = []
    band: list[list[PdfLine]] = []
    for group in sorted(groups, key=lambda g: -g[0].top if g[0].styled else float("-inf")):
        if group[0] is head and not head.styled:
            ordered.append(group)  # unplaced text before any placed line: first
        elif _side(group[0], gutter) == 0:
            ordered.extend(_columns(band, gutter))
            band = []
            ordered.append(group)
        else:
            band.append(group)
    ordered.extend(_columns(band, gutter))
    return [line for group in ordered for line in group]


def _columns(band: list[list[PdfLine]], gutter: float) -> list[list[PdfLine]]:
    left = [group for group in band if _side(group[0], gutter) < 0]
    right = [group for group in band if _side(group[0], gutter) > 0]
    return left + right
