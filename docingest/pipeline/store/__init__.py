"""The vector store: one Qdrant collection (or PostgreSQL table) per index, staged → live →
retired versions, on three engines (Qdrant Edge, qdrant-client, PostgreSQL with pgvector), with
its filters, fencing and transfers."""

from docingest.pipeline.store.filters import SearchFilter
from docingest.pipeline.store.models import (
    ChunkRecord,
    DocumentFields,
    IndexConfig,
    IndexInfo,
    ScoredChunk,
    StoredDocument,
    point_id,
    validate_index_name,
)
from docingest.pipeline.store.vector_store import VectorStore

__all__ = [
    "ChunkRecord",
    "DocumentFields",
    "IndexConfig",
    "IndexInfo",
    "ScoredChunk",
    "SearchFilter",
    "StoredDocument",
    "VectorStore",
    "point_id",
    "validate_index_name",
]
