"""A re-ranker behind a bulkhead: at most so many calls under way at once per provider.

The calls run on the threads of the searches that make them (the API's worker threads), so a
re-ranker that hangs would otherwise hold one thread per search until each deadline passes,
and searches without rerank, and every other route, would queue behind them. A call that
finds the provider's calls all taken fails at once with `rerank_busy`, and its search answers
in first-stage order like any failed rerank (RELIABILITY.md, "Hostile re-rankers";
BENCHMARKS.md, "Bulkheads").
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from docingest.pipeline.errors import RerankFailed
from docingest.pipeline.rerank.base import Reranker


class BoundedReranker:
    """`inner` behind `gate`, a semaphore shared by every re-ranker of one provider."""

    def __init__(self, inner: Reranker, gate: threading.BoundedSemaphore, *, most: int) -> None:
        self.inner = inner
        self.provider = inner.provider
        self.model = inner.model
        self.endpoint = inner.endpoint
        self._gate = gate
        self._most = most

    def scores(self, query: str, documents: Sequence[str], *, deadline: float) -> list[float]:
        """The inner re-ranker's scores; `RerankFailed` (`rerank_busy`) at once when full."""
        if not self._gate.acquire(blocking=False):
            raise RerankFailed(
                "rerank_busy",
                f"The re-ranker at {self.endpoint} already has {self._most} requests under way "
                "(DOCINGEST_RERANK_CONCURRENCY).",
            )
        try:
            return self.inner.scores(query, documents, deadline=deadline)
        finally:
            self._gate.release()

    def close(self) -> None:
        self.inner.close()
