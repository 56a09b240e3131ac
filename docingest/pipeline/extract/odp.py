"""ODP (OpenDocument presentation): as PPTX, each slide a page, its title a heading, then its
text, tables and speaker notes; title, author and dates from `meta.xml`.

The package is opened by the shared pre-scan (`zip_container`); `content.xml` is parsed with
lxml (entities off, network off), shapes walked with an explicit stack. Per slide
(`draw:page`), in the order the PPTX extractor uses: the title frame
(`presentation:class="title"`) as a level-1 heading ("Slide N" when it has none, or when
the title is all the slide holds); the text frames top to bottom, then left to right (a
group's shapes at the group's place); the tables, a row per line with cells joined by
" | "; the speaker notes (`presentation:notes`) as one paragraph opening with "Notes:".
Every block carries the slide number as its page.
"""

from __future__ import annotations

import re
from typing import Any

from lxml import etree

from docingest.pipeline.document import (
    Block,
    BlockKind,
    DocumentFormat,
    ExtractedDocument,
    PageReporter,
)
from docingest.pipeline.errors import CorruptDocument, DocumentTooLarge
from docingest.pipeline.extract.odt import (
    DRAW,
    OFFICE,
    TABLE,
    TEXT,
    inline_text,
    list_text,
    one_line,
    read_metadata,
    table_text,
)
from docingest.pipeline.extract.odt import xml_parser as _parser
from docingest.pipeline.extract.zip_container import SafeZip, ZipLimits

_PRESENTATION_NS = "{urn:oasis:names:tc:opendocument:xmlns:presentation:1.0}"
_SVG = "{urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0}"
_LENGTH = re.compile(r"(-?\d+(?:\.\d+)?)(cm|mm|in|pt|pc|px)?")
_PER_CM = {"cm": 1.0, "mm": 0.1, "in": 2.54, "pt": 2.54 / 72, "pc": 2.54 / 6, "px": 2.54 / 96}
_LAST = float("inf")
_BULLET = re.compile(r"^( *)- ", re.M)


def extract_odp(
    data: bytes, *, limits: ZipLimits, max_slides: int, on_page: PageReporter | None = None
) -> ExtractedDocument:
    """Extract the slides of the ODP in `data` as pages; `on_page(done, total)` follows them."""
    with SafeZip(data, label="ODP", limits=limits) as package:
        if not package.has("content.xml"):
            raise CorruptDocument("The ODP has no content.xml, so it holds no slide.")
        content, meta = package.read_xml("content.xml"), package.read_xml("meta.xml")
    try:
        root = etree.fromstring(content, _parser())
        meta_root = etree.fromstring(meta, _parser()) if meta else None
    except etree.XMLSyntaxError as exc:
        raise CorruptDocument(f"The ODP's XML is malformed ({exc}).") from exc
    body = root.find(f"{OFFICE}body/{OFFICE}presentation")
    if body is None:
        raise CorruptDocument("The ODP's content.xml has no presentation body.")
    slides = body.findall(DRAW + "page")
    if len(slides) > max_slides:
        raise DocumentTooLarge(
            f"The ODP has {len(slides):,} slides, above the limit of {max_slides:,}."
        )
    blocks: list[Block] = []
    for number, slide in enumerate(slides, 1):
        blocks += _slide(slide, number)
        if on_page is not None:
            on_page(number, len(slides))
    document = ExtractedDocument(format=DocumentFormat.ODP, blocks=blocks, pages=len(slides))
    if meta_root is not None:
        read_metadata(document, meta_root)
    return document


def _slide(slide: Any, number: int) -> list[Block]:
    title, texts, tables = "", [], []
    for frame in _in_reading_order(slide):
        if frame.get(_PRESENTATION_NS + "class") == "title" and not title:
            title = one_line(" ".join(_frame_lines(frame)))
            continue
        for table in frame.iter(TABLE + "table"):
            if text := table_text(table):
                tables.append(Block(text, BlockKind.TABLE, page=number))
        if text := "\n".join(_frame_lines(frame)):
            texts.append(Block(text, page=number))
    body = [*texts, *tables]
    notes = slide.find(_PRESENTATION_NS + "notes")
    if notes is not None:
        lines = [
            line
            for frame in notes.iter(DRAW + "frame")
            if frame.get(_PRESENTATION_NS + "class") == "notes"
            for line in _frame_lines(frame)
        ]
        if lines:
            body.append(Block("Notes: " + "\n".join(lines), page=number))
    if not body:
        if not title:
            return []
        return [Block(f"Slide {number}", BlockKind.HEADING, 1, number), Block(title, page=number)]
    return [Block(title or f"Slide {number}", BlockKind.HEADING, level=1, page=number), *body]


def _in_reading_order(container: Any) -> list[Any]:
    """The slide's frames and custom shapes, top to bottom then left to right; a group's
    members in place of the group; without recursion."""
    out: list[Any] = []
    stack = [iter(_shapes(container))]
    while stack:
        shape = next(stack[-1], None)
        if shape is None:
            stack.pop()
        elif shape.tag == DRAW + "g":
            stack.append(iter(_shapes(shape)))
        else:
            out.append(shape)
    return out


def _shapes(node: Any) -> list[Any]:
    kinds = (DRAW + "frame", DRAW + "custom-shape", DRAW + "g")
    return sorted((child for child in node if child.tag in kinds), key=_position)


def _position(shape: Any) -> tuple[float, float]:
    return (_length(shape.get(_SVG + "y")), _length(shape.get(_SVG + "x")))


def _length(value: str | None) -> float:
    match = _LENGTH.fullmatch(value or "")
    if match is None:
        return _LAST
    return float(match.group(1)) * _PER_CM.get(match.group(2) or "cm", 1.0)


def _frame_lines(frame: Any) -> list[str]:
    """The text of a frame's text box (or custom shape), one line per paragraph; lists
    indented as in ODT; tables left to the caller."""
    lines: list[str] = []
    boxes = [frame] if frame.tag == DRAW + "custom-shape" else frame.findall(DRAW + "text-box")
    for box in boxes:
        for child in box:
            if child.tag in (TEXT + "p", TEXT + "h"):
                if line := one_line(inline_text(child)[0]):
                    lines.append(line)
            elif child.tag == TEXT + "list" and (text := list_text(child)):
                lines.append(_BULLET.sub(r"\1", text))  # indented, unmarked: as PPTX
    return lines
