"""Search: the request and response, the index and embedder a search runs against, retrieval
by vector, keyword or both, their fusion and the rerank stage."""

from docingest.pipeline.search.candidates import Fusion
from docingest.pipeline.search.query import search, search_outcome
from docingest.pipeline.search.request import SearchMode, SearchRequest, SearchResponse
from docingest.pipeline.search.reranking import Reranking
from docingest.pipeline.search.target import SearchTarget, resolve_target

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
