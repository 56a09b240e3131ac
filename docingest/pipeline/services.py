"""The clients one process works with, built once: by the API's lifespan, by a worker process
on its first task, or by `docingest serve` for both at once (so both share one embedded store).

The embedded store allows one process per directory. A process that does not own it
(`owns_store=False`: the API beside a separate worker without a Qdrant server) gets
`StoreNotHere` with a message saying what to do instead of a lock error; with a shared store
(a Qdrant server, or PostgreSQL) every process owns.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from redis import Redis

from docingest.pipeline.api_keys import ApiKeyStore
from docingest.pipeline.chunking import ChunkingSpec
from docingest.pipeline.embedders.base import Embedder, EmbeddingConfig, QueryCache
from docingest.pipeline.embedders.bounded import BoundedQueries
from docingest.pipeline.embedders.registry import build_embedder
from docingest.pipeline.errors import (
    DependencyUnavailable,
    DocumentBusy,
    DocumentNotFound,
    Forbidden,
    IndexNotFound,
    InvalidEmbedding,
    StoreNotHere,
)
from docingest.pipeline.jobs.state import JobStore
from docingest.pipeline.jobs.usage import UsageLedger
from docingest.pipeline.keys import Keys
from docingest.pipeline.outbox import DeleteUnderWay, Outbox
from docingest.pipeline.redis_errors import REDIS_DOWN
from docingest.pipeline.rerank import RerankDefaults, Reranker, RerankSpec, build_reranker
from docingest.pipeline.rerank.bounded import BoundedReranker
from docingest.pipeline.search import (
    Fusion,
    Reranking,
    SearchRequest,
    SearchResponse,
    resolve_target,
    search_outcome,
)
from docingest.pipeline.settings import Settings
from docingest.pipeline.store import ADMIN, IndexConfig, Reader, VectorStore
from docingest.pipeline.store.fencing import KEEP_ALIVE_TIMEOUT, DocumentFence

log = logging.getLogger(__name__)

REDIS_SOCKET_TIMEOUT = 10.0
"""Seconds one Redis command may take before it counts as Redis being unavailable."""
STORE_REOPEN_SECONDS = 1.0
"""A store server that failed to open is not tried again sooner: the callers queued behind a
slow refusal get it at once instead of waiting their turn for one each."""
DELETE_LOCK_WAIT_SECONDS = 30.0
"""How long a delete waits for a job that is storing the same document."""


class Services:
    """Redis, job store, fence, vector store and embedders of one process; thread-safe."""

    def __init__(self, settings: Settings, *, owns_store: bool) -> None:
        self.settings = settings
        self.redis: Redis = Redis.from_url(
            settings.redis_url,
            decode_responses=True,
            socket_timeout=REDIS_SOCKET_TIMEOUT,
            socket_connect_timeout=5.0,
            health_check_interval=30,
            retry_on_timeout=False,
        )
        self.keys = Keys(settings.redis_key_prefix)
        self.jobs = JobStore(
            self.redis,
            keys=self.keys,
            ttl_seconds=settings.job_ttl_seconds,
            webhook_log_size=settings.webhook_log_size,
        )
        self.outbox = Outbox(
            self.redis,
            keys=self.keys,
            log_size=settings.webhook_log_size,
            keep_seconds=settings.job_ttl_seconds,
        )
        self.usage = UsageLedger(self.redis, keys=self.keys)
        self.api_keys = ApiKeyStore(self.redis, keys=self.keys)
        self.fence = DocumentFence(self.redis, key_prefix=settings.redis_key_prefix)
        self.query_cache = QueryCache(settings.query_cache_size)
        self.owns_store = owns_store or settings.shared_store
        self._store: VectorStore | None = None
        self._embedders: dict[tuple[str, str, int | None], Embedder] = {}
        self._rerankers: dict[tuple[str, str], Reranker] = {}
        self._rerank_gates: dict[str, threading.BoundedSemaphore] = {}
        """One per provider: the bulkhead of `docingest.pipeline.rerank.bounded`."""
        self._query_gates: dict[str, threading.BoundedSemaphore] = {}
        """One per provider: the bulkhead of `docingest.pipeline.embedders.bounded`."""
        self._lock = threading.RLock()
        self._store_lock = threading.Lock()
        """Held while the store opens: a store server that is slow to refuse (up to
        `database_pool_timeout_seconds`) holds up only the callers that need the store."""
        self._store_refused: tuple[float, str] | None = None
        """When the store last failed to open (`time.monotonic()`), and why."""

    @property
    def store(self) -> VectorStore:
        """The vector store, opened on first use."""
        if not self.owns_store:
            raise StoreNotHere(
                "The index is in the embedded store and a separate `docingest worker` owns it; run "
                "`docingest serve` for one process, or set DOCINGEST_QDRANT_URL (a Qdrant "
                "server) or DOCINGEST_DATABASE_URL (PostgreSQL) so the API can read it too."
            )
        with self._store_lock:
            if self._store is None:  # a store server that does not answer: tried again later
                refused = self._store_refused
                if refused is not None and time.monotonic() - refused[0] < STORE_REOPEN_SECONDS:
                    raise DependencyUnavailable(refused[1])
                try:
                    self._store = VectorStore.open(self.settings)
                except DependencyUnavailable as exc:
                    self._store_refused = (time.monotonic(), exc.message)
                    raise
            return self._store

    def staged_path(self, name: str) -> Path:
        """Return where the staged upload `name` lives (a generated name, never a filename)."""
        return self.settings.staging_dir / name

    def embedder_for(self, config: EmbeddingConfig) -> Embedder:
        """Return the embedder of `config`, built once per process (models are large);
        `InvalidEmbedding` when its provider cannot build that model or dimensions."""
        key = (config.provider, config.model, config.dimensions)
        with self._lock:
            embedder = self._embedders.get(key)
            if embedder is None:
                try:
                    embedder = build_embedder(config, settings=self.settings, redis=self.redis)
                except ValueError as exc:  # the providers' word for a config they cannot build
                    raise InvalidEmbedding(_refusal(config, exc)) from exc
                self._embedders[key] = embedder
                self._embedders[(config.provider, config.model, embedder.dimensions)] = embedder
            return embedder

    def query_embedder_for(self, config: EmbeddingConfig) -> Embedder:
        """`embedder_for(config)` with its query embeddings bounded in number at once per
        provider (`docingest.pipeline.embedders.bounded`): the embedder searches use."""
        embedder = self.embedder_for(config)
        most = self.settings.query_embedding_concurrency
        with self._lock:
            gate = self._query_gates.setdefault(embedder.provider, threading.BoundedSemaphore(most))
        return BoundedQueries(embedder, gate, most=most)

    def resolve_embedding(self, config: EmbeddingConfig) -> EmbeddingConfig:
        """Return `config` with `dimensions` set to the size its embedder really produces.

        The embedder is built even when `dimensions` is given, so a model or a size its
        provider cannot produce is refused now (`InvalidEmbedding`), not by every upload to an
        index that can never work.
        """
        embedder = self.embedder_for(config)
        if config.dimensions is not None:
            return config
        return config.model_copy(update={"dimensions": embedder.dimensions})

    def default_index_config(self) -> IndexConfig:
        """The settings a new index gets when nothing else is asked for."""
        embedding = self.resolve_embedding(EmbeddingConfig.from_settings(self.settings))
        return IndexConfig(
            embedding=embedding,
            chunking=ChunkingSpec.from_settings(self.settings),
            contextual_headers=self.settings.contextual_headers,
        )

    def check_embedding_endpoints(self) -> dict[str, str]:
        """On start, with fallback endpoints configured: check that each serves the default
        model with its dimensions (`docingest.pipeline.embedders.endpoint_check`), and log the
        outcome; endpoint label → `ok`, `refused: ...` or `unchecked: ...`. Empty when there is
        nothing to check (no fallbacks, or another provider)."""
        settings = self.settings
        if not settings.openai_fallback_urls or settings.embedding_provider != "openai":
            return {}
        embedder = self.embedder_for(EmbeddingConfig.from_settings(settings))
        check = getattr(embedder, "check_endpoints", None)
        outcome: dict[str, str] = check() if check is not None else {}
        for label, state in outcome.items():
            log.info("embedding endpoint %s: %s", label, state)
        return outcome

    def delete_index(self, index: str) -> bool:
        """Remove the index, its vectors and its usage; False if it does not exist."""
        if not self.store.delete_index(index):
            return False
        self.usage.forget(index)
        return True

    def ensure_index(self, name: str) -> IndexConfig:
        """Return the config of index `name`, creating it with the defaults if it is missing."""
        config = self.store.index_config(name)
        if config is None:
            info, _ = self.store.create_index(name, self.default_index_config())
            config = self.store.index_config(name)
            assert config is not None, info
        return config

    def next_version(self, index: str, document_id: str) -> int:
        """Hand out the document's next version, above the store's live one (so versions never
        go backwards when Redis has lost its counter)."""
        live = self.store.live_document(index, document_id)
        return self.fence.next_version(index, document_id, floor=live.version if live else 0)

    def delete_document(self, index: str, document_id: str, *, reader: Reader = ADMIN) -> None:
        """Remove the document's chunks (every version); raise `DocumentNotFound` if none, or
        if `reader` may not see it, and `Forbidden` if it sees it but may not delete it.

        Under the document's store lock, a job still storing an older upload of it is
        superseded first (its version is no longer the newest), so it cannot bring the
        document back after the delete. The `document.deleted` event is written under the
        same lock, so it follows the events of the jobs that stored the document; every
        delete (one document or by filter) comes here, so each gets its event.
        """
        with self.fence.lock(
            index,
            document_id,
            timeout=KEEP_ALIVE_TIMEOUT,
            blocking_timeout=DELETE_LOCK_WAIT_SECONDS,
            keep_alive=True,
        ):
            self.check_writable(index, document_id, reader)
            version = self.next_version(index, document_id)  # supersedes any attempt
            self.outbox.begin_delete(index, document_id, version=version)
            if not self.store.delete_document(index, document_id):
                self.outbox.abandon_delete(index, document_id)
                raise DocumentNotFound(f"Document '{document_id}' is not in index '{index}'.")
            seconds, micros = self.redis.time()
            self.outbox.emit_deleted(index, document_id, seconds + micros / 1_000_000)

    def check_writable(self, index: str, document_id: str, reader: Reader) -> None:
        """Pass if `reader` may change the live document, or if there is none. One it may
        not see is `DocumentNotFound`, as a missing one; one it sees but may not change is
        `Forbidden`. Admins pass without a read."""
        if reader.is_admin:
            return
        store = self.store
        if store.live_document(index, document_id) is None:
            return
        if store.live_document(index, document_id, within=store.readable(index, reader)) is None:
            raise DocumentNotFound(f"Document '{document_id}' is not in index '{index}'.")
        if store.live_document(index, document_id, within=store.writable(index, reader)) is None:
            raise Forbidden(
                "This API key may read that document but not change it: that takes a "
                "principal on its access list other than 'public', or an admin key."
            )

    def finish_interrupted_delete(self, delete: DeleteUnderWay) -> bool | None:
        """End a delete whose process died between the store and its event: emit the event
        if the store no longer holds the version it deleted, else forget it (it deleted
        nothing, and its caller got no answer). True: event emitted, False: forgotten, None:
        under way (the document's lock is held)."""
        index, document_id = delete.index, delete.document_id
        try:
            with self.fence.lock(index, document_id, timeout=KEEP_ALIVE_TIMEOUT,
                                 blocking_timeout=0, keep_alive=True):  # fmt: skip
                if self.outbox.delete_under_way(index, document_id) != delete:
                    return None  # ended meanwhile, or another delete began
                try:
                    live = self.store.live_document(index, document_id)
                except IndexNotFound:  # the index went since: so did the document
                    live = None
                if live is not None and live.version < delete.version:
                    self.outbox.abandon_delete(index, document_id)
                    return False
                self.outbox.emit_deleted(index, document_id, delete.at)
                return True
        except DocumentBusy:
            return None

    def reranker_for(self, spec: RerankSpec) -> Reranker:
        """Return the re-ranker of `spec`'s provider and model, built once per process (its
        HTTP connections are kept) and bounded in calls at once per provider; `RerankFailed`
        when no URL is configured."""
        key = (spec.provider, spec.model)
        most = self.settings.rerank_concurrency
        with self._lock:
            reranker = self._rerankers.get(key)
            if reranker is None:
                gate = self._rerank_gates.setdefault(
                    spec.provider, threading.BoundedSemaphore(most)
                )
                built = build_reranker(
                    spec.provider, spec.model, settings=self.settings, redis=self.redis
                )
                reranker = BoundedReranker(built, gate, most=most)
                self._rerankers[key] = reranker
            return reranker

    def search(self, index: str, request: SearchRequest, *, reader: Reader) -> SearchResponse:
        """Run `request` against `index` with the embedder its config names, re-ranked as
        the request, the index and the settings say, over what `reader` may see; a rerank
        sent is counted in the index's usage (a Redis outage skips the count, never the
        search)."""
        target = resolve_target(self.store, index, embedder_for=self.query_embedder_for)
        reranking = Reranking(
            defaults=RerankDefaults.from_settings(self.settings),
            reranker_for=self.reranker_for,
            deadline_seconds=self.settings.rerank_deadline_seconds,
        )
        fusion = Fusion(self.settings.hybrid_fusion, self.settings.hybrid_vector_weight)
        response, outcome = search_outcome(
            self.store,
            target,
            request,
            query_cache=self.query_cache,
            reranking=reranking,
            fusion=fusion,
            reader=reader,
        )
        if outcome.requested:
            try:
                self.usage.add_rerank_requests(index)
            except DependencyUnavailable as exc:
                log.warning("rerank request of %s not counted: %s", index, exc)
        return response

    def redis_ok(self) -> str | None:
        """Return None if Redis answers, else why not."""
        try:
            self.redis.ping()
        except REDIS_DOWN as exc:
            return str(exc) or type(exc).__name__
        return None

    def close(self) -> None:
        """Release the store (and its local-mode lock), the providers' connections and the
        Redis connections."""
        with self._store_lock:
            if self._store is not None:
                self._store.close()
                self._store = None
        with self._lock:
            for reranker in self._rerankers.values():
                reranker.close()
            self._rerankers.clear()
            for embedder in {id(e): e for e in self._embedders.values()}.values():
                close = getattr(embedder, "close", None)  # a provider's HTTP client, if any
                if close is not None:
                    close()
            self._embedders.clear()
        self.redis.close()


def _refusal(config: EmbeddingConfig, exc: ValueError) -> str:
    """Say why `config` cannot be built and, for the bundled provider, what it offers."""
    dimensions = "its own dimensions" if config.dimensions is None else f"{config.dimensions}"
    message = (
        f"The embedding {config.provider}/{config.model} with {dimensions} dimensions cannot "
        f"be built: {exc}."
    )
    if config.provider == "local":  # a closed table; other providers take any model name
        from docingest.pipeline.embedders import local

        names = " (or ".join(sorted(local.MODEL_ALIASES, key=len)) + ")"
        message += f" The local provider's models: {names}, {local.DIMENSIONS} dimensions."
    return message
