"""Extraction: one module per format, all returning an `ExtractedDocument`."""

from __future__ import annotations

from pipeline.document import Detection, DocumentFormat, ExtractedDocument, PageReporter
from pipeline.errors import DocumentTooLarge, NoTextFound
from pipeline.extract.docx import extract_docx
from pipeline.extract.html import extract_html
from pipeline.extract.image import extract_image
from pipeline.extract.markdown import extract_markdown
from pipeline.extract.ocr import OcrOptions, OcrPageHook
from pipeline.extract.pdf import extract_pdf
from pipeline.extract.text import extract_text
from pipeline.settings import Settings


def extract(
    data: bytes,
    detection: Detection,
    *,
    settings: Settings,
    on_page: PageReporter | None = None,
    on_ocr_page: OcrPageHook | None = None,
) -> ExtractedDocument:
    """Extract the blocks and document metadata of `data`, already detected as `detection`.

    Raises `NoTextFound` when the document holds no text at all, and `DocumentTooLarge`
    when it yields more than `settings.max_extracted_chars` characters. `on_page(done, total)`
    follows a PDF's or an image's pages; other formats are one page, reported when extracted.
    `on_ocr_page()` is called before each page is OCR'd.
    """
    paged = detection.format in (DocumentFormat.PDF, DocumentFormat.IMAGE)
    match detection.format:
        case DocumentFormat.PDF:
            document = extract_pdf(
                data,
                max_pages=settings.max_pages,
                ocr=OcrOptions.from_settings(settings),
                on_page=on_page,
                on_ocr_page=on_ocr_page,
            )
        case DocumentFormat.IMAGE:
            document = extract_image(
                data,
                max_pages=settings.max_pages,
                ocr=OcrOptions.from_settings(settings),
                on_page=on_page,
                on_ocr_page=on_ocr_page,
            )
        case DocumentFormat.DOCX:
            document = extract_docx(
                data,
                max_uncompressed_bytes=settings.max_docx_uncompressed_bytes,
                max_compression_ratio=settings.max_docx_compression_ratio,
            )
        case DocumentFormat.HTML:
            document = extract_html(data, encoding=detection.encoding)
        case DocumentFormat.MARKDOWN:
            document = extract_markdown(data, encoding=detection.encoding)
        case DocumentFormat.TXT:
            document = extract_text(data, encoding=detection.encoding)
    if on_page is not None and not paged:
        on_page(1, 1)
    total = sum(len(block.text) for block in document.blocks)
    if total > settings.max_extracted_chars:
        raise DocumentTooLarge(
            f"The document yields {total:,} characters of text, above the limit of "
            f"{settings.max_extracted_chars:,}."
        )
    if not any(block.text.strip() for block in document.blocks):
        raise NoTextFound(f"No text could be extracted from this {detection.format} document.")
    return document
