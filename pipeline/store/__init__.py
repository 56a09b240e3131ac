"""The vector store: one Qdrant collection per index, staged → live → retired versions.

`vector_store` holds the store's logic; `engine` is the seam over its two engines (`edge`:
Qdrant Edge shards in this process; `client`: qdrant-client, for a server), which open the
engine and translate its errors; `models` are the types it takes and returns; `filters`
parses search filters; `requests` builds Qdrant's requests and points; `fencing` hands out
document versions and the store lock in Redis; `transfer` and `legacy` move indexes between
stores and read the previous release's data.
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
