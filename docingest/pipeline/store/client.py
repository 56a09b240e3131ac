"""The qdrant-client engine: a Qdrant server, cluster or Qdrant Cloud, one collection per index.

`DOCINGEST_QDRANT_URL=:memory:` opens qdrant-client's in-memory local mode instead. That mode is
a linear scan in Python, slower with every chunk an index holds (BENCHMARKS.md, "Embedded
store", beside Edge; the choice: docs/design/decisions/0009-qdrant-edge-embedded-store.md), and
keeps no data, so it serves no deployment; it earns its place as the stand-in for a server in
tests: it takes the same calls over the same client, so the store's suite runs on it and on
Edge alike (the congruence tests) on a machine that cannot run a Qdrant server. Its calls are
serialised here because local mode is not thread-safe.

qdrant-client's errors are translated into docingest's once, here, at the boundary.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

import httpx
from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from docingest.pipeline.errors import DependencyUnavailable, IndexNotFound
from docingest.pipeline.settings import Settings
from docingest.pipeline.store.models import IndexConfig
from docingest.pipeline.store.requests import (
    CORE_INDEXES,
    DENSE,
    KEYWORD,
    METADATA_KEY,
    Point,
    stored_config,
)

IN_MEMORY = ":memory:"


class ClientEngine:
    """The `Engine` over qdrant-client; safe to share by threads."""

    writes_live = False  # the server builds in its own threads; one request could pass its limit

    def __init__(
        self, client: QdrantClient, *, location: str, settings: Settings, local: bool = False
    ) -> None:
        """`local`: `client` runs qdrant-client's local mode (in memory, or a directory)."""
        self.client = client
        self.location = location
        self._settings = settings
        self._local = local
        # local mode serialises every call; a server client (httpx) is shared freely
        self._lock: AbstractContextManager[Any] = (
            threading.RLock() if self._local else nullcontext()
        )
        self._closed = False

    @classmethod
    def open(cls, settings: Settings) -> ClientEngine:
        url = settings.qdrant_url or IN_MEMORY
        if url == IN_MEMORY:
            client = QdrantClient(location=url, force_disable_check_same_thread=True)
        else:
            key = settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None
            # /readyz reports an unreachable server; no version probe (and warning) at start-up
            client = QdrantClient(url=url, api_key=key, check_compatibility=False)
        return cls(client, location=url, settings=settings, local=url == IN_MEMORY)

    def _collection(self, index: str) -> str:
        return self._settings.collection_prefix + index

    @contextmanager
    def _guard(self, index: str | None = None) -> Iterator[QdrantClient]:
        """Yield the client (under the local-mode lock); translate its errors about `index`."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the vector store is closed")
            try:
                yield self.client
            except UnexpectedResponse as exc:
                status = exc.status_code
                if status == 404 and index is not None:
                    raise IndexNotFound(f"Index '{index}' does not exist.") from exc
                if status is None or status == 429 or status >= 500:
                    raise DependencyUnavailable(
                        f"Qdrant at {self.location} answered {status}; try again shortly."
                    ) from exc
                raise
            except (ResponseHandlingException, httpx.TransportError) as exc:
                raise DependencyUnavailable(
                    f"Qdrant at {self.location} is unreachable ({exc}); check that it runs."
                ) from exc
            except ValueError as exc:  # local mode's way of saying a collection is missing
                if index is not None and str(exc).endswith("not found"):
                    raise IndexNotFound(f"Index '{index}' does not exist.") from exc
                raise

    def ping(self) -> None:
        with self._guard() as client:
            client.get_collections()

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self.client.close()

    def locked(self) -> AbstractContextManager[Any]:
        return self._lock

    def list_indexes(self) -> list[str]:
        prefix = self._settings.collection_prefix
        with self._guard() as client:
            names = [c.name for c in client.get_collections().collections]
        return sorted(name[len(prefix) :] for name in names if name.startswith(prefix))

    def create_index(self, index: str, config: IndexConfig) -> None:
        settings = self._settings
        collection = self._collection(index)
        with self._guard(index) as client:
            client.create_collection(
                collection,
                vectors_config={
                    DENSE: models.VectorParams(
                        size=config.embedding.dimensions or 0, distance=models.Distance.COSINE
                    )
                },
                sparse_vectors_config={
                    KEYWORD: models.SparseVectorParams(modifier=models.Modifier.IDF)
                },
                shard_number=settings.qdrant_shard_number,
                replication_factor=settings.qdrant_replication_factor,
                write_consistency_factor=settings.qdrant_write_consistency_factor,
                metadata={METADATA_KEY: {"index": index, "config": config.model_dump(mode="json")}},
            )
            if not self._local:  # local mode ignores payload indexes (and warns about them)
                for field, schema in CORE_INDEXES.items():
                    client.create_payload_index(collection, field, schema, wait=True)

    def replace_config(self, index: str, config: IndexConfig) -> None:
        metadata = {METADATA_KEY: {"index": index, "config": config.model_dump(mode="json")}}
        with self._guard(index) as client:
            client.update_collection(self._collection(index), metadata=metadata)

    def index_config(self, index: str) -> IndexConfig | None:
        with self._guard(index) as client:
            info = client.get_collection(self._collection(index))
        return stored_config(info.config.metadata)

    def index_exists(self, index: str) -> bool:
        with self._guard(index) as client:
            return bool(client.collection_exists(self._collection(index)))

    def delete_index(self, index: str) -> bool:
        collection = self._collection(index)
        with self._guard(index) as client:
            if not client.collection_exists(collection):
                return False
            return bool(client.delete_collection(collection))

    def payload_indexes(self, index: str) -> set[str] | None:
        if self._local:  # local mode ignores payload indexes (and warns about them)
            return None
        with self._guard(index) as client:
            return set(client.get_collection(self._collection(index)).payload_schema)

    def create_payload_index(self, index: str, path: str, schema: models.PayloadSchemaType) -> None:
        with self._guard(index) as client:
            client.create_payload_index(self._collection(index), path, schema, wait=True)

    def upsert(self, index: str, points: Sequence[Point]) -> None:
        structs = [point.to_qdrant() for point in points]
        with self._guard(index) as client:
            client.upsert(self._collection(index), points=structs, wait=True)

    def set_payload(self, index: str, payload: dict[str, Any], selector: models.Filter) -> None:
        with self._guard(index) as client:
            client.set_payload(self._collection(index), payload, points=selector, wait=True)

    def count(self, index: str, selector: models.Filter) -> int:
        with self._guard(index) as client:
            return client.count(self._collection(index), count_filter=selector, exact=True).count

    def delete(self, index: str, selector: models.Filter) -> None:
        with self._guard(index) as client:
            client.delete(self._collection(index), points_selector=selector, wait=True)

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
        with self._guard(index) as client:
            return client.scroll(
                self._collection(index),
                scroll_filter=selector,
                limit=limit,
                offset=offset,
                with_payload=list(payload) if payload is not None else True,
                with_vectors=list(vectors) if vectors else False,
                order_by=models.OrderBy(key=order_by) if order_by is not None else None,
            )

    def query_batch(
        self, index: str, requests: Sequence[models.QueryRequest]
    ) -> list[list[models.ScoredPoint]]:
        with self._guard(index) as client:
            responses = client.query_batch_points(self._collection(index), list(requests))
        return [response.points for response in responses]

    def query_fused(
        self,
        index: str,
        *,
        prefetch: Sequence[models.Prefetch],
        query: models.FusionQuery | models.RrfQuery,
        limit: int,
        with_payload: Sequence[str],
    ) -> list[models.ScoredPoint]:
        with self._guard(index) as client:
            response = client.query_points(
                self._collection(index),
                prefetch=list(prefetch),
                query=query,
                limit=limit,
                with_payload=list(with_payload),
            )
        return response.points
