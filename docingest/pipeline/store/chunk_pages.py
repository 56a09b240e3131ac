"""A document's chunks, a page at a time: the live version's chunks in order, with their
offsets, pages, headings and a continued table's header row
(`GET .../documents/{document_id}/chunks`).

The cursor (`docingest.pipeline.cursors`, bound to the index and the document) names the
version it pages through and the next chunk index, so a page never mixes versions: when the
document is replaced between two pages, the next page is refused with `CursorExpired` (start
again) rather than continued in another version's chunks.
"""

from __future__ import annotations

import re

from pydantic import BaseModel

from docingest.pipeline import cursors
from docingest.pipeline.errors import CursorExpired, InvalidCursor
from docingest.pipeline.store.access import ADMIN, Reader
from docingest.pipeline.store.chunk_reads import read_document_chunks
from docingest.pipeline.store.vector_store import VectorStore

MAX_PAGE = 500
"""Chunks a page holds at most (about 500 KB of text at the default chunk size)."""
DEFAULT_PAGE = 100

LISTING = "chunks"
"""The listing kind its cursors are bound to, with the index and the document
(`docingest.pipeline.cursors`)."""
_POSITION = re.compile(r"v(\d{1,18})\.(\d{1,18})")


class DocumentChunk(BaseModel):
    """One chunk: `text` is the document's extracted text from `start` to `end`."""

    chunk_index: int
    text: str
    start: int | None
    end: int | None
    page_start: int | None
    page_end: int | None
    headings: list[str]
    table_header: str | None = None
    """The header row of the table this chunk continues (not part of `text`), as in search
    results; None for most chunks."""


class ChunkPage(BaseModel):
    document_id: str
    version: int
    chunks: list[DocumentChunk]
    next_cursor: str | None
    """Pass as `cursor` for the next page; None after the last chunk."""


def encode_cursor(index: str, document_id: str, version: int, next_index: int) -> str:
    """The cursor of the page of `document_id`'s chunks from `next_index` in `version`."""
    return cursors.encode_cursor(
        f"v{version}.{next_index}", kind=LISTING, index=index, scope=document_id
    )


def decode_cursor(index: str, document_id: str, cursor: str) -> tuple[int, int]:
    """Return (version, next chunk index) of a cursor of this document's chunks;
    `InvalidCursor` for any other string."""
    position = cursors.decode_cursor(cursor, kind=LISTING, index=index, scope=document_id)
    if (match := _POSITION.fullmatch(position)) is None:
        raise InvalidCursor("The cursor is not one this server returned.")
    return int(match.group(1)), int(match.group(2))


def document_chunks(
    store: VectorStore,
    index: str,
    document_id: str,
    *,
    limit: int = DEFAULT_PAGE,
    cursor: str | None = None,
    reader: Reader = ADMIN,
) -> ChunkPage:
    """Return a page of the live version's chunks; `DocumentNotFound` for no such document,
    or one `reader` may not see."""
    if not 1 <= limit <= MAX_PAGE:
        raise ValueError(f"limit must be 1-{MAX_PAGE}")
    visible = store.readable(index, reader)
    document = store.get_document(index, document_id, within=visible)
    first = 0
    if cursor is not None:
        version, first = decode_cursor(index, document_id, cursor)
        if version != document.version:
            raise CursorExpired(
                f"Document '{document_id}' was replaced (version {version} is now "
                f"{document.version}) since this cursor was made; page again from the start."
            )
    chunks = read_document_chunks(
        store, index, document_id, document.version, first=first, limit=limit, within=visible
    )
    last = first + limit
    following = None
    if last < document.chunks:
        following = encode_cursor(index, document_id, document.version, last)
    return ChunkPage(
        document_id=document_id,
        version=document.version,
        chunks=[
            DocumentChunk(
                chunk_index=chunk.chunk_index,
                text=chunk.text,
                start=chunk.start,
                end=chunk.end,
                page_start=chunk.page_start,
                page_end=chunk.page_end,
                headings=chunk.headings,
                table_header=chunk.table_header or None,
            )
            for chunk in chunks
        ],
        next_cursor=following,
    )
