"""A search as the API receives it, and the response it gets: the contract's shapes."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, model_validator

from docingest.pipeline.rerank.config import RerankOverride

SearchMode = Literal["hybrid", "vector", "keyword"]

MAX_NEIGHBORS = 10
"""Chunks `expand.neighbors` may add on each side of a hit (a bound on the work and the
response: 21 default chunks are ~20,000 characters)."""
MAX_SECTION_CHUNKS = 21
"""Chunks of a heading section `expand.section` returns at most: the hit's and up to 10 on
each side of it, the section's nearest (`chunk_indexes` says which; the document's chunks
endpoint has the rest)."""


class Expand(BaseModel):
    """The context to add to each result: its neighbouring chunks, or its heading section."""

    model_config = ConfigDict(extra="forbid")

    neighbors: int | None = Field(default=None, ge=0, le=MAX_NEIGHBORS)
    section: bool = False

    @model_validator(mode="after")
    def _one_kind(self) -> Expand:
        if (self.neighbors is None) == (not self.section):
            raise ValueError('give one of {"neighbors": n} or {"section": true}')
        return self

    @property
    def radius(self) -> int:
        """Chunks to read on each side of a hit."""
        return MAX_SECTION_CHUNKS // 2 if self.section else self.neighbors or 0


class SearchRequest(BaseModel):
    """A search as the API receives it."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=10_000)
    top_k: int = Field(default=5, ge=1, le=100)
    mode: SearchMode = "hybrid"
    filter: dict[str, Any] | None = None
    """Per field (`document_id`, `ingested_at` or a user metadata key): a value (equality), a
    list (any-of) or an operator object, and `$and`/`$or`/`$not` groups
    (`docingest.pipeline.store.filters`)."""
    max_chunks_per_document: int | None = Field(default=None, ge=1)
    score_threshold: float | None = Field(default=None, allow_inf_nan=False)
    """Least vector similarity in vector and hybrid mode (hybrid then drops chunks found by
    keyword only, which have none); least keyword score in keyword mode; least rerank score
    when the results were re-ranked."""
    rerank: StrictBool | RerankOverride | None = None
    """None: the index's default (its `rerank`, if any); False: off; True or an object: on,
    with the object's model, candidates or fusion over the index's and the server's."""
    explain: bool = False
    """Give each result its ranks per retriever and its matched query terms."""
    excerpt: bool = True
    """Give each result its `excerpt` and `highlights` (off saves their few microseconds)."""
    expand: Expand | None = None
    """Give each result its `context`: neighbouring chunks or its heading section."""


class Scores(BaseModel):
    """Each retriever's own score, where it found the chunk (higher is better)."""

    vector: float | None
    """Cosine similarity to the query."""
    keyword: float | None
    """IDF-weighted term match (BM25)."""
    rerank: float | None = None
    """The re-ranker's score, when the results were re-ranked."""


class Explain(BaseModel):
    """Why a chunk ranked where it did (ranks from 1; None where it was not found)."""

    vector_rank: int | None
    keyword_rank: int | None
    rerank_rank: int | None
    matched_terms: list[str]
    """The query's terms (after the keyword analyzer: stems, identifiers, CJK bigrams) that
    the chunk or its headings hold, in query order."""


class RerankError(BaseModel):
    """Why the results were not re-ranked though rerank was on."""

    code: str
    message: str


class Excerpt(BaseModel):
    """The sentences of a result's `text` that best answer the query, `text[start:end]`."""

    text: str
    start: int
    end: int


class Context(BaseModel):
    """A hit's neighbouring chunks (or heading section) of its version, merged without their
    overlaps: the document's extracted text from `start` to `end`."""

    text: str
    start: int
    end: int
    chunk_indexes: list[int]


class Result(BaseModel):
    document_id: str
    chunk_index: int
    text: str
    score: float
    """Higher is better: cosine similarity, keyword score or fused RRF score by mode; the
    rerank score when re-ranked (the fused rank score with `fusion: rrf`)."""
    scores: Scores
    filename: str | None
    format: str | None
    page_start: int | None
    page_end: int | None
    headings: list[str]
    metadata: dict[str, Any]
    ocr: dict[str, Any] | None = None
    """The chunk's pages read by OCR, `{"pages", "confidence"}` (mean, 0-1); None if none."""
    start: int | None = None
    """Where the chunk starts in the document's extracted text (characters)."""
    end: int | None = None
    """Where it ends: `text` is the extracted text's `[start, end)`."""
    table_header: str | None = None
    """The header row of the table this chunk continues (not part of `text`, which
    stays an exact slice); None when the chunk continues no table."""
    excerpt: Excerpt | None = None
    """The one to three sentences of `text` that best answer the query (with `excerpt`)."""
    highlights: list[tuple[int, int]] = Field(default_factory=list)
    """Spans `[start, end)` of `text` holding the query's terms after analysis."""
    context: Context | None = None
    """With `expand`: the neighbouring chunks or the section, merged."""
    explain: Explain | None = None
    """With `explain: true`."""


class SearchResponse(BaseModel):
    results: list[Result]
    took_ms: float
    reranked: bool = False
    """Whether the results are in the re-ranker's order."""
    rerank_error: RerankError | None = None
    """Why not, when rerank was on and failed (the results are then in first-stage order)."""
