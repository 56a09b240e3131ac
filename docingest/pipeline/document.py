"""The structure every extractor returns: typed blocks plus document-level metadata."""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any


class DocumentFormat(StrEnum):
    PDF = "pdf"
    DOCX = "docx"
    HTML = "html"
    MARKDOWN = "markdown"
    TXT = "txt"
    PPTX = "pptx"
    XLSX = "xlsx"
    CSV = "csv"
    EPUB = "epub"
    ODT = "odt"
    EML = "eml"
    IMAGE = "image"
    DOC = "doc"
    XLS = "xls"
    PPT = "ppt"
    RTF = "rtf"
    MSG = "msg"
    ODS = "ods"
    ODP = "odp"
    MBOX = "mbox"


class BlockKind(StrEnum):
    HEADING = "heading"
    PARAGRAPH = "paragraph"
    TABLE = "table"
    LIST = "list"
    CODE = "code"


@dataclass(frozen=True, slots=True)
class Block:
    """One structural unit of a document, in reading order.

    `level` is the heading level (1 = top) for headings and 0 otherwise. `page` is the
    1-based page the block starts on, where the format has pages (PDF; a PPTX's slides),
    else None.
    Tables are rendered as one row per line with cells separated by `" | "`.
    """

    text: str
    kind: BlockKind = BlockKind.PARAGRAPH
    level: int = 0
    page: int | None = None


@dataclass(frozen=True, slots=True)
class Detection:
    """What `detect()` found: the format and, for text formats, the character encoding."""

    format: DocumentFormat
    encoding: str | None = None


@dataclass(slots=True)
class ExtractedDocument:
    """Blocks in reading order and what the file says about itself.

    `extra` holds format-specific facts worth keeping as metadata (HTML description,
    Markdown front matter, detected encoding, ...), JSON-serialisable.
    """

    format: DocumentFormat
    blocks: list[Block]
    pages: int | None = None
    title: str | None = None
    author: str | None = None
    created: datetime | None = None
    modified: datetime | None = None
    extra: dict[str, Any] = field(default_factory=dict)


BlockStream = Generator[list[Block], None, ExtractedDocument]
"""Blocks as an extractor reads them (a page at a time), then the document they belong to,
its `blocks` left empty (the caller has them)."""


def collect_blocks(stream: BlockStream) -> ExtractedDocument:
    """Read `stream` to its end: the document, with all its blocks."""
    blocks: list[Block] = []
    while True:
        try:
            blocks.extend(next(stream))
        except StopIteration as end:
            document: ExtractedDocument = end.value
            document.blocks = blocks
            return document


PageReporter = Callable[[int, int], None]
"""Called with (pages done, pages total) as extraction advances."""

BLOCK_SEPARATOR = "\n\n"
"""What stands between two blocks in a document's full text (and so in chunk offsets)."""


def join_blocks(blocks: list[Block]) -> tuple[str, list[int]]:
    """Return the document's full text and the start offset of each block in it."""
    starts: list[int] = []
    position = 0
    for block in blocks:
        starts.append(position)
        position += len(block.text) + len(BLOCK_SEPARATOR)
    return BLOCK_SEPARATOR.join(block.text for block in blocks), starts
