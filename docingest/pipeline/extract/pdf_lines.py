"""A PDF page's text lines with their typography and place, read from PDFium's text page.

PDFium's text (`FPDFText_GetText`) holds one character per character index, lines ended by
generated "\\r\\n", so a line's characters are a range of indices. Each line is sampled at a
few of its letters and digits (not every character: a page of a LaTeX paper has ~5,000 and a
line's type rarely changes mid-line; a bold word inside a line shows as a mixed sample): font
size, weight, italic flag and family, and the boxes give the line's extent on the page. A font
that carries no size (PDFium says 0 or 1) is measured by its glyphs' box height instead.

pypdfium2 has no per-line API; pdfplumber gives per-character dicts but costs ~35× the CPU
per page (BENCHMARKS.md, "PDF structure"), hence these direct PDFium calls.
"""

from __future__ import annotations

import ctypes
import re
from dataclasses import dataclass, replace

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

SAMPLES_PER_LINE = 5
"""Letters sampled per line for its typography."""

MAX_STYLED_LINES = 3000
"""Lines sampled per page at most; a page with more (100,000 tiny text objects) gets its
lines without typography, so no headings, rather than unbounded work."""

_BOLD_WEIGHT = 600
_ITALIC_FLAG = 0x40  # PDF font descriptor flag 7 (ISO 32000-1, 9.8.2)
_BOLD_NAME = re.compile(r"bold|black|heavy|semibold|demi|medi|[-,]bd|cmbx|sfbx|cmb\d", re.I)
_SUBSET_TAG = re.compile(r"^[A-Z]{6}\+")
_NAME_SIZE = 128
_MOSTLY = 0.8
"""A line is bold (italic) when this share of its samples is: all but a stray glyph."""
_COLUMNAR_CHARS = 200
_COLUMN_GAP = 1.5
"""A gap between two words wider than this many times the type size parts table cells."""


@dataclass(frozen=True, slots=True)
class PdfLine:
    """One printed line: text, style (`size` in points, 0 when unknown), and place in PDF
    user space (origin bottom left: `top` > `bottom`)."""

    text: str
    size: float = 0.0
    bold: bool = False
    italic: bool = False
    family: str = ""
    left: float = 0.0
    right: float = 0.0
    top: float = 0.0
    bottom: float = 0.0
    columnar: bool = False
    """Words stand far apart, as a table row's cells do (read for lines in type other than
    the page's most common only: heading candidates)."""

    @property
    def styled(self) -> bool:
        """Whether typography was read for this line (not OCR, not past the page's cap)."""
        return self.size > 0


def read_lines(textpage: pdfium.PdfTextPage, text: str) -> list[PdfLine] | None:
    """Split `text` (the whole text page, one character per index) into styled lines.

    Returns None when the text does not line up with the character indices (then only the
    plain text is used). Blank lines are kept as empty `PdfLine`s (paragraph breaks).
    """
    if len(text) != pdfium_c.FPDFText_CountChars(textpage):
        return None
    lines: list[PdfLine] = []
    position = 0
    name = ctypes.create_string_buffer(_NAME_SIZE)
    flags = ctypes.c_int()
    for raw in text.split("\r\n"):
        if len(lines) < MAX_STYLED_LINES and raw.strip():
            lines.append(_styled(textpage, raw, position, name, flags))
        else:
            lines.append(PdfLine(raw))
        position += len(raw) + 2
    _mark_columnar(textpage, lines)
    return lines


def _mark_columnar(textpage: pdfium.PdfTextPage, lines: list[PdfLine]) -> None:
    """Set `columnar` on the lines set bold or larger than the page's usual type."""
    sizes: dict[float, int] = {}
    for line in lines:
        if line.styled:
            sizes[line.size] = sizes.get(line.size, 0) + len(line.text)
    if not sizes:
        return
    usual = max(sizes, key=sizes.__getitem__)
    box = pdfium_c.FS_RECTF()
    position = 0
    for number, line in enumerate(lines):
        start, position = position, position + len(line.text) + 2
        if not line.styled or len(line.text) > _COLUMNAR_CHARS:
            continue
        if not (line.bold or line.size > usual * 1.05):
            continue
        previous_right = None
        for offset, char in enumerate(line.text):
            if char.isspace():
                continue
            pdfium_c.FPDFText_GetLooseCharBox(textpage, start + offset, box)
            if previous_right is not None and box.left - previous_right > _COLUMN_GAP * line.size:
                lines[number] = replace(line, columnar=True)
                break
            previous_right = box.right


def _styled(
    textpage: pdfium.PdfTextPage,
    raw: str,
    start: int,
    name: ctypes.Array[ctypes.c_char],
    flags: ctypes.c_int,
) -> PdfLine:
    letters = [i for i, ch in enumerate(raw) if ch.isalnum()]
    if not letters:
        letters = [i for i, ch in enumerate(raw) if not ch.isspace()]
    step = max(len(letters) / SAMPLES_PER_LINE, 1.0)
    picks = sorted({letters[int(k * step)] for k in range(min(SAMPLES_PER_LINE, len(letters)))})
    sizes, bolds, italics, families = [], 0, 0, []
    box = pdfium_c.FS_RECTF()
    left, right, top, bottom = float("inf"), float("-inf"), float("-inf"), float("inf")
    for offset in picks:
        index = start + offset
        size = pdfium_c.FPDFText_GetFontSize(textpage, index)
        pdfium_c.FPDFText_GetLooseCharBox(textpage, index, box)
        if box.right > box.left or box.top > box.bottom:
            left, right = min(left, box.left), max(right, box.right)
            top, bottom = max(top, box.top), min(bottom, box.bottom)
        if size <= 1.5:  # no size information: the glyph box's height, to a point
            size = float(round(max(box.top - box.bottom, 0.0)))
        sizes.append(size)
        weight = pdfium_c.FPDFText_GetFontWeight(textpage, index)
        length = pdfium_c.FPDFText_GetFontInfo(textpage, index, name, _NAME_SIZE, flags)
        font = name.value.decode("latin-1") if 0 < length <= _NAME_SIZE else ""
        families.append(_SUBSET_TAG.sub("", font).split("-")[0].split(",")[0])
        bolds += weight >= _BOLD_WEIGHT or bool(_BOLD_NAME.search(font))
        italics += bool(flags.value & _ITALIC_FLAG)
    sizes.sort()
    size = sizes[len(sizes) // 2] if sizes else 0.0
    if left == float("inf"):
        left = right = top = bottom = 0.0
    return PdfLine(
        raw,
        size=round(size, 1) if size >= 0.5 else 0.0,
        bold=bool(picks) and bolds >= _MOSTLY * len(picks),
        italic=bool(picks) and italics >= _MOSTLY * len(picks),
        family=max(set(families), key=families.count) if families else "",
        left=left,
        right=right,
        top=top,
        bottom=bottom,
    )
