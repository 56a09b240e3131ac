"""Search one index by meaning (vector), by exact terms (keyword), or both fused (hybrid).

Hybrid fetches both candidate lists in one Qdrant round trip; `pipeline.search.candidates`
fuses them and chooses which make the response.
"""

from __future__ import annotations

import time

from pipeline.embedders.base import QueryCache
from pipeline.search.candidates import Candidate, candidate_limit, fuse, select
from pipeline.search.request import Result, Scores, SearchRequest, SearchResponse
from pipeline.search.target import SearchTarget
from pipeline.sparse import encode_query
from pipeline.store import SearchFilter, VectorStore


def search(
    store: VectorStore,
    target: SearchTarget,
    request: SearchRequest,
    *,
    query_cache: QueryCache | None = None,
) -> SearchResponse:
    """Run `request` against `target` (see `resolve_target`), embedding the query with the
    target's embedder (through `query_cache` when given)."""
    started = time.perf_counter()
    index, embedder = target.index, target.embedder
    search_filter = SearchFilter.parse(request.filter, schema=target.metadata_schema)
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
