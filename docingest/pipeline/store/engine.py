"""The seam between the store and an engine: the dozen operations the store needs.

Three engines in two families implement it, and the store's logic (versions, staged → live →
retired, filters, the per-document cap, RRF) exists once, in
`docingest.pipeline.store.vector_store`, above it:

- `EdgeEngine` (`docingest.pipeline.store.edge`): the embedded default. Qdrant Edge shards under
  `data_dir/edge`, the Qdrant engine in-process (HNSW, payload indexes, sparse IDF, WAL).
- `ClientEngine` (`docingest.pipeline.store.client`): qdrant-client, for a Qdrant server, cluster or
  Qdrant Cloud (`DOCINGEST_QDRANT_URL`), and for qdrant-client's in-memory local mode
  (`DOCINGEST_QDRANT_URL=:memory:`), which stands in for the server in tests since no Qdrant
  server runs here.
- `PostgresEngine` (`docingest.pipeline.store.postgres`): PostgreSQL with pgvector
  (`DOCINGEST_DATABASE_URL`), a table per index, shared by every process.

Requests and results are qdrant-client's models on every engine: they are the server's wire
types, so the server path passes them through, the Edge engine translates the small subset
the store builds (`docingest.pipeline.store.edge_convert`), and the Postgres engine compiles
the same subset to SQL (`docingest.pipeline.store.postgres_filter`) with Qdrant's semantics
(a list field matches any of its elements, `is_empty`, IDF-weighted keyword scores, RRF). They
are the store's request language, not a dependency on a Qdrant server. Points to write are the
store's own `Point`, which each engine builds its type from directly (the write path's hot
loop).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from qdrant_client import models

from docingest.common.urls import redact_url
from docingest.pipeline.settings import Settings
from docingest.pipeline.store.models import IndexConfig
from docingest.pipeline.store.requests import Point


class Engine(Protocol):
    """One engine holding one collection (server), shard (Edge) or table (Postgres) per index.

    Every method naming an index raises `IndexNotFound` when it does not exist, and
    `DependencyUnavailable` when the engine cannot be reached.
    """

    location: str
    """Where the data is (a URL or a directory), for messages."""

    writes_live: bool
    """Whether a small document is better written once, live, than staged and then published
    (`VectorStore.write_live`): one update is atomic, and a payload change to an indexed
    point copies it back for a second build done in the caller's time (Edge)."""

    def ping(self) -> None: ...

    def close(self) -> None: ...

    def locked(self) -> AbstractContextManager[Any]:
        """Serialise index creation and deletion with this process's other threads."""
        ...

    def list_indexes(self) -> list[str]:
        """Return the names of the indexes docingest made here (with a stored config)."""
        ...

    def create_index(self, index: str, config: IndexConfig) -> None:
        """Create the index's vectors, core payload indexes and stored config."""
        ...

    def replace_config(self, index: str, config: IndexConfig) -> None:
        """Store `config` as the index's config (what may change: metadata schema, rerank)."""
        ...

    def index_config(self, index: str) -> IndexConfig | None:
        """Return the stored config; None when the collection exists but is not docingest's."""
        ...

    def index_exists(self, index: str) -> bool: ...

    def delete_index(self, index: str) -> bool: ...

    def payload_indexes(self, index: str) -> set[str] | None:
        """Return the payload paths that have an index; None if the engine keeps none."""
        ...

    def create_payload_index(
        self, index: str, path: str, schema: models.PayloadSchemaType
    ) -> None: ...

    def upsert(self, index: str, points: Sequence[Point]) -> None:
        """Write `points`, durable when this returns."""
        ...

    def set_payload(self, index: str, payload: dict[str, Any], selector: models.Filter) -> None: ...

    def count(self, index: str, selector: models.Filter) -> int: ...

    def delete(self, index: str, selector: models.Filter) -> None: ...

    def scroll(
        self,
        index: str,
        selector: models.Filter,
        *,
        limit: int,
        offset: models.ExtendedPointId | None,
        payload: Sequence[str] | None,
        vectors: Sequence[str] | None,
        order_by: str | None = None,
    ) -> tuple[list[models.Record], models.ExtendedPointId | None]:
        """Return a page of matching points (`payload` None: all of it) and the next offset;
        with `order_by` (an integer field with an index) in that field's ascending order, in
        one page only (no offset)."""
        ...

    def query_batch(
        self, index: str, requests: Sequence[models.QueryRequest]
    ) -> list[list[models.ScoredPoint]]: ...

    def query_fused(
        self,
        index: str,
        *,
        prefetch: Sequence[models.Prefetch],
        query: models.FusionQuery | models.RrfQuery,
        limit: int,
        with_payload: Sequence[str],
    ) -> list[models.ScoredPoint]: ...


def open_engine(settings: Settings) -> Engine:
    """Open the engine `settings` name: Postgres with `database_url`, qdrant-client with
    `qdrant_url`, else Edge."""
    if settings.database_url is not None:
        from docingest.pipeline.store.postgres import PostgresEngine

        return PostgresEngine.open(settings)
    if settings.qdrant_url:
        from docingest.pipeline.store.client import ClientEngine

        return ClientEngine.open(settings)
    from docingest.pipeline.store.edge import EdgeEngine

    return EdgeEngine.open(settings)


def store_description(settings: Settings) -> str:
    """Which store `settings` name and where, for messages and `/readyz` (no password)."""
    if settings.database_url is not None:
        return f"PostgreSQL at {redact_url(settings.database_url.get_secret_value())}"
    if settings.qdrant_url:
        return f"Qdrant at {redact_url(settings.qdrant_url)}"
    return f"embedded store in {settings.data_dir / 'edge'}"
