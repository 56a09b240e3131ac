"""The types the vector store takes and returns (no qdrant-client types leak out of the store)."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from docingest.pipeline.chunking import ChunkingSpec
from docingest.pipeline.embedders.base import EmbeddingConfig
from docingest.pipeline.errors import InvalidIndexName
from docingest.pipeline.rerank.config import RerankConfig
from docingest.pipeline.sparse import SparseTerms
from docingest.pipeline.store.access import AccessMode, access_from_payload, access_payload
from docingest.pipeline.store.schema import FieldType

DOCINGEST_NAMESPACE = uuid.UUID("7d4f3c1e-5b0a-5d2e-9c8f-2a6b1e0d4c3f")
"""Namespace of point ids; changing it would orphan every stored point."""

_INDEX_NAME = re.compile(r"[a-z0-9_-]{1,64}")


def validate_index_name(name: str) -> str:
    """Return `name` if it is a valid index name (1-64 of a-z, 0-9, '_', '-'), else raise."""
    if not isinstance(name, str) or not _INDEX_NAME.fullmatch(name):
        raise InvalidIndexName(
            f"Index name {name!r} is invalid: use 1-64 lowercase letters, digits, '_' or '-'."
        )
    return name


def point_id(index: str, document_id: str, version: int, chunk_index: int) -> str:
    """Return the deterministic id of one chunk's point, so re-running a job overwrites it."""
    key = f"{index}\x1f{document_id}\x1f{version}\x1f{chunk_index}"
    return str(uuid.uuid5(DOCINGEST_NAMESPACE, key))


def _now_rfc3339() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


class IndexConfig(BaseModel):
    """What an index is built with; stored in its collection so every process agrees."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    embedding: EmbeddingConfig
    """With `dimensions` resolved to the real vector size."""
    chunking: ChunkingSpec = Field(default_factory=ChunkingSpec)
    description: str | None = None
    created_at: str = Field(default_factory=_now_rfc3339)
    metadata_schema: dict[str, FieldType] | None = Field(
        default=None, exclude_if=lambda schema: schema is None
    )
    """Declared user metadata fields (`docingest.pipeline.store.schema`); fields may be added later.
    Stored only when declared, as `contextual_headers` is, for the previous release."""
    rerank: RerankConfig | None = Field(default=None, exclude_if=lambda rerank: rerank is None)
    """The default second stage of its searches; may change at any time. Stored only when
    set, for the previous release."""
    access: AccessMode = Field(default="open", exclude_if=lambda mode: mode == "open")
    """Who sees a document without an access list: every caller ("open") or admins only
    ("restricted"); may change at any time. Stored only when restricted, for the previous
    release."""
    contextual_headers: bool = Field(default=False, exclude_if=lambda on: not on)
    """Embed each chunk with its document's title and heading path in front (the stored
    text stays the chunk alone). False for indexes made before the setting existed; stored
    only when on, so a previous release (whose config forbids unknown keys) still reads
    every index it can serve, e.g. during a rolling upgrade."""

    def conflicts_with(self, other: IndexConfig) -> bool:
        """Whether `other` asks for different vectors or chunks (description/time aside)."""
        return (
            self.embedding != other.embedding
            or self.chunking != other.chunking
            or self.contextual_headers != other.contextual_headers
        )

    def conflict_message(self, name: str, wanted: IndexConfig) -> str:
        """Say how `wanted` differs from this, the stored config of index `name`."""
        if self.embedding != wanted.embedding:
            have, want = self.embedding, wanted.embedding
            return (
                f"Index '{name}' is embedded with {have.provider}/{have.model} "
                f"({have.dimensions} dimensions), not {want.provider}/{want.model} "
                f"({want.dimensions}); vectors of two models cannot share an index. Delete the "
                "index or use another name."
            )
        if self.contextual_headers != wanted.contextual_headers:
            return (
                f"Index '{name}' embeds chunks with contextual_headers "
                f"{str(self.contextual_headers).lower()}; its vectors cannot change. Delete the "
                "index or use another name."
            )
        have_c, want_c = self.chunking, wanted.chunking
        return (
            f"Index '{name}' chunks by {have_c.chunk_size}/{have_c.chunk_overlap} "
            f"{have_c.unit.value}, not {want_c.chunk_size}/{want_c.chunk_overlap} "
            f"{want_c.unit.value}; delete the index or use another name."
        )


class IndexInfo(BaseModel):
    """An index as the API shows it."""

    model_config = ConfigDict(frozen=True)

    name: str
    embedding: EmbeddingConfig
    chunking: ChunkingSpec
    description: str | None
    contextual_headers: bool = False
    documents: int
    chunks: int
    created_at: str
    metadata_schema: dict[str, FieldType] | None = None
    rerank: RerankConfig | None = None
    access: AccessMode = "open"


class StoredDocument(BaseModel):
    """A document as stored: the fields of the chunk_index 0 point of its live version."""

    model_config = ConfigDict(frozen=True)

    document_id: str
    version: int
    filename: str | None
    format: str | None
    content_sha256: str | None
    pages: int | None
    words: int | None
    chunks: int
    metadata: dict[str, Any]
    ingested_at: str | None
    title: str | None = None
    author: str | None = None
    ocr: dict[str, Any] | None = None
    """Pages read by OCR and their mean confidence (0-1), `{"pages", "confidence"}`."""
    access: list[str] | None = None
    """The principals that may see it (`docingest.pipeline.store.access`); None: no list."""


@dataclass(frozen=True, slots=True)
class DocumentFields:
    """Document-level fields repeated on every chunk's point.

    A document streamed from its parser is written before its end is extracted: its points
    are staged with the file's fields, and `content_payload()` is set on all of them when the
    version is published."""

    filename: str | None
    format: str | None
    content_sha256: str | None
    pages: int | None
    words: int | None
    chunk_count: int | None
    title: str | None = None
    author: str | None = None
    language: str | None = None
    ingested_at: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    ocr: dict[str, Any] | None = None
    access: list[str] | None = None
    """Its access list; None: none (the index's `access` rule decides)."""

    def content_payload(self) -> dict[str, Any]:
        """The fields known only once the whole document is extracted, as payload."""
        return {
            "pages": self.pages,
            "words": self.words,
            "chunk_count": self.chunk_count,
            "title": self.title,
            "author": self.author,
            "language": self.language,
            "document_ocr": self.ocr,
        }


@dataclass(frozen=True, slots=True)
class ChunkRecord:
    """One chunk to store: its text, offsets, vectors and its document's fields."""

    document_id: str
    version: int
    chunk_index: int
    text: str
    text_hash: str
    start: int
    end: int
    page_start: int | None
    page_end: int | None
    headings: list[str]
    dense: np.ndarray
    sparse: SparseTerms
    document: DocumentFields
    ocr: dict[str, Any] | None = None
    """This chunk's pages read by OCR and their mean confidence; None when none was."""
    gap: str = ""
    """The text between the previous chunk's end and this one's start (`Chunk.gap`)."""
    table_header: str = ""
    """The header row of the table this chunk continues (`Chunk.table_header`), "" if none."""

    def payload(self, *, state: str) -> dict[str, Any]:
        """Return the flat point payload (filters address `metadata.<key>`)."""
        document = self.document
        return {
            "document_id": self.document_id,
            "version": self.version,
            "state": state,
            "chunk_index": self.chunk_index,
            "text": self.text,
            "text_hash": self.text_hash,
            "start": self.start,
            "end": self.end,
            "gap": self.gap,
            "page_start": self.page_start,
            "page_end": self.page_end,
            "headings": list(self.headings),
            "filename": document.filename,
            "format": document.format,
            "content_sha256": document.content_sha256,
            "pages": document.pages,
            "words": document.words,
            "chunk_count": document.chunk_count,
            "title": document.title,
            "author": document.author,
            "language": document.language,
            "ingested_at": document.ingested_at,
            "metadata": dict(document.metadata),
            "ocr": self.ocr,
            "document_ocr": document.ocr,
            "access": access_payload(document.access),
            # Only where a chunk continues a table: most chunks carry no key for it.
            **({"table_header": self.table_header} if self.table_header else {}),
        }


DOCUMENT_PAYLOAD_KEYS = (
    "document_id", "version", "filename", "format", "content_sha256", "pages", "words",
    "chunk_count", "metadata", "ingested_at", "title", "author", "document_ocr", "access",
)  # fmt: skip
"""Payload keys read to build a `StoredDocument`."""


def stored_document(payload: dict[str, Any]) -> StoredDocument:
    """Build a `StoredDocument` from a chunk_index 0 point's payload."""
    return StoredDocument(
        document_id=payload["document_id"],
        version=payload["version"],
        filename=payload.get("filename"),
        format=payload.get("format"),
        content_sha256=payload.get("content_sha256"),
        pages=payload.get("pages"),
        words=payload.get("words"),
        chunks=payload.get("chunk_count") or 0,
        metadata=payload.get("metadata") or {},
        ingested_at=payload.get("ingested_at"),
        title=payload.get("title"),
        author=payload.get("author"),
        ocr=payload.get("document_ocr"),
        access=access_from_payload(payload.get("access")),
    )


RESULT_PAYLOAD_KEYS = (
    "document_id", "version", "chunk_index", "text", "filename", "format", "page_start",
    "page_end", "headings", "metadata", "ocr", "title", "start", "end", "table_header",
)  # fmt: skip
"""Payload keys read for a search hit."""


@dataclass(frozen=True, slots=True)
class ScoredChunk:
    """One retrieved chunk; `score` is higher-is-better (cosine similarity or keyword score)."""

    id: str
    score: float
    document_id: str
    version: int
    chunk_index: int
    text: str
    filename: str | None
    format: str | None
    page_start: int | None
    page_end: int | None
    headings: list[str]
    metadata: dict[str, Any]
    ocr: dict[str, Any] | None = None
    title: str | None = None
    start: int | None = None
    end: int | None = None
    table_header: str = ""

    @classmethod
    def from_payload(cls, point_id: str, score: float, payload: dict[str, Any]) -> ScoredChunk:
        return cls(
            id=point_id,
            score=score,
            document_id=payload["document_id"],
            version=payload["version"],
            chunk_index=payload["chunk_index"],
            text=payload.get("text", ""),
            filename=payload.get("filename"),
            format=payload.get("format"),
            page_start=payload.get("page_start"),
            page_end=payload.get("page_end"),
            headings=list(payload.get("headings") or []),
            metadata=payload.get("metadata") or {},
            ocr=payload.get("ocr"),
            title=payload.get("title"),
            start=payload.get("start"),
            end=payload.get("end"),
            table_header=payload.get("table_header") or "",
        )


CHUNK_PAYLOAD_KEYS = (
    "document_id", "version", "chunk_index", "text", "start", "end", "gap", "page_start",
    "page_end", "headings", "table_header",
)  # fmt: skip
"""Payload keys read for a document's chunks and a hit's neighbours."""


@dataclass(frozen=True, slots=True)
class StoredChunk:
    """A chunk as stored, with its offsets in its document's extracted text; `gap` is the
    text between the previous chunk's end and its start (None: written before gaps were)."""

    document_id: str
    version: int
    chunk_index: int
    text: str
    start: int | None
    end: int | None
    gap: str | None
    page_start: int | None
    page_end: int | None
    headings: list[str]
    table_header: str = ""
    """The header row of the table this chunk continues, "" if none (`Chunk.table_header`)."""

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> StoredChunk:
        return cls(
            document_id=payload["document_id"],
            version=payload["version"],
            chunk_index=payload["chunk_index"],
            text=payload.get("text", ""),
            start=payload.get("start"),
            end=payload.get("end"),
            gap=payload.get("gap"),
            page_start=payload.get("page_start"),
            page_end=payload.get("page_end"),
            headings=list(payload.get("headings") or []),
            table_header=payload.get("table_header") or "",
        )
