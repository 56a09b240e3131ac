"""Words a narrow table cell broke by its width, told from values set one per line.

A word wider than its cell is broken where it no longer fits (LibreOffice with fonts wider
than the document's: `Wilcoxo` over `n`, `0.000` over `0`, `Numb` over `er`), and the
cell's lines would be joined with a space. Values set one per line (the Irish tax cases'
`120,000` over `32,000`, a `w:br` each) must keep theirs. The text cannot tell them apart;
where the lines stand can: a word broken by width is alone on its line (its continuation
too), starts at the left of its cell or of its continuation, and reaches so near the
cell's right edge that the continuation's first character would not have fitted after it.
Values set apart by a break sit where the cell's alignment puts them, with room to spare
(BENCHMARKS.md, "Broken words, single dots and fonts"). Flush right, every value reaches
the right edge: there the word must also start at the cell's left edge, where that is
known. In a column exactly as wide as its widest value (fitted to it), a value set one per
line looks like a broken word and is glued: the rule's cost. Used for tagged cells only:
ruled grids (LaTeX's, the IRS forms') wrap at a space as tightly as a word breaks.
"""

from __future__ import annotations

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

PAD = 7.5
"""A cell's inner margin (points) at most: Word's default is 5.4 (0.19 cm), a tenth of an
inch 7.2 (the statistics homework's tables), LibreOffice's 2.8."""

_SNAP = 1.0
"""Points within which two lines' edges are the same."""

Span = tuple[int, int]
"""A line of a cell as a range of the page's text (characters, end excluded)."""


def runs_on(
    textpage: pdfium.PdfTextPage,
    text: str,
    line: Span,
    following: Span,
    *,
    right: float,
    left: float | None = None,
) -> bool:
    """Whether the cell line `line` is a word broken by width that `following` goes on:
    one word each (a word wrapped after a short one fits as tightly: "(documentation" over
    "in html"), a continuation starting in lower case or a digit, and the continuation's
    first character would have passed `right` (the cell's right edge: where the next
    cell's text starts, less a margin). Lines set flush right (each reaches the right
    edge, as values do) must also start at `left` (where the text before the cell ends),
    where it is known. A word past the edge overflowed its cell
    whole; a line of one character broke nothing (`1` over `2`)."""
    start, end = _trimmed(text, line)
    after, stop = _trimmed(text, following)
    if end - start < 2 or stop <= after or _spaced(text, start, end) or _spaced(text, after, stop):
        return False
    head = text[after]
    if not (head.islower() or head.isdigit()):
        return False
    raw, box = textpage.raw, pdfium_c.FS_RECTF()
    edges = []
    for index in (start, end - 1, after, stop - 1):
        pdfium_c.FPDFText_GetLooseCharBox(raw, index, box)
        edges.append((box.left, box.right))
    (first, _), (_, last), (next_left, next_right), (_, next_last) = edges
    if last > right + _SNAP:
        return False  # a word past its cell's edge overflowed it (LaTeX's): nothing broke
    if last + (next_right - next_left) <= right - PAD:
        return False  # the continuation would have fitted: a break set on purpose
    if abs(last - next_last) < _SNAP and next_left - first > _SNAP:  # flush right
        return left is not None and first - left <= 2 * PAD
    return first <= next_left + _SNAP  # from the cell's left, as its continuation


def _spaced(text: str, start: int, end: int) -> bool:
    return any(ch.isspace() for ch in text[start:end])


def _trimmed(text: str, span: Span) -> Span:
    start, end = span
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end
