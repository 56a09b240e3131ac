"""Search one index by meaning (vector), by exact terms (keyword), or both fused (hybrid).

Hybrid fetches both candidate lists in one Qdrant round trip; `docingest.pipeline.search.candidates`
fuses them (as `fusion` says) and chooses which make the response, after the rerank stage
(`docingest.pipeline.search.reranking`) when it is on.
"""

from __future__ import annotations

import time

from docingest.pipeline.embedders.base import QueryCache
from docingest.pipeline.rerank import RerankSpec
from docingest.pipeline.search.candidates import (
    DEFAULT_FUSION,
    Candidate,
    Fusion,
    candidate_limit,
    fuse,
    select,
)
from docingest.pipeline.search.context import contexts
from docingest.pipeline.search.excerpts import answer, query_terms
from docingest.pipeline.search.request import (
    Excerpt,
    Explain,
    RerankError,
    Result,
    Scores,
    SearchRequest,
    SearchResponse,
)
from docingest.pipeline.search.reranking import (
    Reranking,
    RerankOutcome,
    plan_rerank,
    rerank_candidates,
)
from docingest.pipeline.search.target import SearchTarget
from docingest.pipeline.sparse import analyze, encode_query
from docingest.pipeline.store import ADMIN, Reader, SearchFilter, VectorStore
from docingest.pipeline.store.access import restrict


def search(
    store: VectorStore,
    target: SearchTarget,
    request: SearchRequest,
    *,
    query_cache: QueryCache | None = None,
    reranking: Reranking | None = None,
    fusion: Fusion = DEFAULT_FUSION,
    reader: Reader = ADMIN,
) -> SearchResponse:
    """Run `request` against `target` (see `resolve_target`), embedding the query with the
    target's embedder (through `query_cache` when given); `reranking` enables the rerank
    stage (without it, a request's `rerank` is ignored); `fusion` is hybrid's; `reader`
    whose access the store query keeps to."""
    return search_outcome(
        store,
        target,
        request,
        query_cache=query_cache,
        reranking=reranking,
        fusion=fusion,
        reader=reader,
    )[0]


def search_outcome(
    store: VectorStore,
    target: SearchTarget,
    request: SearchRequest,
    *,
    query_cache: QueryCache | None = None,
    reranking: Reranking | None = None,
    fusion: Fusion = DEFAULT_FUSION,
    reader: Reader = ADMIN,
) -> tuple[SearchResponse, RerankOutcome]:
    """`search`, and what its rerank stage did (for the index's usage).

    What `reader` may not see is left out by the store query itself, in every mode, so the
    candidates (and thus the re-ranker's input, `top_k` and the contexts) hold visible
    chunks only (`docingest.pipeline.store.access`)."""
    started = time.perf_counter()
    index, embedder = target.index, target.embedder
    visible = reader.visibility(target.access)
    search_filter = restrict(
        SearchFilter.parse(request.filter, schema=target.metadata_schema), visible
    )
    limit = candidate_limit(request.top_k)
    plan = plan_rerank(request, target.rerank, reranking)
    if isinstance(plan, RerankSpec):
        limit = max(limit, plan.candidates, request.top_k)
    if request.mode == "keyword":
        terms = encode_query(request.query)
        hits = store.query_sparse(index, terms, limit=limit, filter=search_filter)
        candidates = [
            Candidate(hit, hit.score, keyword=hit.score, keyword_rank=rank)
            for rank, hit in enumerate(hits, 1)
        ]
    else:
        if query_cache is not None:
            vector = query_cache.get_or_embed(embedder, request.query)
        else:
            vector = embedder.embed_query(request.query)
        if request.mode == "vector":
            hits = store.query_dense(index, vector, limit=limit, filter=search_filter)
            candidates = [
                Candidate(hit, hit.score, vector=hit.score, vector_rank=rank)
                for rank, hit in enumerate(hits, 1)
            ]
        else:
            dense, keyword = store.query_both(
                index,
                vector=vector,
                terms=encode_query(request.query),
                limit=limit,
                filter=search_filter,
            )
            candidates = fuse(dense, keyword, fusion, depth=candidate_limit(request.top_k))
    candidates, outcome = rerank_candidates(candidates, request, plan, reranking)
    chosen = select(candidates, request, reranked=outcome.reranked)
    explain_terms = _unique(analyze(request.query)) if request.explain else None
    results = [_result(candidate, explain_terms) for candidate in chosen]
    if request.excerpt:
        _add_excerpts(results, request.query)
    if request.expand is not None and chosen:
        hits = [candidate.chunk for candidate in chosen]
        focus = [(r.excerpt.start + r.excerpt.end) // 2 if r.excerpt else 0 for r in results]
        found = contexts(
            store, index, hits, request.expand, focus=focus, within=restrict(None, visible)
        )
        for result, context in zip(results, found, strict=True):
            result.context = context
    took_ms = (time.perf_counter() - started) * 1000
    error = outcome.error
    response = SearchResponse(
        results=results,
        took_ms=round(took_ms, 3),
        reranked=outcome.reranked,
        rerank_error=None if error is None else RerankError(code=error.code, message=error.message),
    )
    return response, outcome


def _unique(terms: list[str]) -> list[str]:
    return list(dict.fromkeys(terms))


def _explain(candidate: Candidate, query_terms: list[str]) -> Explain:
    chunk = candidate.chunk
    held = set(analyze("\n".join([*chunk.headings, chunk.text])))
    return Explain(
        vector_rank=candidate.vector_rank,
        keyword_rank=candidate.keyword_rank,
        rerank_rank=candidate.rerank_rank,
        matched_terms=[term for term in query_terms if term in held],
    )


def _result(candidate: Candidate, query_terms: list[str] | None) -> Result:
    chunk = candidate.chunk
    return Result(
        document_id=chunk.document_id,
        chunk_index=chunk.chunk_index,
        text=chunk.text,
        score=candidate.score,
        scores=Scores(vector=candidate.vector, keyword=candidate.keyword, rerank=candidate.rerank),
        filename=chunk.filename,
        format=chunk.format,
        page_start=chunk.page_start,
        page_end=chunk.page_end,
        headings=chunk.headings,
        metadata=chunk.metadata,
        ocr=chunk.ocr,
        start=chunk.start,
        end=chunk.end,
        table_header=chunk.table_header or None,
        explain=None if query_terms is None else _explain(candidate, query_terms),
    )


def _add_excerpts(results: list[Result], query: str) -> None:
    """Give each result its excerpt and highlights (`docingest.pipeline.search.excerpts`)."""
    terms = query_terms(query)
    for result in results:
        found = answer(result.text, terms)
        start, end = found.excerpt
        result.excerpt = Excerpt(text=result.text[start:end], start=start, end=end)
        result.highlights = found.highlights
