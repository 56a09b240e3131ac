"""Search: the request and response, the index and embedder a search runs against, retrieval
by vector, keyword or both, their fusion and the rerank stage."""

from pipeline.search.candidates import Fusion
from pipeline.search.query import search, search_outcome
from pipeline.search.request import SearchMode, SearchRequest, SearchResponse
from pipeline.search.reranking import Reranking
from pipeline.search.target import SearchTarget, resolve_target

__all__ = [
    "Fusion",
    "Reranking",
    "SearchMode",
    "SearchRequest",
    "SearchResponse",
    "SearchTarget",
    "resolve_target",
    "search",
    "search_outcome",
]
