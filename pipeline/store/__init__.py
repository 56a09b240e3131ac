"""The vector store: one Qdrant collection per index, staged → live → retired versions.

`vector_store` holds the store's logic; `connection` opens the engine and translates its
errors; `models` are the types it takes and returns; `filters` parses search filters;
`fencing` hands out document versions and the store lock in Redis.
"""

from pipeline.store.filters import SearchFilter
from pipeline.store.models import (
    ChunkRecord,
    DocumentFields,
    IndexConfig,
    IndexInfo,
    ScoredChunk,
    StoredDocument,
    point_id,
    validate_index_name,
)
from pipeline.store.vector_store import VectorStore

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
