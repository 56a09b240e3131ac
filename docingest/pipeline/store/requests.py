"""The Qdrant requests, points and filters the store builds (qdrant-client's models, which the
server takes as they are and the Edge engine translates)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from qdrant_client import models

from docingest.pipeline.sparse import SparseTerms
from docingest.pipeline.store.access import ACCESS_FIELD
from docingest.pipeline.store.filter_qdrant import filter_conditions
from docingest.pipeline.store.filters import SearchFilter
from docingest.pipeline.store.models import (
    RESULT_PAYLOAD_KEYS,
    ChunkRecord,
    IndexConfig,
    ScoredChunk,
    point_id,
)
from docingest.pipeline.store.ordering import order_payload


def equals(path: str, value: str | int | bool) -> models.FieldCondition:
    return models.FieldCondition(key=path, match=models.MatchValue(value=value))


def to_qdrant(
    search_filter: SearchFilter | None, *, must: list[models.Condition] | None = None
) -> models.Filter:
    """Return the Qdrant filter of `search_filter` plus the store's own `must` conditions."""
    conditions = list(must or [])
    if search_filter is not None:
        conditions.extend(filter_conditions(search_filter))
    return models.Filter(must=conditions)


def metadata_index_schema(value: Any) -> models.PayloadSchemaType | None:
    """Return the payload index type suiting a user metadata value, or None for none."""
    if isinstance(value, bool):
        return models.PayloadSchemaType.BOOL
    if isinstance(value, int):
        return models.PayloadSchemaType.INTEGER
    if isinstance(value, float):
        return models.PayloadSchemaType.FLOAT
    if isinstance(value, str) or (
        isinstance(value, list) and value and all(isinstance(item, str) for item in value)
    ):
        return models.PayloadSchemaType.KEYWORD
    return None


DENSE = "dense"
KEYWORD = "keyword"
"""Names of the two vectors of every point."""
LIVE = equals("state", "live")


def fields_filter(**fields: str | int | None) -> models.Filter:
    """Return a filter of payload equalities, skipping fields given as None."""
    return models.Filter(
        must=[equals(key, value) for key, value in fields.items() if value is not None]
    )


def sparse_vector(terms: SparseTerms) -> models.SparseVector:
    return models.SparseVector(indices=list(terms.indices), values=list(terms.values))


def candidate_request(
    query: np.ndarray | SparseTerms, *, limit: int, search_filter: SearchFilter | None
) -> models.QueryRequest:
    """Return a request for live chunks nearest `query` (dense or keyword) among the filtered."""
    if isinstance(query, SparseTerms):
        vector: models.Query | models.SparseVector | list[float] = sparse_vector(query)
        using = KEYWORD
    else:
        vector, using = np.asarray(query, dtype=np.float32).tolist(), DENSE
    return models.QueryRequest(
        query=vector,
        using=using,
        limit=limit,
        filter=to_qdrant(search_filter, must=[LIVE]),
        with_payload=list(RESULT_PAYLOAD_KEYS),
    )


def fused_query(
    vector: np.ndarray,
    terms: SparseTerms,
    *,
    limit: int,
    search_filter: SearchFilter | None,
    rrf_k: int | None,
) -> tuple[list[models.Prefetch], models.FusionQuery | models.RrfQuery]:
    """Return Qdrant-side RRF over dense and keyword prefetches (`rrf_k` None: its default)."""
    selector = to_qdrant(search_filter, must=[LIVE])
    prefetch = [
        models.Prefetch(query=vector.tolist(), using=DENSE, limit=limit, filter=selector),
        models.Prefetch(query=sparse_vector(terms), using=KEYWORD, limit=limit, filter=selector),
    ]
    if rrf_k is None:
        return prefetch, models.FusionQuery(fusion=models.Fusion.RRF)
    return prefetch, models.RrfQuery(rrf=models.Rrf(k=rrf_k))


@dataclass(frozen=True, slots=True)
class Point:
    """A point to write, in no engine's types: each engine builds its own from it (building
    qdrant-client's validated model only to translate it for Edge was a large share of the
    write time; BENCHMARKS.md, "Embedded store", has what a point costs)."""

    id: str
    dense: np.ndarray
    sparse: SparseTerms
    payload: dict[str, Any]

    def to_qdrant(self) -> models.PointStruct:
        """Return the point as qdrant-client's model (no keyword vector without terms)."""
        vectors: dict[str, Any] = {DENSE: self.dense.astype(np.float32).tolist()}
        if self.sparse.indices:
            vectors[KEYWORD] = sparse_vector(self.sparse)
        return models.PointStruct(id=self.id, vector=vectors, payload=self.payload)


def point_of(index: str, record: ChunkRecord, *, live: Mapping[str, Any] | None = None) -> Point:
    """Return the staged point of one chunk, or its live one with the `live` fields set
    (what a publish sets); the document's record (chunk 0) also carries the keys that order
    documents by id (`docingest.pipeline.store.ordering`)."""
    payload = record.payload(state="staged" if live is None else "live")
    if live is not None:
        payload.update(live)
    if record.chunk_index == 0:
        payload.update(order_payload(record.document_id))
    return Point(
        id=point_id(index, record.document_id, record.version, record.chunk_index),
        dense=record.dense,
        sparse=record.sparse,
        payload=payload,
    )


def point_from_record(record: models.Record) -> Point:
    """Return a stored point as the store writes it (vectors and payload as they were)."""
    vectors = record.vector if isinstance(record.vector, dict) else {}
    sparse = vectors.get(KEYWORD)
    terms = (
        SparseTerms(list(sparse.indices), list(sparse.values))
        if isinstance(sparse, models.SparseVector)
        else SparseTerms()
    )
    dense = np.asarray(vectors[DENSE], dtype=np.float32)
    return Point(id=str(record.id), dense=dense, sparse=terms, payload=dict(record.payload or {}))


def scored_chunk(point: models.ScoredPoint) -> ScoredChunk:
    return ScoredChunk.from_payload(str(point.id), float(point.score), point.payload or {})


METADATA_KEY = "docingest"
"""Key of docingest's entry in a collection's metadata."""
CORE_INDEXES = {
    "document_id": models.PayloadSchemaType.KEYWORD,
    "version": models.PayloadSchemaType.INTEGER,
    "state": models.PayloadSchemaType.KEYWORD,
    "chunk_index": models.PayloadSchemaType.INTEGER,
    "text_hash": models.PayloadSchemaType.KEYWORD,
    "ingested_at": models.PayloadSchemaType.DATETIME,
    ACCESS_FIELD: models.PayloadSchemaType.KEYWORD,
}
"""Payload indexes of every index (qdrant-client's local mode ignores them)."""


def stored_config(metadata: dict[str, Any] | None) -> IndexConfig | None:
    """Return the index config in a collection's metadata; None for a foreign collection."""
    stored = (metadata or {}).get(METADATA_KEY)
    if not isinstance(stored, dict) or "config" not in stored:
        return None
    return IndexConfig.model_validate(stored["config"])
