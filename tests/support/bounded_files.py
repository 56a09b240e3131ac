"""The pathological shapes of issue 24, built at test or benchmark time (none committed): small
uploads that split into tens of thousands of chunks, and a long scan to cancel mid-OCR.
"""

from __future__ import annotations

import io
import random

import openpyxl
from PIL import Image, ImageDraw, ImageFont
from pypdf import PdfReader, PdfWriter

from tests.pipeline.extract.test_xlsx import build_xlsx, rewrite_member
from tests.support.image_files import text_image
from tests.support.pdf_files import build_pdf, stream

MiB = 2**20
_FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"


def wide_csv(columns: int = 2_000_000) -> bytes:
    """A CSV of a header and one row, `columns` wide (about 32 MB at 2 million columns)."""
    header = ",".join(f"c{number}" for number in range(columns))
    row = ",".join(str(number % 997) for number in range(columns))
    return f"{header}\n{row}\n".encode()


def tall_xlsx(rows: int = 1_000_000, *, seed: int = 24) -> bytes:
    """A workbook of one sheet with `rows` rows of two numeric cells (about 10 MB at a
    million rows): openpyxl writes the package, the rows go into its sheet XML directly
    (openpyxl takes minutes for this many)."""
    rng = random.Random(seed)

    def fill(workbook: openpyxl.Workbook) -> None:
        sheet = workbook.active
        assert sheet is not None
        sheet.title = "Rows"
        sheet.append(["id", "value"])

    def rows_xml(xml: str) -> str:
        body = "".join(
            f'<row r="{number}"><c r="A{number}"><v>{number}</v></c>'
            f'<c r="B{number}"><v>{rng.randrange(10**9)}</v></c></row>'
            for number in range(2, rows + 1)
        )
        return xml.replace("</sheetData>", body + "</sheetData>", 1)

    return rewrite_member(build_xlsx(fill), "xl/worksheets/sheet1.xml", rows_xml)


def many_part_email(parts: int = 50_000) -> bytes:
    """A multipart message of `parts` small text parts (about 5 MB at 50,000), written out
    directly (`EmailMessage.add_attachment` takes minutes for this many)."""
    boundary = "part-boundary-24"
    head = (
        "From: sender@example.org\r\nTo: receiver@example.org\r\n"
        f"Subject: {parts} parts\r\nMIME-Version: 1.0\r\n"
        f'Content-Type: multipart/mixed; boundary="{boundary}"\r\n\r\n'
    )
    body = "".join(
        f"--{boundary}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f'Content-Disposition: attachment; filename="part-{number}.txt"\r\n\r\n'
        f"Part {number} says little.\r\n"
        for number in range(parts)
    )
    return (head + body + f"--{boundary}--\r\n").encode()


def text_pages_tiff(pages: int, *, lines_per_page: int = 12) -> bytes:
    """A multi-page TIFF scan of `pages` pages of printed text (no text layer: every page
    must be OCR'd, a second or more each)."""
    images = [
        text_image(
            [f"Page {page} line {line}: the quick brown fox jumps over the lazy dog."
             for line in range(lines_per_page)]
        ).convert("L")
        for page in range(1, pages + 1)
    ]  # fmt: skip
    out = io.BytesIO()
    images[0].save(out, "TIFF", save_all=True, append_images=images[1:], compression="tiff_lzw")
    return out.getvalue()


def blank_pages_tiff(pages: int, *, side: int = 4000) -> bytes:
    """A multi-page 1-bit TIFF of blank `side` × `side` pages (Tesseract still scans each)."""
    page = Image.new("1", (side, side), 1)
    ImageDraw.Draw(page).text((10, 10), ".", font=ImageFont.load_default(), fill=0)
    out = io.BytesIO()
    page.save(out, "TIFF", save_all=True, append_images=[page] * (pages - 1), compression="group4")
    return out.getvalue()


def text_pages_pdf(
    pages: list[str], *, chars_per_line: int = 100, chapter_pages: int = 10
) -> bytes:
    """A PDF with a text layer, one page per string of `pages` (ASCII), in small Helvetica
    lines, and an outline entry ("Chapter n") every `chapter_pages` pages: a long document
    whose sections, and so whose first chunks, come while later pages are still read."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"", _FONT]  # the page tree comes last
    kids = []
    for text in pages:
        escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        lines = [escaped[at : at + chars_per_line] for at in range(0, len(escaped), chars_per_line)]
        shown = b" ".join(b"(%s) Tj 0 -9 Td" % line.encode("ascii") for line in lines)
        objects.append(stream(b"BT /F1 7 Tf 36 760 Td %s ET" % shown))
        contents = len(objects)
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % contents
        )
        kids.append(b"%d 0 R" % len(objects))
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(kids), len(kids))
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(build_pdf(objects))))
    for first in range(0, len(pages), chapter_pages):
        writer.add_outline_item(title=f"Chapter {first // chapter_pages + 1}", page_number=first)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()
