"""The store's search-candidate queries (dense, keyword, both, Qdrant-side RRF), apart from
`docingest.pipeline.store.vector_store` so each module stays small; `VectorStore` inherits them."""

from __future__ import annotations

import numpy as np
from qdrant_client import models

from docingest.pipeline.sparse import SparseTerms
from docingest.pipeline.store.engine import Engine
from docingest.pipeline.store.filters import SearchFilter
from docingest.pipeline.store.models import RESULT_PAYLOAD_KEYS, ScoredChunk, validate_index_name
from docingest.pipeline.store.requests import candidate_request, fused_query, scored_chunk


class CandidateQueries:
    """Queries for live chunks; the class using it provides `engine`."""

    engine: Engine

    # --- search candidates --------------------------------------------------------------

    def query_dense(
        self, index: str, vector: np.ndarray, *, limit: int, filter: SearchFilter | None = None
    ) -> list[ScoredChunk]:
        """Return live chunks by cosine similarity to `vector` (higher is better)."""
        return self._query(index, [candidate_request(vector, limit=limit, search_filter=filter)])[0]

    def query_sparse(
        self, index: str, terms: SparseTerms, *, limit: int, filter: SearchFilter | None = None
    ) -> list[ScoredChunk]:
        """Return live chunks by keyword score (IDF-weighted dot product; higher is better)."""
        if not terms.indices:
            return []
        return self._query(index, [candidate_request(terms, limit=limit, search_filter=filter)])[0]

    def query_both(
        self,
        index: str,
        *,
        vector: np.ndarray,
        terms: SparseTerms,
        limit: int,
        filter: SearchFilter | None = None,
    ) -> tuple[list[ScoredChunk], list[ScoredChunk]]:
        """Return the dense and the keyword candidates, fetched in one round trip."""
        requests = [candidate_request(vector, limit=limit, search_filter=filter)]
        if terms.indices:
            requests.append(candidate_request(terms, limit=limit, search_filter=filter))
        lists = self._query(index, requests)
        return lists[0], lists[1] if len(lists) > 1 else []

    def query_fused(
        self,
        index: str,
        *,
        vector: np.ndarray,
        terms: SparseTerms,
        limit: int,
        filter: SearchFilter | None = None,
        rrf_k: int | None = None,
    ) -> list[ScoredChunk]:
        """Return Qdrant's own RRF over the dense and keyword candidates (`limit` each).

        Its scores are fused ranks only; search fuses on the client to keep each retriever's
        score, and tests compare the two. `rrf_k` None is Qdrant's default constant.
        """
        prefetch, query = fused_query(vector, terms, limit=limit, search_filter=filter, rrf_k=rrf_k)
        points = self.engine.query_fused(
            validate_index_name(index),
            prefetch=prefetch,
            query=query,
            limit=2 * limit,
            with_payload=RESULT_PAYLOAD_KEYS,
        )
        return [scored_chunk(point) for point in points]

    def _query(self, index: str, requests: list[models.QueryRequest]) -> list[list[ScoredChunk]]:
        responses = self.engine.query_batch(validate_index_name(index), requests)
        return [[scored_chunk(point) for point in points] for points in responses]
