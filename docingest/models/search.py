"""A search request with every option of the HTTP API, v1.2, and its results."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from docingest.models._base import Body, ErrorInfo, Model
from docingest.models.documents import OcrInfo

SearchMode = Literal["hybrid", "vector", "keyword"]


class RerankOptions(Model):
    """v1.2: a search's own rerank settings (over the index's default)."""

    model: str | None = None
    candidates: int | None = None


class Expand(Model):
    """v1.2: return the neighbouring chunks (`neighbors`) or the heading section (`section`)."""

    neighbors: int | None = None
    section: bool | None = None


class SearchRequest(Body):
    """The body of `POST /v1/indexes/{index}/search`."""

    query: str
    top_k: int | None = None
    mode: SearchMode | None = None
    filter: dict[str, Any] | None = None
    """v1: equality and any-of; v1.2: operators (`gte`, `in`, `ne`, `all`, `exists`, ...) and
    `$or`/`$and`/`$not` groups."""
    max_chunks_per_document: int | None = None
    score_threshold: float | None = None
    rerank: bool | RerankOptions | None = None
    expand: Expand | None = None
    excerpt: bool | None = None
    explain: bool | None = None


class Scores(Model):
    """Each stage's own score where it found the chunk (higher is better)."""

    vector: float | None = None
    keyword: float | None = None
    rerank: float | None = None
    """v1.2: with rerank on, also the result's `score`."""


class Excerpt(Model):
    """v1.2: the sentences of the chunk that best answer the query, offsets into `text`."""

    text: str
    start: int
    end: int


class Context(Model):
    """v1.2, with `expand`: neighbouring chunks merged, an exact slice of the document."""

    text: str
    start: int
    end: int
    chunk_indexes: list[int] = Field(default_factory=list)


class Explain(Model):
    """v1.2, with `explain`: where each stage ranked the chunk."""

    vector_rank: int | None = None
    keyword_rank: int | None = None
    rerank_rank: int | None = None
    matched_terms: list[str] = Field(default_factory=list)


class SearchResult(Model):
    document_id: str
    chunk_index: int
    text: str
    score: float
    scores: Scores = Field(default_factory=Scores)
    filename: str | None = None
    format: str | None = None
    page_start: int | None = None
    page_end: int | None = None
    headings: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    ocr: OcrInfo | None = None
    start: int | None = None
    end: int | None = None
    table_header: str | None = None
    excerpt: Excerpt | None = None
    highlights: list[tuple[int, int]] = Field(default_factory=list)
    context: Context | None = None
    explain: Explain | None = None

    @property
    def best_text(self) -> str:
        """The excerpt where the server gives one, else the chunk's text."""
        return self.excerpt.text if self.excerpt is not None else self.text


class SearchResponse(Model):
    results: list[SearchResult]
    took_ms: float
    reranked: bool = False
    rerank_error: ErrorInfo | None = None
