"""The vector store on Qdrant Edge, a Qdrant server or PostgreSQL: staged → live → retired
versions, with its filters, fencing and transfers."""

from docingest.pipeline.store.access import ADMIN, Reader
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
    "ADMIN",
    "ChunkRecord",
    "DocumentFields",
    "IndexConfig",
    "IndexInfo",
    "Reader",
    "ScoredChunk",
    "SearchFilter",
    "StoredDocument",
    "VectorStore",
    "point_id",
    "validate_index_name",
]
