"""`/v1/indexes/{index}/search`: vector, keyword or hybrid search of one index."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from docingest.api.deps import AuthorizedIndex, ReaderDep, ServicesDep
from docingest.api.query_filter import FILTER_HELP, filter_param
from docingest.pipeline.search import SearchMode, SearchRequest, SearchResponse

router = APIRouter(prefix="/v1/indexes/{index}/search", tags=["search"])


@router.post("", response_model=SearchResponse)
def search_post(
    index: AuthorizedIndex, body: SearchRequest, services: ServicesDep, reader: ReaderDep
) -> SearchResponse:
    """Rank the index's chunks for `query`; scores are similarities, higher is better."""
    return services.search(index, body, reader=reader)


@router.get("", response_model=SearchResponse)
def search_get(
    index: AuthorizedIndex,
    services: ServicesDep,
    reader: ReaderDep,
    q: str = Query(min_length=1, max_length=10_000),
    top_k: int = Query(default=5, ge=1, le=100),
    mode: SearchMode = "hybrid",
    max_chunks_per_document: int | None = Query(default=None, ge=1),
    rerank: bool | None = None,
    explain: bool = False,
    filter: Annotated[str | None, Query(description=FILTER_HELP)] = None,
) -> SearchResponse:
    """The same search, for quick use from a browser (`rerank`: true/false or the index's
    default when left out; `filter`: the POST body's filter as JSON text)."""
    request = SearchRequest(
        query=q,
        top_k=top_k,
        mode=mode,
        filter=filter_param(filter),
        max_chunks_per_document=max_chunks_per_document,
        rerank=rerank,
        explain=explain,
    )
    return services.search(index, request, reader=reader)
