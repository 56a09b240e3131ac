"""Search one index by meaning (vector), by exact terms (keyword), or both fused (hybrid).

Hybrid fetches both candidate lists in one Qdrant round trip and fuses them here with
Reciprocal Rank Fusion: a chunk scores sum(1 / (RRF_K + rank)) over the lists it is in, rank
counted from 0, which is Qdrant's own formula (tests check the ranking against Qdrant's
`RrfQuery`). Qdrant could fuse server-side, but its fused points carry only the fused score,
and the contract returns each retriever's own score per result (`scores.vector`,
`scores.keyword`) so callers can threshold on a meaningful number.

A response holds one version of each document: among the candidates, a document keeps only
the chunks of its highest version (two versions are live for a moment while one replaces the
other). Then come `score_threshold`, `max_chunks_per_document` and `top_k`, in that order.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from pipeline.embedders.base import Embedder, QueryCache, check_embedder_matches
from pipeline.errors import IndexNotFound
from pipeline.sparse import encode_query
from pipeline.store import IndexConfig, ScoredChunk, SearchFilter, VectorStore

RRF_K = 60
"""Rank constant of Reciprocal Rank Fusion: 60 as in Cormack et al. (2009), who count ranks
from 1 (with Qdrant's ranks from 0, the same constant weighs the first place a little more)."""

SearchMode = Literal["hybrid", "vector", "keyword"]


class SearchRequest(BaseModel):
    """A search as the API receives it."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=10_000)
    top_k: int = Field(default=5, ge=1, le=100)
    mode: SearchMode = "hybrid"
    filter: dict[str, Any] | None = None
    """Equality per key (any-of for a list); `document_id` or user metadata keys."""
    max_chunks_per_document: int | None = Field(default=None, ge=1)
    score_threshold: float | None = None
    """Least vector similarity in vector and hybrid mode (hybrid then drops chunks found by
    keyword only, which have none); least keyword score in keyword mode."""


class Scores(BaseModel):
    """Each retriever's own score, where it found the chunk (higher is better)."""

    vector: float | None
    """Cosine similarity to the query."""
    keyword: float | None
    """IDF-weighted term match (BM25)."""


class Result(BaseModel):
    document_id: str
    chunk_index: int
    text: str
    score: float
    """Higher is better: cosine similarity, keyword score or fused RRF score by mode."""
    scores: Scores
    filename: str | None
    format: str | None
    page_start: int | None
    page_end: int | None
    headings: list[str]
    metadata: dict[str, Any]
    ocr: dict[str, Any] | None = None
    """The chunk's pages read by OCR, `{"pages", "confidence"}` (mean, 0-1); None if none."""


class SearchResponse(BaseModel):
    results: list[Result]
    took_ms: float


@dataclass(slots=True)
class Candidate:
    chunk: ScoredChunk
    score: float
    vector: float | None = None
    keyword: float | None = None


def candidate_limit(top_k: int) -> int:
    """Candidates fetched per retriever, so version and per-document cuts still fill top_k."""
    return max(top_k * 4, 50)


def search(
    store: VectorStore,
    index: str,
    request: SearchRequest,
    *,
    embedder: Embedder,
    query_cache: QueryCache | None = None,
    config: IndexConfig | None = None,
) -> SearchResponse:
    """Run `request` against `index`; `embedder` must be the one the index's config builds.

    `config` is the index's, when the caller already read it (to pick the embedder).
    """
    started = time.perf_counter()
    search_filter = SearchFilter.parse(request.filter)
    config = config or store.index_config(index)
    if config is None:
        raise IndexNotFound(f"Index '{index}' does not exist.")
    check_embedder_matches(index, config.embedding, embedder)
    limit = candidate_limit(request.top_k)
    if request.mode == "keyword":
        terms = encode_query(request.query)
        hits = store.query_sparse(index, terms, limit=limit, filter=search_filter)
        candidates = [Candidate(hit, hit.score, keyword=hit.score) for hit in hits]
    else:
        if query_cache is not None:
            vector = query_cache.get_or_embed(embedder, request.query)
        else:
            vector = embedder.embed_query(request.query)
        if request.mode == "vector":
            hits = store.query_dense(index, vector, limit=limit, filter=search_filter)
            candidates = [Candidate(hit, hit.score, vector=hit.score) for hit in hits]
        else:
            dense, keyword = store.query_both(
                index,
                vector=vector,
                terms=encode_query(request.query),
                limit=limit,
                filter=search_filter,
            )
            candidates = fuse(dense, keyword)
    results = [_result(candidate) for candidate in select(candidates, request)]
    took_ms = (time.perf_counter() - started) * 1000
    return SearchResponse(results=results, took_ms=round(took_ms, 3))


def fuse(
    dense: list[ScoredChunk], keyword: list[ScoredChunk], *, k: int = RRF_K
) -> list[Candidate]:
    """Fuse two ranked lists by RRF, best first; ties keep first-seen order (dense first)."""
    fused: dict[str, Candidate] = {}
    for rank, hit in enumerate(dense):
        fused[hit.id] = Candidate(hit, 1.0 / (k + rank), vector=hit.score)
    for rank, hit in enumerate(keyword):
        if (candidate := fused.get(hit.id)) is None:
            fused[hit.id] = Candidate(hit, 1.0 / (k + rank), keyword=hit.score)
        else:
            candidate.score += 1.0 / (k + rank)
            candidate.keyword = hit.score
    return sorted(fused.values(), key=lambda candidate: candidate.score, reverse=True)


def select(candidates: list[Candidate], request: SearchRequest) -> list[Candidate]:
    """Apply version consistency, the threshold, the per-document cap and top_k, in order."""
    newest: dict[str, int] = {}
    for candidate in candidates:
        chunk = candidate.chunk
        newest[chunk.document_id] = max(chunk.version, newest.get(chunk.document_id, 0))
    kept = [c for c in candidates if c.chunk.version == newest[c.chunk.document_id]]
    if (threshold := request.score_threshold) is not None:
        kept = [c for c in kept if _passes(c, request.mode, threshold)]
    kept.sort(key=lambda candidate: candidate.score, reverse=True)
    if (cap := request.max_chunks_per_document) is not None:
        per_document: Counter[str] = Counter()
        capped = []
        for candidate in kept:
            per_document[candidate.chunk.document_id] += 1
            if per_document[candidate.chunk.document_id] <= cap:
                capped.append(candidate)
        kept = capped
    return kept[: request.top_k]


def _passes(candidate: Candidate, mode: SearchMode, threshold: float) -> bool:
    score = candidate.keyword if mode == "keyword" else candidate.vector
    return score is not None and score >= threshold


def _result(candidate: Candidate) -> Result:
    chunk = candidate.chunk
    return Result(
        document_id=chunk.document_id,
        chunk_index=chunk.chunk_index,
        text=chunk.text,
        score=candidate.score,
        scores=Scores(vector=candidate.vector, keyword=candidate.keyword),
        filename=chunk.filename,
        format=chunk.format,
        page_start=chunk.page_start,
        page_end=chunk.page_end,
        headings=chunk.headings,
        metadata=chunk.metadata,
        ocr=chunk.ocr,
    )
