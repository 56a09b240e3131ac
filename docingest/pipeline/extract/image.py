"""Images (PNG, JPEG, TIFF with its pages, WebP): decoded by Pillow, read by Tesseract.

Only the four formats are opened (`formats=`), so no other Pillow plugin ever parses an
upload. Sizes are checked from the header before any pixel is decoded: Pillow's own
decompression-bomb guard is set to `max_image_pixels`, and each TIFF page is checked
before it is loaded. A TIFF's pages are counted by walking its directory chain only up to
`max_pages` + 1, so a 10,000-page file is refused without reading the rest.
"""

from __future__ import annotations

import re
import struct
from io import BytesIO

from PIL import Image, ImageOps, UnidentifiedImageError

from docingest.pipeline.document import Block, DocumentFormat, ExtractedDocument, PageReporter
from docingest.pipeline.errors import CorruptDocument, DocumentTooLarge, NoTextFound
from docingest.pipeline.extract.ocr import (
    LazyRecogniser,
    OcrMode,
    OcrOptions,
    OcrPageHook,
    OcrRecord,
)
from docingest.pipeline.extract.page_lines import clean_lines, page_blocks

FORMATS = ("PNG", "JPEG", "TIFF", "WEBP")
"""The Pillow plugins an upload may reach."""

UPSCALE_BELOW_PIXELS = 1600
"""Images whose longer side is shorter are enlarged twice for OCR: Tesseract wants letters
about 20 pixels high, and the corpus's 72 DPI page images, enlarged, gave far more words, read
with more confidence (BENCHMARKS.md, "OCR (Tesseract 5 through tesserocr)")."""

_DECODE_ERRORS = (OSError, SyntaxError, ValueError, struct.error, EOFError, IndexError)
_SANE_DPI = range(70, 1201)


def extract_image(
    data: bytes,
    *,
    max_pages: int,
    ocr: OcrOptions,
    on_page: PageReporter | None = None,
    on_ocr_page: OcrPageHook | None = None,
    ocr_record: OcrRecord | None = None,
) -> ExtractedDocument:
    """OCR every page of the image `data` (one, or a TIFF's pages) into blocks; the pages
    read are recorded in `ocr_record` if given.

    Raises `NoTextFound` when OCR is off or unavailable or finds nothing, `CorruptDocument`
    for an image that does not decode, and `DocumentTooLarge` above `max_pages` pages or
    `ocr.max_pixels` pixels in a page.
    """
    if ocr.mode is OcrMode.OFF:
        raise NoTextFound(
            "This is an image, and OCR is off (DOCINGEST_OCR=off); its text cannot be read."
        )
    image = _open(data, max_pixels=ocr.max_pixels)
    pages = _count_pages(image, max_pages=max_pages)
    recogniser = LazyRecogniser(ocr, on_page=on_ocr_page, record=ocr_record)
    blocks: list[Block] = []
    try:
        for index in range(pages):
            frame, dpi = _decode_page(image, index, max_pixels=ocr.max_pixels)
            if max(frame.size) < UPSCALE_BELOW_PIXELS:
                frame = frame.resize((frame.width * 2, frame.height * 2), Image.Resampling.LANCZOS)
                dpi *= 2
            recognised = recogniser.read(frame, page=index + 1, dpi=dpi)
            if recognised is None:
                assert recogniser.unavailable is not None
                raise recogniser.unavailable
            if recognised.tables:  # rows from the word boxes (`ocr_tables`)
                lines, tables = recognised.blocks_lines()
                blocks.extend(page_blocks(lines, page=index + 1, headings=[], tables=tables))
            else:
                lines = clean_lines(recognised.text, page_label="", page_number=index + 1)
                blocks.extend(page_blocks(lines, page=index + 1, headings=[]))
            if on_page is not None:
                on_page(index + 1, pages)
    finally:
        recogniser.close()
    if not blocks:
        raise NoTextFound(f"OCR found no text in this {image.format} image.")
    document = ExtractedDocument(format=DocumentFormat.IMAGE, blocks=blocks, pages=pages)
    document.extra["image_format"] = str(image.format).lower()
    document.extra["ocr"] = recogniser.record.as_extra()
    return document


def _open(data: bytes, *, max_pixels: int) -> Image.Image:
    # Pillow warns between the limit and twice it, and raises above: both are refusals here.
    Image.MAX_IMAGE_PIXELS = max_pixels
    try:
        image = Image.open(BytesIO(data), formats=FORMATS)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        # Pillow's own text names its limit, twice ours above it: say only what was declared.
        declared = _DECLARED_PIXELS.search(str(exc))
        detail = f"it declares {int(declared[1]):,} pixels" if declared else "too many pixels"
        raise _too_many_pixels(detail, max_pixels) from exc
    except UnidentifiedImageError as exc:
        raise CorruptDocument("The image is damaged: its header cannot be read.") from exc
    except _DECODE_ERRORS as exc:
        raise CorruptDocument(f"The image is damaged ({_detail(exc)}).") from exc
    return image


def _count_pages(image: Image.Image, *, max_pages: int) -> int:
    """Pages of a TIFF (other formats: 1), walking no further than `max_pages` + 1."""
    if image.format != "TIFF":
        return 1
    count = 1
    try:
        while True:
            image.seek(count)
            count += 1
            if count > max_pages:
                raise DocumentTooLarge(
                    f"The TIFF has more than {max_pages:,} pages, the limit; split it into "
                    "smaller files."
                )
    except EOFError:
        pass
    except _DECODE_ERRORS as exc:
        raise CorruptDocument(f"The TIFF's page list is damaged ({_detail(exc)}).") from exc
    return count


def _decode_page(image: Image.Image, index: int, *, max_pixels: int) -> tuple[Image.Image, int]:
    """Decode page `index` into greyscale, upright, on white; return it and its DPI."""
    try:
        image.seek(index)
        width, height = image.size
        if width * height > max_pixels:
            size = f"page {index + 1} is {width:,} × {height:,} = {width * height:,} pixels"
            raise _too_many_pixels(size, max_pixels)
        image.load()
        frame = ImageOps.exif_transpose(image) or image
        if frame.mode in ("RGBA", "LA", "PA") or "transparency" in frame.info:
            background = Image.new("RGBA", frame.size, "white")
            frame = Image.alpha_composite(background, frame.convert("RGBA"))
        grey = frame.convert("L")
    except DocumentTooLarge:
        raise
    except _DECODE_ERRORS as exc:
        raise CorruptDocument(f"The image is damaged ({_detail(exc)}).") from exc
    dpi = image.info.get("dpi")
    declared = int(round(float(dpi[0]))) if isinstance(dpi, tuple) and dpi else 0
    return grey, declared if declared in _SANE_DPI else 0


_DECLARED_PIXELS = re.compile(r"\((\d+) pixels\)")
"""The pixel count in Pillow's bomb message ("Image size (N pixels) exceeds limit of ...")."""


def _too_many_pixels(detail: str, max_pixels: int) -> DocumentTooLarge:
    return DocumentTooLarge(
        f"The image is too large to read ({detail}); the limit is {max_pixels:,} pixels "
        "per page (DOCINGEST_MAX_IMAGE_PIXELS). It may be a decompression bomb; otherwise "
        "scale it down."
    )


def _detail(exc: BaseException) -> str:
    return str(exc).strip().rstrip(".")[:200] or type(exc).__name__
