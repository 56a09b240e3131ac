"""PPTX: each slide a page, its title a heading, then its text, tables and speaker notes.

python-pptx opens the deck once the shared pre-scan (`zip_container`) has checked the package
and re-packed it uncompressed (python-pptx inflates members in one call, like python-docx).

Per slide, in this order: the title as a level-1 heading ("Slide N" when it has none, or
when the title is all the slide holds: then the title is its text); the
text frames in reading order (top to bottom, then left to right, a group's shapes together
at the group's place; shapes whose position is inherited from the layout come last); the
tables, a row per line with cells joined by " | "; the speaker notes, one paragraph opening
with "Notes:". Every block carries the slide number as its page.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from lxml.etree import XMLSyntaxError
from pptx import Presentation
from pptx.exc import PackageNotFoundError
from pptx.util import Emu

from docingest.pipeline.document import (
    Block,
    BlockKind,
    DocumentFormat,
    ExtractedDocument,
    PageReporter,
)
from docingest.pipeline.errors import CorruptDocument, DocumentTooLarge
from docingest.pipeline.extract.zip_container import ZipLimits, repack_office

_PRESENTATION = "ppt/presentation.xml"
# What PowerPoint (and python-pptx) put in an untitled deck's core properties.
_DEFAULT_TITLES = frozenset(("PowerPoint Presentation", "Title Slide"))
_LAST = Emu(2**62)  # where a shape without a position of its own sorts


def extract_pptx(
    data: bytes, *, limits: ZipLimits, max_slides: int, on_page: PageReporter | None = None
) -> ExtractedDocument:
    """Extract the slides of the PPTX in `data` as pages, with the core properties;
    `on_page(done, total)` follows the slides."""
    package = repack_office(data, label="PPTX", limits=limits, main_part=_PRESENTATION)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            presentation = Presentation(io.BytesIO(package.repacked))
            return _extract(presentation, package.has_core_properties, max_slides, on_page)
    except (PackageNotFoundError, KeyError, ValueError, AttributeError, XMLSyntaxError) as exc:
        raise CorruptDocument(f"The PPTX is damaged and cannot be read ({exc}).") from exc


def _extract(
    presentation: Any, has_core: bool, max_slides: int, on_page: PageReporter | None
) -> ExtractedDocument:
    slides = list(presentation.slides)
    if len(slides) > max_slides:
        raise DocumentTooLarge(
            f"The PPTX has {len(slides):,} slides, above the limit of {max_slides:,}."
        )
    blocks: list[Block] = []
    for number, slide in enumerate(slides, 1):
        blocks += _slide(slide, number)
        if on_page is not None:
            on_page(number, len(slides))
    document = ExtractedDocument(format=DocumentFormat.PPTX, blocks=blocks, pages=len(slides))
    if has_core:  # without the part python-pptx invents one ("PowerPoint Presentation")
        _core_properties(document, presentation.core_properties)
    return document


def _slide(slide: Any, number: int) -> list[Block]:
    """The slide's blocks; a slide holding only its title is headed "Slide N" and the title
    is its body (a section of nothing but a heading yields no chunk to find it by)."""
    title_shape = slide.shapes.title
    title = _one_line(title_shape.text_frame.text) if title_shape is not None else ""
    body = list(_body(slide, title_shape, number))
    if not body:
        if not title:  # a blank slide
            return []
        return [Block(f"Slide {number}", BlockKind.HEADING, 1, number), Block(title, page=number)]
    return [Block(title or f"Slide {number}", BlockKind.HEADING, level=1, page=number), *body]


def _body(slide: Any, title_shape: Any, number: int) -> Iterator[Block]:
    tables: list[Any] = []
    for shape in _in_reading_order(slide.shapes):
        if title_shape is not None and shape.shape_id == title_shape.shape_id:
            continue
        if getattr(shape, "has_table", False):
            tables.append(shape.table)
        elif shape.has_text_frame and (text := _frame_text(shape.text_frame)):
            yield Block(text, page=number)
    for table in tables:
        if text := _table_text(table):
            yield Block(text, BlockKind.TABLE, page=number)
    if slide.has_notes_slide and (frame := slide.notes_slide.notes_text_frame) is not None:
        if notes := _frame_text(frame):
            yield Block(f"Notes: {notes}", page=number)


def _in_reading_order(shapes: Iterable[Any]) -> Iterator[Any]:
    """Shapes top to bottom, then left to right; a group's members in place of the group."""

    def position(shape: Any) -> tuple[int, int]:
        top, left = shape.top, shape.left
        return (_LAST if top is None else top, _LAST if left is None else left)

    for shape in sorted(shapes, key=position):
        if hasattr(shape, "shapes"):  # a group shape
            yield from _in_reading_order(shape.shapes)
        else:
            yield shape


def _frame_text(frame: Any) -> str:
    """A text frame's paragraphs, one per line, indented two spaces per outline level."""
    lines = []
    for paragraph in frame.paragraphs:
        if text := _one_line(paragraph.text):
            lines.append("  " * min(paragraph.level, 8) + text)
    return "\n".join(lines)


def _table_text(table: Any) -> str:
    rows = []
    for row in table.rows:
        cells = [_one_line(cell.text) for cell in row.cells if not cell.is_spanned]
        while cells and not cells[-1]:  # empty cells at the end of a row carry nothing
            cells.pop()
        if cells:
            rows.append(" | ".join(cells))
    return "\n".join(rows)


def _core_properties(document: ExtractedDocument, properties: Any) -> None:
    title = _one_line(properties.title or "")
    document.title = None if title in _DEFAULT_TITLES else title or None
    document.author = _one_line(properties.author or "") or None
    document.created = _utc(properties.created)
    document.modified = _utc(properties.modified)


def _one_line(text: str) -> str:
    # Vertical tabs are PowerPoint's line breaks inside a paragraph.
    return " ".join(text.replace("\v", " ").split())


def _utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
