"""Extraction: one module per format, all returning an `ExtractedDocument`."""

from __future__ import annotations

import mmap
from dataclasses import dataclass
from typing import Any

from docingest.pipeline.detect import detect
from docingest.pipeline.document import (
    BlockStream,
    Detection,
    DocumentFormat,
    ExtractedDocument,
    PageReporter,
    collect_blocks,
)
from docingest.pipeline.errors import DocumentTooLarge, NoTextFound
from docingest.pipeline.extract.csv import extract_csv
from docingest.pipeline.extract.docx import extract_docx
from docingest.pipeline.extract.eml import AttachmentReader, extract_eml
from docingest.pipeline.extract.epub import extract_epub
from docingest.pipeline.extract.html import extract_html
from docingest.pipeline.extract.image import extract_image
from docingest.pipeline.extract.legacy import extract_doc, extract_ppt, extract_rtf
from docingest.pipeline.extract.markdown import extract_markdown
from docingest.pipeline.extract.mbox import iter_mbox
from docingest.pipeline.extract.msg import extract_msg
from docingest.pipeline.extract.ocr import OcrOptions, OcrPageHook, OcrRecord
from docingest.pipeline.extract.odp import extract_odp
from docingest.pipeline.extract.ods import extract_ods
from docingest.pipeline.extract.odt import extract_odt
from docingest.pipeline.extract.pdf import extract_pdf, iter_pdf
from docingest.pipeline.extract.pptx import extract_pptx
from docingest.pipeline.extract.text import extract_text
from docingest.pipeline.extract.xls import extract_xls
from docingest.pipeline.extract.xlsx import extract_xlsx
from docingest.pipeline.extract.zip_container import ZipLimits
from docingest.pipeline.settings import Settings

_PAGED = frozenset(
    (
        DocumentFormat.PDF,
        DocumentFormat.IMAGE,
        DocumentFormat.PPTX,
        DocumentFormat.PPT,
        DocumentFormat.ODP,
        DocumentFormat.MBOX,
    )
)
"""Formats whose extractors report their own pages (slides, messages) to `on_page`."""


def zip_limits(settings: Settings) -> ZipLimits:
    """The zip-bomb guards every ZIP-based format is opened under."""
    return ZipLimits(
        max_uncompressed_bytes=settings.max_docx_uncompressed_bytes,
        max_compression_ratio=settings.max_docx_compression_ratio,
    )


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
    follows the pages of a PDF or an image and a PPTX's slides; other formats are one page,
    reported when extracted. `on_ocr_page()` is called before each page is OCR'd.
    """
    blocks = extract_stream(
        data, detection, settings=settings, on_page=on_page, on_ocr_page=on_ocr_page
    )
    return collect_blocks(blocks)


def extract_stream(
    data: bytes | mmap.mmap,
    detection: Detection,
    *,
    settings: Settings,
    on_page: PageReporter | None = None,
    on_ocr_page: OcrPageHook | None = None,
    ocr_record: OcrRecord | None = None,
) -> BlockStream:
    """`extract`, yielding the blocks as they are read: a PDF's page by page, an mbox's message
    by message, the other
    formats' all at once; then returning the document (its `blocks` empty). The limits are
    checked as the blocks come: `DocumentTooLarge` as soon as the text passes
    `max_extracted_chars`, `NoTextFound` at the end. The pages OCR'd are recorded in
    `ocr_record` as they are, if given. A memory map is read only for an mbox archive."""
    if detection.format is DocumentFormat.MBOX:
        stream = _mbox(data, settings, 0, on_ocr_page, on_page)
    elif isinstance(data, mmap.mmap):
        raise TypeError("only an mbox archive is read from a memory map")
    elif detection.format is DocumentFormat.PDF:
        stream = iter_pdf(
            data,
            max_pages=settings.max_pages,
            ocr=OcrOptions.from_settings(settings),
            on_page=on_page,
            on_ocr_page=on_ocr_page,
            ocr_record=ocr_record,
        )
    else:
        document = _extract_format(
            data,
            detection,
            settings=settings,
            on_page=on_page,
            on_ocr_page=on_ocr_page,
            ocr_record=ocr_record,
        )
        if on_page is not None and detection.format not in _PAGED:
            on_page(1, 1)
        stream = _all_at_once(document)
    characters, has_text = 0, False
    while True:
        try:
            blocks = next(stream)
        except StopIteration as end:
            document = end.value
            break
        characters += sum(len(block.text) for block in blocks)
        if characters > settings.max_extracted_chars:
            raise DocumentTooLarge(
                f"The document yields more than {settings.max_extracted_chars:,} characters "
                "of text, the limit."
            )
        has_text = has_text or any(block.text.strip() for block in blocks)
        yield blocks
    if not has_text:
        raise NoTextFound(f"No text could be extracted from this {detection.format} document.")
    return document


def _all_at_once(document: ExtractedDocument) -> BlockStream:
    """A whole document's blocks as one batch."""
    yield document.blocks
    document.blocks = []
    return document


def _extract_format(
    data: bytes,
    detection: Detection,
    *,
    settings: Settings,
    on_page: PageReporter | None,
    on_ocr_page: OcrPageHook | None = None,
    ocr_record: OcrRecord | None = None,
    depth: int = 0,
) -> ExtractedDocument:
    """Run the extractor of `detection.format`; `depth` counts e-mails this one is inside."""
    match detection.format:
        case DocumentFormat.PDF:
            return extract_pdf(
                data,
                max_pages=settings.max_pages,
                ocr=OcrOptions.from_settings(settings),
                on_page=on_page,
                on_ocr_page=on_ocr_page,
            )
        case DocumentFormat.IMAGE:
            return extract_image(
                data,
                max_pages=settings.max_pages,
                ocr=OcrOptions.from_settings(settings),
                on_page=on_page,
                on_ocr_page=on_ocr_page,
                ocr_record=ocr_record,
            )
        case DocumentFormat.DOCX:
            limits = zip_limits(settings)
            return extract_docx(
                data,
                max_uncompressed_bytes=limits.max_uncompressed_bytes,
                max_compression_ratio=limits.max_compression_ratio,
            )
        case DocumentFormat.HTML:
            return extract_html(data, encoding=detection.encoding)
        case DocumentFormat.MARKDOWN:
            return extract_markdown(data, encoding=detection.encoding)
        case DocumentFormat.TXT:
            return extract_text(data, encoding=detection.encoding)
        case DocumentFormat.CSV:
            return extract_csv(
                data, encoding=detection.encoding, max_chars=settings.max_extracted_chars
            )
        case DocumentFormat.XLSX:
            return extract_xlsx(
                data, limits=zip_limits(settings), max_chars=settings.max_extracted_chars
            )
        case DocumentFormat.PPTX:
            return extract_pptx(
                data, limits=zip_limits(settings), max_slides=settings.max_pages, on_page=on_page
            )
        case DocumentFormat.EPUB:
            return extract_epub(data, limits=zip_limits(settings))
        case DocumentFormat.ODT:
            return extract_odt(data, limits=zip_limits(settings))
        case DocumentFormat.EML:
            reader = _attachment_reader(settings, depth, on_ocr_page)
            return extract_eml(data, encoding=detection.encoding, attachments=reader)
        case DocumentFormat.MBOX:
            return collect_blocks(_mbox(data, settings, depth, on_ocr_page, None))
        case DocumentFormat.MSG:
            reader = _attachment_reader(settings, depth, on_ocr_page)
            return extract_msg(
                data,
                attachments=reader,
                rtf=lambda rtf: extract_rtf(rtf, limits=zip_limits(settings), **_office(settings)),
            )
        case DocumentFormat.DOC:
            return extract_doc(data, limits=zip_limits(settings), **_office(settings))
        case DocumentFormat.RTF:
            return extract_rtf(data, limits=zip_limits(settings), **_office(settings))
        case DocumentFormat.PPT:
            return extract_ppt(
                data,
                limits=zip_limits(settings),
                max_slides=settings.max_pages,
                on_page=on_page,
                **_office(settings),
            )
        case DocumentFormat.XLS:
            return extract_xls(data, max_chars=settings.max_extracted_chars)
        case DocumentFormat.ODS:
            return extract_ods(
                data, limits=zip_limits(settings), max_chars=settings.max_extracted_chars
            )
        case DocumentFormat.ODP:
            return extract_odp(
                data, limits=zip_limits(settings), max_slides=settings.max_pages, on_page=on_page
            )
    raise NotImplementedError(detection.format)


def _office(settings: Settings) -> dict[str, Any]:
    """LibreOffice's budget where no limit of the process sets it (isolation off)."""
    return {
        "cpu_seconds": float(settings.extraction_cpu_seconds),
        "memory_bytes": settings.extraction_memory_bytes,
    }


def _mbox(
    data: bytes | mmap.mmap,
    settings: Settings,
    depth: int,
    on_ocr_page: OcrPageHook | None,
    on_page: PageReporter | None,
) -> BlockStream:
    return iter_mbox(
        data,
        max_messages=settings.mbox_message_limit,
        attachments=_attachment_reader(settings, depth, on_ocr_page),
        on_page=on_page,
    )


@dataclass(frozen=True, slots=True)
class _AttachmentReader:
    """Detect and extract an e-mail's attachments (at `depth`) as uploads of their own."""

    settings: Settings
    depth: int
    on_ocr_page: OcrPageHook | None

    def read(self, blob: bytes, filename: str) -> ExtractedDocument:
        detection = detect(blob, filename=filename)
        return _extract_format(
            blob,
            detection,
            settings=self.settings,
            on_page=None,
            on_ocr_page=self.on_ocr_page,
            depth=self.depth,
        )

    def deeper(self) -> AttachmentReader | None:
        return _attachment_reader(self.settings, self.depth, self.on_ocr_page)


def _attachment_reader(
    settings: Settings, depth: int, on_ocr_page: OcrPageHook | None
) -> AttachmentReader | None:
    """The reader of attachments of a message at `depth` (0: the upload); None past
    `settings.max_attachment_depth` (the attachments are then listed by name)."""
    if depth >= settings.max_attachment_depth:
        return None
    return _AttachmentReader(settings, depth + 1, on_ocr_page)
