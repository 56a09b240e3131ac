"""Search: the request and response, the index and embedder a search runs against, retrieval
by vector, keyword or both, and RRF fusion."""

from pipeline.search.query import search
from pipeline.search.request import SearchMode, SearchRequest, SearchResponse
from pipeline.search.target import SearchTarget, resolve_target

__all__ = [
    "SearchMode",
    "SearchRequest",
    "SearchResponse",
    "SearchTarget",
    "resolve_target",
    "search",
]
