"""A PDF page's text lines with their typography and place, read from PDFium's text page.

PDFium's text (`FPDFText_GetText`) holds one character per character index, lines ended by
generated "\\r\\n", so a line's characters are a range of indices. Each line is sampled at a
few of its letters and digits (not every character: a page of a LaTeX paper has ~5,000 and a
line's type rarely changes mid-line; a bold word inside a line shows as a mixed sample): font
size, weight, italic flag and family, and the boxes give the line's extent on the page. A font
that carries no size (PDFium says 0 or 1) is measured by its glyphs' box height instead. When
the outline gives the headings, weight and slant are not read (only heading finding needs
them). Reading the type once per text object was weighed and not built: a line's first and
last letters share an object in 23-86% of the corpus's lines, and finding a character's
object costs a call as reading its font does (BENCHMARKS.md, "PDF structure").

pypdfium2 has no per-line API; pdfplumber gives per-character dicts but costs ~35× the CPU
per page (BENCHMARKS.md, "PDF structure"), hence these direct PDFium calls (`pdf_calls`).
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Callable
from dataclasses import dataclass

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from docingest.pipeline.extract.pdf_calls import font_info, font_size, loose_char_box, unicode_of
from docingest.pipeline.extract.pdf_tables import PdfTable

SAMPLES_PER_LINE = 3
"""Letters sampled per line for its typography: first and last, and the middle one where
those two differ in size (CPU: BENCHMARKS.md, "PDF structure"); `_picks` is written for 3."""

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
_COLUMNAR_CHARS = 150
_CLAUSE_ENDS = (".", ",", ";", ":")
_COLUMN_GAP = 1.5
"""A gap between two words wider than this many times the type size parts table cells."""
_LEADING_NUMBER = re.compile(r"\s*(?:\d{1,3}(?:\.\d{1,3})*|[A-Z]|[IVX]{1,6})[.)]?(?=\s)")
"""A section number a tab stop parts from its title ("1.\tCONFLICTS OF INTEREST"): that gap
parts no cells."""


@dataclass(slots=True)
class PdfLine:
    """One printed line: text, style (`size` in points, 0 when unknown), and place in PDF
    user space (origin bottom left: `top` > `bottom`).

    Not frozen, but treated as if it were: a stage that changes a line makes a copy
    (`dataclasses.replace`). A frozen dataclass sets each of its 13 fields through
    `object.__setattr__`, 1.8 µs a line, a tenth of the R manual's reading of lines."""

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
    ruled: bool = False
    """Drawn rules box the line in, with space beyond them (`pdf_rules`)."""
    start: int = -1
    """Index of the line's first character in the text page (-1: not read from one)."""
    table: bool = False
    """The line is a whole table (`pdf_tables`), rows on lines of its `text`."""

    @property
    def styled(self) -> bool:
        """Whether typography was read for this line (not OCR, not past the page's cap)."""
        return self.size > 0


def align_text(textpage: pdfium.PdfTextPage, text: str) -> str:
    """Return `text` (PDFium's `FPDFText_GetText`) with a NUL put back for each character index
    it left out, so that text positions are character indices again.

    PDFium leaves out of the text the glyphs it maps to no character (code 2: LaTeX math
    symbols without a Unicode mapping), which shifts every later position; a character
    outside the BMP (Word's math italics, U+1D400…) holds two indices, its UTF-16 halves, and
    gets a NUL for the second. The NULs are control characters that cleaning drops, so the
    text read is unchanged (else a Word page with an equation lost its tables). Called for a page
    whose text is shorter than its character count only (one call per character).
    """
    count = pdfium_c.FPDFText_CountChars(textpage)
    if len(text) >= count:
        return text
    raw, length = textpage.raw, len(text)
    pieces: list[str] = []
    append, position = pieces.append, 0
    for index in range(count):
        code = unicode_of(raw, index)
        if position < length:
            char = text[position]
            if (
                ord(char) == code
                or (code == 2 and char == "\ufffe")
                or (code >> 10 == 0x36 and _high_half(char) == code)
            ):
                append(char)
                position += 1
                continue
        append("\x00")
    if position < length:  # not a matter of left-out glyphs: keep PDFium's text
        return text
    return "".join(pieces)


def _high_half(char: str) -> int:
    """The UTF-16 high surrogate of `char`, 0 for a character inside the BMP."""
    point = ord(char)
    return 0xD800 + ((point - 0x10000) >> 10) if point > 0xFFFF else 0


def read_lines(
    textpage: pdfium.PdfTextPage,
    text: str,
    tables: tuple[list[PdfTable], list[int]] = ([], []),
    tidy: Callable[[str], str] = str.strip,
    *,
    headings: bool = True,
) -> list[PdfLine] | None:
    """Split `text` (the whole text page, one character per index) into styled lines, their
    text passed through `tidy`; the lines mostly made of a table's characters (`tables`: the
    tables and each character's table, from `pdf_tables.page_tables`) give way to the
    table, at its first line. Without `headings` (the outline gives them) no line is
    looked at for `columnar`, nor read for weight and slant (`bold` and `italic` stay False),
    which only heading finding reads; the family still is (`pdf_aligned` reads it).

    Returns None when the text does not line up with the character indices (then only the
    plain text is used). Blank lines are kept as empty `PdfLine`s (paragraph breaks).
    """
    if len(text) != pdfium_c.FPDFText_CountChars(textpage):
        return None
    found, owners = tables
    placed: set[int] = set()
    lines: list[PdfLine] = []
    candidates: list[tuple[int, str]] = []  # (position in `lines`, raw text) of styled lines
    sizes: dict[float, int] = {}
    position = 0
    style = _StyleReader(textpage, weights=headings).style
    for raw in text.split("\r\n"):
        table = _table_of(raw, owners[position : position + len(raw)]) if owners else -1
        if table >= 0:
            if table not in placed:
                placed.add(table)
                if found[table].caption:  # a paragraph of its own, just before its table
                    lines += [PdfLine(""), PdfLine(found[table].caption), PdfLine("")]
                rows = map(tidy, found[table].text().split("\n"))  # PDFium's hyphens
                lines.append(PdfLine("\n".join(rows), table=True))
        elif len(lines) < MAX_STYLED_LINES and raw.strip() and (line := style(raw, position, tidy)):
            if headings:
                sizes[line.size] = sizes.get(line.size, 0) + len(raw)
                candidates.append((len(lines), raw))
            lines.append(line)
        else:
            lines.append(PdfLine(tidy(raw), start=position))
        position += len(raw) + 2
    if headings and candidates:
        _mark_columnar(textpage, lines, candidates, max(sizes, key=sizes.__getitem__))
    return lines


def _mark_columnar(
    textpage: pdfium.PdfTextPage,
    lines: list[PdfLine],
    candidates: list[tuple[int, str]],
    usual: float,
) -> None:
    """Set `columnar` on the heading candidates among the styled `lines` (bold or larger than
    the page's `usual` size, no clause end) whose words stand far apart."""
    box = pdfium_c.FS_RECTF()
    for number, raw in candidates:
        line = lines[number]
        if (line.bold or line.size > usual * 1.05) and not raw.rstrip().endswith(_CLAUSE_ENDS):
            line.columnar = _columnar(textpage.raw, box, raw, line)


def _columnar(
    textpage: pdfium_c.FPDF_TEXTPAGE, box: pdfium_c.FS_RECTF, raw: str, line: PdfLine
) -> bool:
    """Whether two words of the line stand far apart (see `PdfLine.columnar`)."""
    if len(raw) > _COLUMNAR_CHARS:
        return False
    previous_right = None
    number = _LEADING_NUMBER.match(raw)
    skip = number.end() if number else 0
    for offset, char in enumerate(raw):
        if char.isspace():
            continue
        pdfium_c.FPDFText_GetLooseCharBox(textpage, line.start + offset, box)
        if previous_right is not None and box.left - previous_right > _COLUMN_GAP * line.size:
            return True
        previous_right = box.right if offset >= skip else None
    return False


def _table_of(raw: str, owners: list[int]) -> int:
    """The table most of the line's letters and digits belong to, -1 when none does."""
    low, high = min(owners, default=-1), max(owners, default=-1)
    if high < 0:
        return -1  # the line is in no table (most lines: no count a character)
    if low == high:
        return high if any(char.isalnum() for char in raw) else -1
    counts: dict[int, int] = {}
    letters = 0
    for char, owner in zip(raw, owners, strict=False):
        if char.isalnum():
            letters += 1
            counts[owner] = counts.get(owner, 0) + 1
    best = max(counts, key=counts.__getitem__, default=-1)
    return best if best >= 0 and 2 * counts[best] >= letters else -1


_NAME_LENGTH = ctypes.c_ulong(_NAME_SIZE)
_FAR = float("inf")


class _StyleReader:
    """Samples lines of one text page; font names are parsed once per name."""

    def __init__(self, textpage: pdfium.PdfTextPage, *, weights: bool = True) -> None:
        self.textpage = textpage.raw  # the handle itself: no conversion per call
        self.weights = weights
        self.name = ctypes.create_string_buffer(_NAME_SIZE)
        self.flags = ctypes.c_int()
        self.flags_ref = ctypes.byref(self.flags)
        self.box = pdfium_c.FS_RECTF()
        self.box_ref = ctypes.byref(self.box)
        self.fonts: dict[bytes, tuple[str, bool]] = {}  # family, bold (by name or weight)

    def style(self, raw: str, start: int, tidy: Callable[[str], str]) -> PdfLine | None:
        """The line `raw` at character `start`, its text passed through `tidy`, with its
        typography and place; None when it has no size."""
        picks = _picks(raw)
        if not picks:
            return None
        textpage, box, box_ref, weights = self.textpage, self.box, self.box_ref, self.weights
        name, flags, flags_ref, fonts = self.name, self.flags, self.flags_ref, self.fonts
        sizes: list[float] = []
        families: list[str] = []
        bolds = italics = 0
        left, right, top, bottom = _FAR, -_FAR, -_FAR, _FAR
        for number, offset in enumerate(picks):
            if number == 2:
                if abs(sizes[0] - sizes[1]) < 1:
                    break  # the ends agree on the size: the middle adds nothing worth its cost
                if not weights:  # three samples: the family is the majority's, the last counts
                    families.append(self.font(start + picks[1])[0])
            index = start + offset
            size = font_size(textpage, index)
            loose_char_box(textpage, index, box_ref)
            # comparisons, not min()/max(): this runs for every sample of every line
            box_left, box_right, box_top, box_bottom = box.left, box.right, box.top, box.bottom
            if box_right > box_left or box_top > box_bottom:
                if box_left < left:
                    left = box_left
                if box_right > right:
                    right = box_right
                if box_top > top:
                    top = box_top
                if box_bottom < bottom:
                    bottom = box_bottom
            if size <= 1.5:  # no size information: the glyph box's height, to a point
                size = float(round(box_top - box_bottom)) if box_top > box_bottom else 0.0
            sizes.append(size)
            if not weights and number == 1:
                continue  # of two samples the first gives the family; no weight is read
            # `font`, written out: a call a sample costs 7% of the reading (BENCHMARKS.md)
            length = font_info(textpage, index, name, _NAME_LENGTH, flags_ref)
            font = name.value if 0 < length <= _NAME_SIZE else b""
            known = fonts.get(font) if font else None
            if known is None:  # a font's weight is its own: read once
                known = fonts[font] = _font(textpage, index, font)
            families.append(known[0])
            bolds += known[1]
            italics += flags.value & _ITALIC_FLAG > 0
        sampled = len(sizes)
        sizes.sort()
        size = sizes[sampled // 2]
        if size < 0.5:
            return None
        if left == _FAR:
            left = right = top = bottom = 0.0
        family = families[0] if len(families) == 1 else max(families, key=families.count)
        return PdfLine(  # a tie of families: the first sample's
            tidy(raw),
            round(size, 1),
            weights and bolds >= _MOSTLY * sampled,
            weights and italics >= _MOSTLY * sampled,
            family,
            left,
            right,
            top,
            bottom,
            False,
            False,
            start,
        )

    def font(self, index: int) -> tuple[str, bool, bool]:
        """The family, weight (bold or not) and slant (italic or not) of character `index`."""
        length = font_info(self.textpage, index, self.name, _NAME_LENGTH, self.flags_ref)
        font = self.name.value if 0 < length <= _NAME_SIZE else b""
        known = self.fonts.get(font) if font else None
        if known is None:  # a font's weight is its own: read once
            known = self.fonts[font] = _font(self.textpage, index, font)
        return known[0], known[1], bool(self.flags.value & _ITALIC_FLAG)


def _font(textpage: pdfium_c.FPDF_TEXTPAGE, index: int, font: bytes) -> tuple[str, bool]:
    """The family and weight (bold by name or by weight) of the font named `font`."""
    text = _SUBSET_TAG.sub("", font.decode("latin-1"))
    family = text.split("-")[0].split(",")[0]
    bold = bool(_BOLD_NAME.search(text)) or (
        pdfium_c.FPDFText_GetFontWeight(textpage, index) >= _BOLD_WEIGHT
    )
    return family, bold


def _picks(raw: str) -> list[int]:
    """Offsets of up to 3 letters or digits spread over the line: the first, the last, then
    the middle one (any visible character where the line has no letter). Written out, not
    looped over `SAMPLES_PER_LINE`: this runs once a line (CPU, BENCHMARKS.md)."""
    length = len(raw)
    first = 0
    while first < length and not raw[first].isalnum():
        first += 1
    if first == length:
        return [i for i, char in enumerate(raw) if not char.isspace()][:1]
    last = length - 1
    while not raw[last].isalnum():
        last -= 1
    middle = (length - 1) // 2
    while middle < length and not raw[middle].isalnum():
        middle += 1
    picks = [first] if first == last else [first, last]
    if middle < length and middle not in picks:
        picks.append(middle)
    return picks
