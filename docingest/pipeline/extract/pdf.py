"""PDF extraction with PDFium (pypdfium2), page by page, with OCR for pages without text.

Why PDFium: pypdf, used before, dropped the spaces between words across whole paragraphs of
LaTeX and DocBook output and took many times the CPU; PDFium places spaces from the glyphs'
positions, as a viewer does, and no corpus PDF opens with pypdf but not with PDFium
(BENCHMARKS.md, "PDF text: pypdf (the previous engine) and PDFium, one run").

Reading order: PDFium's text page follows the content stream, which for LaTeX, Word and GPO
output is column by column (the 2-column DPR and NAACL papers, the 3-column Federal Register);
a two-column page written across is put in column order (`pdf_columns`).
A line-end hyphen PDFium recognises comes back as U+FFFE with the line already joined; the
hyphen is dropped or kept by the same compound rule as any other (`page_lines`). Arabic
lam-alef ligatures come back with their two letters swapped and are put back in order.

Structure: each line is read with its typography and place (`pdf_lines`); running heads,
feet and page numbers leave the text and footnotes move to the end of their page
(`pdf_layout`, which holds pages a few back to compare them). Headings come from the outline
(bookmarks) when it has at least `MIN_OUTLINE_ENTRIES` entries, else from typography
(`pdf_headings`) besides the few entries it has: an outline of one entry (a title) says
little of the sections. Tables come from a tagged PDF's structure tree (`pdf_tables`), else
from ruled grids (`pdf_ruled`) and text aligned in columns (`pdf_aligned`); on OCR'd pages
from the word boxes (`ocr_tables`).

OCR: a page whose text layer holds no text but draws something (a scan, a photo, text turned
into outlines) is rendered in grey at `ocr_dpi` and read by Tesseract (`ocr.py`); with
`DOCINGEST_OCR=force` every page is, and `off` never. A page too large for `max_image_pixels`
at that resolution is rendered at a lower one, down to 72 DPI; beyond that the document is
`document_too_large`, never a bitmap that exhausts memory.

PDFium gives no per-stream inflation limit as pypdf did: a decompression bomb runs into the
parsing child's address-space limit (`docingest/pipeline/isolation`) and fails as
`document_too_large`.
"""

from __future__ import annotations

import ctypes
import math
import re
from typing import TYPE_CHECKING

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from docingest.pipeline.document import (
    Block,
    BlockStream,
    DocumentFormat,
    ExtractedDocument,
    PageReporter,
    collect_blocks,
)
from docingest.pipeline.errors import (
    CorruptDocument,
    DocumentTooLarge,
    EmptyDocument,
    EncryptedDocument,
    NoTextFound,
)
from docingest.pipeline.extract.ocr import (
    LazyRecogniser,
    OcrMode,
    OcrOptions,
    OcrPageHook,
    OcrRecord,
)
from docingest.pipeline.extract.page_lines import clean, clean_lines, is_compound, page_blocks
from docingest.pipeline.extract.pdf_aligned import aligned_tables
from docingest.pipeline.extract.pdf_columns import in_reading_order
from docingest.pipeline.extract.pdf_headings import HeadingFinder
from docingest.pipeline.extract.pdf_info import fill_metadata, outline_headings, page_labels
from docingest.pipeline.extract.pdf_layout import FurnitureFilter, LaidOutPage, PdfPage
from docingest.pipeline.extract.pdf_lines import PdfLine, align_text, read_lines
from docingest.pipeline.extract.pdf_ruled import ruled_tables
from docingest.pipeline.extract.pdf_rules import mark_ruled
from docingest.pipeline.extract.pdf_tables import page_tables

if TYPE_CHECKING:
    from PIL.Image import Image

MIN_OCR_DPI = 72
"""The lowest resolution a page is rendered at for OCR; a larger page is too large."""

MIN_OUTLINE_ENTRIES = 3
"""Outline entries from which the outline, not typography, gives the headings."""

_SOFT_HYPHEN = re.compile(r"(\S*)\ufffe(\w?)")
_ALEF_LAM = re.compile("[\u0622\u0623\u0625\u0627]\u0644")
_NO_OCR = OcrOptions(mode=OcrMode.OFF)


def extract_pdf(
    data: bytes,
    *,
    max_pages: int,
    ocr: OcrOptions = _NO_OCR,
    on_page: PageReporter | None = None,
    on_ocr_page: OcrPageHook | None = None,
) -> ExtractedDocument:
    """Extract the text of `data`, a PDF of at most `max_pages` pages, as blocks.

    `on_page(done, total)` is called after each page, for progress; `on_ocr_page()` before
    each page is recognised.

    Raises `EmptyDocument` for 0 bytes or no pages, `EncryptedDocument` when a password is
    needed, `CorruptDocument` when PDFium cannot read the structure or any page,
    `DocumentTooLarge` above `max_pages` or for a page too large to render, and `NoTextFound`
    when no page has text (nor gives any to OCR).
    """
    pages = iter_pdf(data, max_pages=max_pages, ocr=ocr, on_page=on_page, on_ocr_page=on_ocr_page)
    return collect_blocks(pages)


def iter_pdf(
    data: bytes,
    *,
    max_pages: int,
    ocr: OcrOptions = _NO_OCR,
    on_page: PageReporter | None = None,
    on_ocr_page: OcrPageHook | None = None,
    ocr_record: OcrRecord | None = None,
) -> BlockStream:
    """`extract_pdf`, a page at a time: yield each page's blocks as it is read, then return
    the document (its `blocks` left empty). The pages read by OCR are recorded in
    `ocr_record` as they are, if given. Raises as `extract_pdf` does: the errors about the
    file as a whole before the first page, `NoTextFound` after the last."""
    if not data:
        raise EmptyDocument("The file is empty (0 bytes); upload the PDF again.")
    pdf = _open(data)
    page_count = len(pdf)
    if page_count == 0:
        raise EmptyDocument("The PDF has no pages.")
    if page_count > max_pages:
        raise DocumentTooLarge(
            f"The PDF has {page_count:,} pages, above the limit of {max_pages:,}; "
            "split it into smaller files."
        )
    headings = outline_headings(pdf, page_count)
    finder = None
    if sum(map(len, headings.values())) < MIN_OUTLINE_ENTRIES:
        finder = HeadingFinder()
    labels = page_labels(pdf, page_count)
    tagged = bool(pdfium_c.FPDFCatalog_IsTagged(pdf))
    recogniser = LazyRecogniser(ocr, on_page=on_ocr_page, record=ocr_record)
    furniture = FurnitureFilter()
    failed_pages: list[int] = []
    has_text = False

    def blocks(laid: LaidOutPage) -> list[Block]:
        marked = finder.find(laid.lines) if finder is not None else None
        page_headings = headings.get(laid.index, [])
        texts = [line.text for line in laid.lines]
        tables = frozenset(i for i, line in enumerate(laid.lines) if line.table)
        return page_blocks(
            texts, page=laid.index + 1, headings=page_headings, marked=marked,
            footnotes=laid.footnotes, tables=tables,
        )  # fmt: skip

    try:
        for index in range(page_count):
            try:
                lines, height = _page_lines(
                    pdf, index, recogniser, tagged=tagged, headings=finder is not None
                )
            except pdfium.PdfiumError:
                failed_pages.append(index + 1)
                lines, height = [], 0.0
            lines = _drop_page_number(lines, page_label=labels[index], page_number=index + 1)
            has_text = has_text or any(line.text for line in lines)
            if finder is not None:
                finder.count(lines)
            if on_page is not None:
                on_page(index + 1, page_count)
            for laid in furniture.add(PdfPage(index, lines, height)):
                yield blocks(laid)
        for laid in furniture.finish():
            yield blocks(laid)
    finally:
        recogniser.close()
    if not has_text:
        _raise_no_text(page_count, failed_pages, recogniser)
    document = ExtractedDocument(format=DocumentFormat.PDF, blocks=[], pages=page_count)
    fill_metadata(document, pdf)
    document.extra["encrypted"] = pdfium_c.FPDF_GetSecurityHandlerRevision(pdf) != -1
    if failed_pages:
        document.extra["failed_pages"] = failed_pages
    if recogniser.record.pages:
        document.extra["ocr"] = recogniser.record.as_extra()
    return document


def _open(data: bytes) -> pdfium.PdfDocument:
    """Open `data` (owner-password-only files open as they are, as in any viewer)."""
    try:
        return pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        code = getattr(exc, "err_code", None)
        if code == pdfium_c.FPDF_ERR_PASSWORD:
            raise EncryptedDocument(
                "The PDF is password-protected; upload an unencrypted copy."
            ) from exc
        if code == pdfium_c.FPDF_ERR_SECURITY:
            raise EncryptedDocument(
                "The PDF is encrypted with a method that cannot be opened; upload an "
                "unencrypted copy."
            ) from exc
        detail = str(exc).removeprefix("Failed to load document ").strip("(). ")
        raise CorruptDocument(f"The PDF is damaged ({detail}) and cannot be read.") from exc


def _page_lines(
    pdf: pdfium.PdfDocument,
    index: int,
    recogniser: LazyRecogniser,
    *,
    tagged: bool,
    headings: bool,
) -> tuple[list[PdfLine], float]:
    """The page's text layer as clean lines ("" a blank line) in reading order with their
    typography (a tagged PDF's tables as whole lines; lines boxed by rules, and lines in
    columns, marked if `headings` are to be found from typography: only that reads them),
    or its OCR's lines (without) when it has none (or OCR is forced); and the page's height."""
    page = pdf[index]
    try:
        textpage = page.get_textpage()
        text = _mend_lam_alef(textpage, align_text(textpage, textpage.get_text_range()))
        tables = page_tables(page, textpage, text) if tagged else ([], [])
        tidy = _tidy if "\ufffe" in text or text.count("\n") != text.count("\r\n") else clean
        styled = read_lines(textpage, text, tables, tidy=tidy, headings=headings)
        if styled is not None and not tables[0]:  # untagged: from rules, aligned columns
            styled = ruled_tables(page, textpage, text, styled, tidy=tidy)
            styled = aligned_tables(textpage, text, styled, page.get_height(), tidy=tidy)
        if styled is not None:  # after the tables: they travel as whole lines
            styled = in_reading_order(textpage, text, styled, page.get_width(), tidy)
        textpage.close()
        mode = recogniser.options.mode
        needs_ocr = mode is OcrMode.FORCE or (
            mode is OcrMode.AUTO
            and not any(char.isalnum() for char in text)
            and pdfium_c.FPDFPage_CountObjects(page) > 0
        )
        if needs_ocr:
            recognised = recogniser.read(_render(page, index, recogniser.options), page=index + 1)
            text = text if recognised is None else recognised.text
            styled = None
            if recognised is not None and recognised.tables:  # rows from OCR's word boxes
                ocr_lines, whole = recognised.blocks_lines()
                return [PdfLine(line if n in whole else clean(line), table=n in whole)
                        for n, line in enumerate(ocr_lines)], 0.0  # fmt: skip
        if styled is None:
            plain = clean_lines(_mend_hyphens(text), page_label="", page_number=0)
            return [PdfLine(line) for line in plain], 0.0
        return (mark_ruled(page, styled) if headings else styled), page.get_height()
    finally:
        page.close()


def _tidy(line: str) -> str:
    """A line cleaned, its PDFium hyphens resolved and a bare line feed a space; a page with
    neither (most) uses `clean` alone: two calls less a line (CPU, BENCHMARKS.md)."""
    return clean(_mend_hyphens(line).replace("\n", " "))


def _drop_page_number(lines: list[PdfLine], *, page_label: str, page_number: int) -> list[PdfLine]:
    """Trim blank lines at both ends, and a page number alone on the first or last line."""
    start, end = 0, len(lines)
    while start < end and not lines[start].text:
        start += 1
    while end > start and not lines[end - 1].text:
        end -= 1
    if end > start and lines[end - 1].text in (page_label, str(page_number)):
        end -= 1
    if end > start and lines[start].text in (page_label, str(page_number)):
        start += 1
    return lines[start:end]


def _mend_lam_alef(textpage: pdfium.PdfTextPage, text: str) -> str:
    """Put back in order the two letters of an Arabic lam-alef ligature.

    PDFium maps the ligature glyph to lam + alef and then, reordering the right-to-left run,
    swaps them ("الإنتاجية" came out "اإلنتاجية" from Word). Both letters carry the glyph's
    box, which no two letters of separate glyphs share: that identifies the pair.
    """
    if not _ALEF_LAM.search(text):
        return text
    chars = list(text)
    for match in _ALEF_LAM.finditer(text):
        first = match.start()
        if _char_box(textpage, first) == _char_box(textpage, first + 1) and (
            pdfium_c.FPDFText_GetUnicode(textpage, first) == ord(text[first])
        ):
            chars[first], chars[first + 1] = chars[first + 1], chars[first]
    return "".join(chars)


def _char_box(textpage: pdfium.PdfTextPage, index: int) -> tuple[float, ...]:
    left, right, bottom, top = (ctypes.c_double() for _ in range(4))
    pdfium_c.FPDFText_GetCharBox(textpage, index, left, right, bottom, top)
    return (left.value, right.value, bottom.value, top.value)


def _mend_hyphens(text: str) -> str:
    """Resolve PDFium's line-break hyphens (U+FFFE, line already joined) like `page_lines`."""

    def mend(match: re.Match[str]) -> str:
        fragment, following = match.groups()
        if following.islower() and fragment[-1:].isalpha() and not is_compound(fragment):
            return fragment + following
        return f"{fragment}-{following}"

    return _SOFT_HYPHEN.sub(mend, text) if "\ufffe" in text else text


def _render(page: pdfium.PdfPage, index: int, options: OcrOptions) -> Image:
    """Render the page in grey at `options.dpi`, or lower to stay within `max_pixels`."""
    width, height = page.get_size()
    area = max(width, 1.0) * max(height, 1.0)  # in points squared
    dpi = min(float(options.dpi), 72 * math.sqrt(options.max_pixels / area))
    if dpi < MIN_OCR_DPI:
        raise DocumentTooLarge(
            f"Page {index + 1} measures {width:,.0f} × {height:,.0f} points; rendering it for "
            f"OCR at {MIN_OCR_DPI} DPI would exceed the limit of {options.max_pixels:,} pixels."
        )
    bitmap = page.render(scale=dpi / 72, grayscale=True, draw_annots=False)
    image: Image = bitmap.to_pil()
    return image


def _raise_no_text(page_count: int, failed_pages: list[int], recogniser: LazyRecogniser) -> None:
    if failed_pages and len(failed_pages) == page_count:
        raise CorruptDocument(f"The PDF is damaged: none of its {page_count} pages could be read.")
    if failed_pages:
        raise CorruptDocument(
            f"The PDF is damaged: {len(failed_pages)} of its {page_count} pages could not "
            "be read and the others hold no text."
        )
    if recogniser.unavailable is not None:
        raise recogniser.unavailable
    if recogniser.options.mode is OcrMode.OFF:
        raise NoTextFound(
            "The PDF has no text layer (it looks scanned) and OCR is off "
            "(DOCINGEST_OCR=off); set DOCINGEST_OCR=auto, or run OCR (e.g. ocrmypdf) and "
            "upload the result."
        )
    raise NoTextFound("The PDF holds no text, and OCR found none on its pages.")
