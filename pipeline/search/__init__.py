"""Search: the request and response, retrieval by vector, keyword or both, and RRF fusion."""

from pipeline.search.query import SearchMode, SearchRequest, SearchResponse, search

__all__ = ["SearchMode", "SearchRequest", "SearchResponse", "search"]
