"""Hand-built PDFs with structure for the PDF-structure tests: tagged tables, type sizes given
only by the text matrix, all-bold pages, lines typeset with chosen fonts and spacing, pages
of tiny text objects (built at test time)."""

from __future__ import annotations

from collections.abc import Sequence

from tests.support.pdf_files import build_pdf, stream

_HELVETICA = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"
_BOLD = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold >>"


def _escape(text: str) -> bytes:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)").encode("latin-1")


def text_pdf(lines: list[tuple[str, float, bool]], *, size_in_matrix: bool = False) -> bytes:
    """One page of `lines` (text, size, bold) top down. With `size_in_matrix` each line is
    set in a font of size 1 scaled by its text matrix (PDFium then tells no size: 1)."""
    content, y = [], 760.0
    for text, size, bold in lines:
        font = b"/F2" if bold else b"/F1"
        if size_in_matrix:
            content.append(b"BT %s 1 Tf %g 0 0 %g 72 %g Tm (%s) Tj ET" % (
                font, size, size, y, _escape(text)))  # fmt: skip
        else:
            content.append(b"BT %s %g Tf 72 %g Td (%s) Tj ET" % (font, size, y, _escape(text)))
        y -= size * 1.6
    return fonts_page(b"\n".join(content), [_HELVETICA, _BOLD])


Typeset = tuple[str, float, str] | tuple[str, float, str, float]
"""A line for `typeset_pdf`: text, size, font ("regular", "bold" or "serif"), and the x of
its first word when it is set apart from the rest by a tab stop; "caps" is a small-capitals
font (named so, as LaTeX's are); "ideographic" is Helvetica whose "~" reads as the
ideographic full stop "。" (its ToUnicode map: no CJK font is needed to end a sentence so);
"code" is Courier-Bold (a code name set as a heading)."""
_FONTS = {
    "regular": b"/F1", "bold": b"/F2", "serif": b"/F3", "caps": b"/F4", "ideographic": b"/F5",
    "code": b"/F6",
}  # fmt: skip
_TYPESET_FONTS = [
    _HELVETICA,
    _BOLD,
    b"<< /Type /Font /Subtype /Type1 /BaseFont /Times-Roman >>",
    b"<< /Type /Font /Subtype /Type1 /BaseFont /LMRomanCaps10-Regular >>",
    b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /ToUnicode %d 0 R >>",
    b"<< /Type /Font /Subtype /Type1 /BaseFont /Courier-Bold >>",
]
_FULL_STOP_CMAP = (
    b"/CIDInit /ProcSet findresource begin 12 dict begin begincmap /CMapName /Stop def "
    b"/CMapType 2 def 1 begincodespacerange <00> <FF> endcodespacerange "
    b"1 beginbfchar <7E> <3002> endbfchar endcmap "
    b"CMapName currentdict /CMap defineresource pop end end"
)


def typeset_pdf(lines: Sequence[Typeset], *, leading: float = 1.2) -> bytes:
    """One page (as tall as the lines need) of `lines` top down in Helvetica, Helvetica-Bold,
    Times or a small-capitals font, each baseline `leading` sizes below the one before: 1.2
    sets lines of one paragraph, with no space between; an empty text leaves a line's space
    (a gap)."""
    return typeset_pages([lines], leading=leading)


def typeset_pages(pages: Sequence[Sequence[Typeset]], *, leading: float = 1.2) -> bytes:
    """`typeset_pdf` for several pages, one list of lines each."""
    contents, heights = [], []
    for lines in pages:
        content, y = [], 40 + sum(line[1] * leading for line in lines)
        heights.append(y + 40)
        for line in lines:
            text, size, font = line[0], line[1], _FONTS[line[2]]
            y -= size * leading
            if len(line) == 4:  # "1." at 72, its title at the tab stop
                first, _, rest = text.partition(" ")
                content.append(b"BT %s %g Tf 72 %g Td (%s) Tj ET" % (font, size, y, _escape(first)))
                content.append(b"BT %s %g Tf %g %g Td (%s) Tj ET" % (
                    font, size, line[3], y, _escape(rest)))  # fmt: skip
            elif text:
                content.append(b"BT %s %g Tf 72 %g Td (%s) Tj ET" % (font, size, y, _escape(text)))
        contents.append(b"\n".join(content))
    return _fonts_pages(contents, _TYPESET_FONTS, heights, extra=[stream(_FULL_STOP_CMAP)])


def tiny_objects_pdf(count: int) -> bytes:
    """One page holding `count` text objects of one tiny letter each, in a grid."""
    columns = 400
    content = b"\n".join(
        b"BT /F1 1 Tf %d %d Td (x) Tj ET" % (10 + (n % columns) * 1.5, 780 - (n // columns) * 3)
        for n in range(count)
    )
    return helvetica_page(content)


def tagged_table_pdf(rows: int, *, nested: bool = False) -> bytes:
    """A tagged PDF: one page, a table of `rows` rows of two cells ("name N", "value N"),
    each cell's text a marked-content sequence its TD points at, set small enough to fit.
    With `nested`, the first row's second cell holds a table of its own (two cells)."""
    size = max(min(700 / (rows + 2), 10), 0.1)
    content, kids, objects = [], [], []
    mcid = 0
    # Objects: 1 catalog, 2 pages, 3 page, 4 font, 5 content, 6 StructTreeRoot, 7 Table,
    # then a TR and its TDs per row (and the nested table's elements).
    next_number = 8

    def element(kind: bytes, parent: int, kids_ref: bytes) -> int:
        nonlocal next_number
        number = next_number
        next_number += 1
        objects.append((number, b"<< /Type /StructElem /S /%s /P %d 0 R /Pg 3 0 R /K %s >>" % (
            kind, parent, kids_ref)))  # fmt: skip
        return number

    def cell(text: str, parent: int, y: float, x: float) -> int:
        nonlocal mcid
        content.append(b"/TD << /MCID %d >> BDC BT /F1 %g Tf %g %g Td (%s) Tj ET EMC" % (
            mcid, size, x, y, _escape(text)))  # fmt: skip
        number = element(b"TD", parent, b"%d" % mcid)
        mcid += 1
        return number

    for row in range(rows):
        y = 760 - (row + 1) * size * 1.1
        tr = next_number
        next_number += 1
        first = cell(f"name {row}", tr, y, 72)
        if nested and row == 0:
            inner_table = next_number
            next_number += 1
            inner_tr = next_number
            next_number += 1
            a, b = cell("inner a", inner_tr, y, 200), cell("inner b", inner_tr, y, 260)
            objects.append((inner_tr, b"<< /Type /StructElem /S /TR /P %d 0 R /K [%d 0 R %d 0 R] >>"
                            % (inner_table, a, b)))  # fmt: skip
            td = next_number
            next_number += 1
            objects.append((inner_table, b"<< /Type /StructElem /S /Table /P %d 0 R /K [%d 0 R] >>"
                            % (td, inner_tr)))  # fmt: skip
            objects.append((td, b"<< /Type /StructElem /S /TD /P %d 0 R /K [%d 0 R] >>"
                            % (tr, inner_table)))  # fmt: skip
            second = td
        else:
            second = cell(f"value {row}", tr, y, 200)
        objects.append((tr, b"<< /Type /StructElem /S /TR /P 7 0 R /K [%d 0 R %d 0 R] >>" % (
            first, second)))  # fmt: skip
        kids.append(tr)
    content.append(b"BT /F1 10 Tf 72 40 Td (After the table.) Tj ET")
    parent_tree = b"<< /Nums [0 [%s]] >>" % b" ".join(
        b"%d 0 R" % number
        for number, body in sorted(objects)
        if b"/S /TD" in body and b"/K [" not in body
    )
    head = [
        b"<< /Type /Catalog /Pages 2 0 R /MarkInfo << /Marked true >> /StructTreeRoot 6 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /StructParents 0 "
        b"/Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
        _HELVETICA,
        stream(b"\n".join(content)),
        b"<< /Type /StructTreeRoot /K [7 0 R] /ParentTree %s >>" % parent_tree,
        b"<< /Type /StructElem /S /Table /P 6 0 R /K [%s] >>"
        % b" ".join(b"%d 0 R" % kid for kid in kids),
    ]
    body = dict(objects)
    return build_pdf(head + [body[number] for number in range(8, next_number)])


def aligned_table_pdf(
    rows: Sequence[Sequence[str]],
    *,
    before: Sequence[str] = (),
    rules: int = 0,
    height: float = 792,
) -> bytes:
    """One untagged page: the `before` lines as prose, then `rows` set in columns 110 points
    apart (no tags, no rules: as LaTeX's tables without lines), then `rules` × `rules` cells
    of thin ruling lines drawn below (a grid that holds no text)."""
    content, y = [], height - 40.0
    for text in before:
        content.append(b"BT /F1 10 Tf 72 %g Td (%s) Tj ET" % (y, _escape(text)))
        y -= 14
    y -= 10
    for row in rows:
        for column, cell in enumerate(row):
            content.append(
                b"BT /F1 10 Tf %g %g Td (%s) Tj ET" % (72 + 110 * column, y, _escape(cell))
            )
        y -= 14
    for k in range(rules + 1 if rules else 0):
        step = 400 / rules
        content.append(b"0.1 w 72 %g m 472 %g l S" % (y - k * step * 0.5, y - k * step * 0.5))
        content.append(b"0.1 w %g %g m %g %g l S" % (72 + k * step, y, 72 + k * step, y - 200))
    return helvetica_page(b"\n".join(content), height)


def ruled_table_pdf(
    rows: Sequence[Sequence[str]],
    *,
    dashes: int = 0,
    across_only: bool = False,
    height: float = 792,
) -> bytes:
    """One untagged page: `rows` in a grid of thin ruled cells 150 points wide, a cell's
    lines ("\\n" in its text) set one under the other, so a row can be taller than a line;
    then `dashes` tiny rules scattered below, which form no grid. `across_only`: no
    vertical rules (rows ruled across only, as `border-bottom` tables are)."""
    content: list[bytes] = []
    top = height - 52
    ys = [top]
    for row in rows:
        row_height = 14 * max(cell.count("\n") + 1 for cell in row) + 6
        for column, cell in enumerate(row):
            for n, text in enumerate(cell.split("\n")):
                y = ys[-1] - 14 - 14 * n
                x = 76 + 150 * column
                content.append(b"BT /F1 10 Tf %g %g Td (%s) Tj ET" % (x, y, _escape(text)))
        ys.append(ys[-1] - row_height)
    for y in ys:  # borders drawn cell by cell, as Chromium and LibreOffice draw them
        for column in range(len(rows[0])):
            content.append(b"%g %g 150 0.5 re f" % (72 + 150 * column, y))
    for column in range(0 if across_only else len(rows[0]) + 1):
        content.append(b"%g %g 0.5 %g re f" % (72 + 150 * column, ys[-1], ys[0] - ys[-1]))
    for n in range(dashes):
        content.append(b"%g %g 3 0.3 re f" % (20 + (n % 115) * 5, 300 - (n // 115) * 2))
    return helvetica_page(b"\n".join(content), height)


def row_written_grid_pdf(lines: Sequence[Sequence[str]], *, ruled_after: set[int]) -> bytes:
    """One untagged page: each of `lines` set on one baseline, its cells 150 points apart and
    written left to right (as the IRS's forms write a row), in a grid of thin rules whose
    horizontal ones fall above the first line and after each line numbered in `ruled_after`:
    a band between two rules may hold several lines."""
    content: list[bytes] = []
    ys, y = [740.0], 740.0
    for number, line in enumerate(lines):
        y -= 14
        for column, text in enumerate(line):
            if text:
                content.append(b"BT /F1 10 Tf %g %g Td (%s) Tj ET" % (
                    76 + 150 * column, y, _escape(text)))  # fmt: skip
        if number in ruled_after:
            y -= 6
            ys.append(y)
    columns = max(len(line) for line in lines)
    for rule in ys:
        content.append(b"72 %g %g 0.5 re f" % (rule, 150 * columns))
    for column in range(columns + 1):
        content.append(b"%g %g 0.5 %g re f" % (72 + 150 * column, ys[-1], ys[0] - ys[-1]))
    return helvetica_page(b"\n".join(content))


def placed_pdf(
    texts: Sequence[tuple[str, float, float, float]],
    rules: Sequence[tuple[float, float, float]] = (),
) -> bytes:
    """One page of `texts` (text, size, x, baseline y) written in the order given, and
    horizontal `rules` (x from, x to, y) stroked half a point thick."""
    content = [
        b"BT /F1 %g Tf %g %g Td (%s) Tj ET" % (size, x, y, _escape(text))
        for text, size, x, y in texts
    ]
    content += [b"0.5 w %g %g m %g %g l S" % (x0, y, x1, y) for x0, x1, y in rules]
    return helvetica_page(b"\n".join(content))


def helvetica_page(content: bytes, height: float = 792) -> bytes:
    """A one-page PDF of `content` (a content stream) in Helvetica as /F1, 612 points wide."""
    return fonts_page(content, [_HELVETICA], height)


def fonts_page(content: bytes, fonts: Sequence[bytes], height: float = 792) -> bytes:
    """A one-page PDF of `content` (a content stream), 612 points wide, whose font
    dictionaries `fonts` are /F1, /F2, … in order."""
    return _fonts_pages([content], fonts, [height])


def _fonts_pages(
    contents: Sequence[bytes],
    fonts: Sequence[bytes],
    heights: Sequence[float],
    *,
    extra: Sequence[bytes] = (),
) -> bytes:
    """A PDF of one page per content stream, fonts shared; `extra` objects come last, and
    a font dictionary holding "%d" gets the first one's number (a ToUnicode map)."""
    first_font, first_page = 3, 3 + len(fonts)
    first_content = first_page + len(contents)
    first_extra = first_content + len(contents)
    names = b" ".join(b"/F%d %d 0 R" % (n + 1, first_font + n) for n in range(len(fonts)))
    fonts = [font % first_extra if b"%d" in font else font for font in fonts]
    pages = [
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 %g] "
        b"/Resources << /Font << %s >> >> /Contents %d 0 R >>" % (height, names, first_content + n)
        for n, height in enumerate(heights)
    ]
    kids = b" ".join(b"%d 0 R" % (first_page + n) for n in range(len(contents)))
    catalog = b"<< /Type /Catalog /Pages 2 0 R >>"
    pages_tree = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, len(contents))
    streams = [stream(content) for content in contents]
    return build_pdf([catalog, pages_tree, *fonts, *pages, *streams, *extra])
