"""A search's query embedding behind a bulkhead: at most so many under way at once per provider.

Searches embed their query on their own thread, one of the API's worker threads, so an
embedding endpoint that hangs would otherwise hold one thread per search until each deadline
passed, and keyword searches, and every other route, would queue behind them. A query that
finds its provider's slots all taken waits a moment (a healthy endpoint frees one within tens
of milliseconds), then fails with `embedding_busy`: the provider holds at most its slots' and
its waiters' threads, the waiters each for `SLOT_WAIT_SECONDS` (RELIABILITY.md, "Embedding
endpoints").
The re-ranker's bulkhead (`docingest.pipeline.rerank.bounded`) fails at once instead, because
its search can still answer without it; a search cannot answer without its query's vector.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from docingest.pipeline.embedders.base import Embedder, ProgressCallback
from docingest.pipeline.errors import EmbeddingBusy

SLOT_WAIT_SECONDS = 0.5
"""How long a query waits for a slot: bursts on a healthy endpoint ride it out; behind a
hung one, each waiter returns its API thread this soon."""


class BoundedQueries:
    """`inner`, whose `embed_query` passes through `gate`, a semaphore shared by every
    embedder of one provider; documents are embedded unbounded, as before (workers)."""

    def __init__(self, inner: Embedder, gate: threading.BoundedSemaphore, *, most: int) -> None:
        self.inner = inner
        self.provider = inner.provider
        self.model = inner.model
        self.dimensions = inner.dimensions
        self.max_batch = inner.max_batch
        self._gate = gate
        self._most = most

    def embed_documents(
        self, texts: Sequence[str], on_progress: ProgressCallback | None = None
    ) -> np.ndarray:
        return self.inner.embed_documents(texts, on_progress)

    def embed_query(self, text: str) -> np.ndarray:
        """The inner embedder's vector; `EmbeddingBusy` when no slot frees in time."""
        if not self._gate.acquire(timeout=SLOT_WAIT_SECONDS):
            raise EmbeddingBusy(
                f"The {self.provider} embedding provider already has {self._most} query "
                "embeddings under way (DOCINGEST_QUERY_EMBEDDING_CONCURRENCY); retry shortly."
            )
        try:
            return self.inner.embed_query(text)
        finally:
            self._gate.release()
