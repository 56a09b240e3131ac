"""Documents and their chunks: listings (paged in v1.2), metadata updates, deletes by filter."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from docingest.models._base import Body, Model


class OcrInfo(Model):
    """v1.1: the pages read by OCR and their mean confidence (0-1)."""

    pages: list[int] = Field(default_factory=list)
    confidence: float | None = None


class Document(Model):
    """`GET /v1/indexes/{index}/documents/{document_id}`."""

    document_id: str
    version: int | None = None
    filename: str | None = None
    format: str | None = None
    content_sha256: str | None = None
    """Hex sha256 of the uploaded bytes: `sync` compares it with the local file's."""
    pages: int | None = None
    words: int | None = None
    chunks: int = 0
    metadata: dict[str, Any] = Field(default_factory=dict)
    ingested_at: str | None = None
    title: str | None = None
    author: str | None = None
    ocr: OcrInfo | None = None
    access: list[str] | None = None
    """v1.3: the principals that may see it; None: no list (the index's rule decides)."""


class DocumentPage(Model):
    """`GET .../documents`: one page; `next_cursor` is None on the last (and from a v1.1
    server, which answers every document in one page)."""

    documents: list[Document]
    next_cursor: str | None = None


class MetadataUpdate(Body):
    """The body of `PATCH .../documents/{document_id}`: v1.2 `metadata`, v1.3 `access`; only
    the fields set are sent (`access` None removes the list)."""

    metadata: dict[str, Any] | None = None
    access: list[str] | None = None

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_unset=True)


class DeleteResult(Model):
    """v1.2: the answer to `DELETE .../documents?filter=`: a count, or a job when large.

    A server that deletes a bounded number per request says `more` while others still match:
    send the request again until it is false."""

    deleted: int | None = None
    more: bool = False
    job_id: str | None = None
    status_url: str | None = None


class Chunk(Model):
    """v1.2: one chunk of a document's live version, in order."""

    document_id: str | None = None
    chunk_index: int
    text: str
    start: int | None = None
    end: int | None = None
    page_start: int | None = None
    page_end: int | None = None
    headings: list[str] = Field(default_factory=list)
    table_header: str | None = None
    """The header row of the table this chunk continues, not part of `text`."""
    version: int | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class ChunkPage(Model):
    document_id: str | None = None
    version: int | None = None
    """The live version the page was read from; a cursor of a replaced one is refused."""
    chunks: list[Chunk]
    next_cursor: str | None = None
