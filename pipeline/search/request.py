"""A search as the API receives it, and the response it gets: the contract's shapes."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from pipeline.rerank.config import RerankOverride

SearchMode = Literal["hybrid", "vector", "keyword"]


class SearchRequest(BaseModel):
    """A search as the API receives it."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=10_000)
    top_k: int = Field(default=5, ge=1, le=100)
    mode: SearchMode = "hybrid"
    filter: dict[str, Any] | None = None
    """Per field (`document_id`, `ingested_at` or a user metadata key): a value (equality), a
    list (any-of) or an operator object, and `$and`/`$or`/`$not` groups
    (`pipeline.store.filters`)."""
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
    explain: Explain | None = None
    """With `explain: true`."""


class SearchResponse(BaseModel):
    results: list[Result]
    took_ms: float
    reranked: bool = False
    """Whether the results are in the re-ranker's order."""
    rerank_error: RerankError | None = None
    """Why not, when rerank was on and failed (the results are then in first-stage order)."""
