"""Search: the request and response, retrieval by vector, keyword or both, and RRF fusion."""

from pipeline.search.query import search
from pipeline.search.request import SearchMode, SearchRequest, SearchResponse

__all__ = ["SearchMode", "SearchRequest", "SearchResponse", "search"]
