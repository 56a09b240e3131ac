"""Indexes: their settings (`PUT`) and what the service shows of them."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from docingest.models._base import Body, Model

FieldType = Literal["keyword", "keyword[]", "integer", "float", "boolean", "datetime", "text"]


class Embedding(Model):
    provider: str = "local"
    """A registered provider: `local`, `openai`, or one the server adds."""
    model: str | None = None
    dimensions: int | None = None


class Chunking(Model):
    chunk_size: int | None = None
    chunk_overlap: int | None = None
    unit: Literal["chars", "tokens"] | None = None


class Rerank(Model):
    """v1.2: an index's default second stage."""

    provider: str | None = None
    """`cohere`, `tei`, `llm` or another registered name (None: the server's default)."""
    model: str | None = None
    candidates: int | None = None


class IndexUsage(Model):
    """An index's cumulative usage (a docingest extension of IndexInfo)."""

    jobs: int = 0
    embedding_requests: int = 0
    input_tokens: int = 0
    vectors_reused: int = 0
    rerank_requests: int = 0
    fallback_requests: int = 0
    estimated_cost: float | None = None


class IndexSettings(Body):
    """The body of `PUT /v1/indexes/{index}`; each part left out takes the server's default."""

    embedding: Embedding | None = None
    chunking: Chunking | None = None
    description: str | None = None
    rerank: Rerank | None = None
    """v1.2: the index's default rerank (none by default)."""
    metadata_schema: dict[str, FieldType] | None = None
    """v1.2: declared metadata fields, indexed for filtering and checked on upload."""
    contextual_headers: bool | None = None
    """v1.2: embed each chunk with its title and heading path in front."""
    access: Literal["open", "restricted"] | None = None
    """v1.3: who sees a document without an access list: all callers, or admins only."""


class IndexInfo(Model):
    """An index's settings and counts: the answer to `PUT /v1/indexes/{index}`."""

    name: str
    embedding: Embedding
    chunking: Chunking
    description: str | None = None
    documents: int = 0
    chunks: int = 0
    created_at: str | None = None
    rerank: Rerank | None = None
    metadata_schema: dict[str, FieldType] | None = None
    contextual_headers: bool | None = None
    access: Literal["open", "restricted"] | None = None
    """v1.3: the index's rule for documents without an access list."""


class IndexDetail(IndexInfo):
    """`GET /v1/indexes/{index}`: the index with its cumulative usage."""

    usage: IndexUsage = Field(default_factory=IndexUsage)


class IndexList(Model):
    indexes: list[IndexDetail] = Field(default_factory=list)
