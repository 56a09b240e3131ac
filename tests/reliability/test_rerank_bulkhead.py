"""A re-ranker that hangs holds only its own bounded calls, never the API's threads: beside
more hung rerank searches than the API has worker threads, a search without rerank and
`/healthz` answer, the extra rerank searches answer at once in first-stage order with
`rerank_busy`, and the hung ones are still waiting (RELIABILITY.md, "Hostile re-rankers").
Real uvicorn, an embedded Celery worker, a TCP server that never answers."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.test_rerank import INDEX, QUERY, manual
from tests.api.test_usage import ingest
from tests.support.api_app import api_with_worker
from tests.support.embedding_server import FakeEmbeddingServer
from tests.support.hanging_server import HangingServer
from tests.support.redis_db import TestRedis
from tests.support.settings import service_settings
from tests.support.waiting import wait_until

HUNG_SECONDS = 120.0
"""The re-ranker's timeout and deadline: far past the test's waits, so a rerank search that
answers did so without waiting for the hung re-ranker."""
CONCURRENCY = 2
SEARCHES = 48
"""More than the API's worker threads (Starlette's default of 40)."""


@pytest.fixture
def hanging() -> Iterator[HangingServer]:
    with HangingServer() as server:
        yield server


@pytest.fixture
def client(
    tmp_path: Path, redis_db: TestRedis, embedding_server: FakeEmbeddingServer,
    hanging: HangingServer,
) -> Iterator[httpx.Client]:  # fmt: skip
    settings = service_settings(
        tmp_path,
        redis_db.prefix,
        embedding_server,
        rerank_url=hanging.url,
        rerank_provider="cohere",
        rerank_model="any",
        rerank_max_attempts=1,
        rerank_timeout_seconds=HUNG_SECONDS,
        rerank_deadline_seconds=HUNG_SECONDS,
        rerank_concurrency=CONCURRENCY,
    )
    with api_with_worker(settings, name=f"bulkhead-{redis_db.prefix}") as api:
        yield api


def test_a_hung_reranker_holds_only_its_own_calls(
    client: httpx.Client, hanging: HangingServer
) -> None:
    ingest(client, INDEX, manual(1), document_id="manual-1.md")
    url = f"{client.base_url}/v1/indexes/{INDEX}/search"
    answered: list[dict[str, Any]] = []
    lock = threading.Lock()

    def rerank_search() -> None:
        with httpx.Client(timeout=HUNG_SECONDS * 2) as own:
            body = own.post(url, json={"query": QUERY, "rerank": True}).raise_for_status()
        with lock:
            answered.append(body.json())

    with ThreadPoolExecutor(SEARCHES) as pool:
        futures: list[Future[None]] = [pool.submit(rerank_search) for _ in range(SEARCHES)]
        busy = wait_until(
            lambda: len(answered) >= SEARCHES - CONCURRENCY and hanging.held == CONCURRENCY,
            what="the rerank searches beyond the bound answered",
            timeout=60,
        )
        assert busy
        plain = client.post(url, json={"query": QUERY, "rerank": False}, timeout=60)
        health = client.get("/healthz", timeout=60)
        # Answered while the bounded calls still hang: nothing waited for them.
        still_hung = sum(not future.done() for future in futures)
        assert still_hung == CONCURRENCY and hanging.held == CONCURRENCY
        hanging.close()  # the hung calls fail now, and the pool can end
    assert plain.status_code == 200 and plain.json()["results"]
    assert health.json() == {"status": "ok"}
    with lock:
        codes = {body["rerank_error"]["code"] for body in answered}
        first_stage = {body["reranked"] for body in answered}
    assert first_stage == {False}
    assert "rerank_busy" in codes
    assert len(answered) == SEARCHES
