"""An embedding endpoint that hangs on searches' queries holds only its own bounded calls,
never the API's threads: beside more hung vector searches than the API has worker threads,
a keyword search and `/healthz` answer, the extra vector searches answer 503
`embedding_busy`, and the hung ones are still waiting; and a query's embedding ends at its
own deadline, not the documents' (RELIABILITY.md, "Embedding endpoints"). Real uvicorn, an
embedded Celery worker, the fake OpenAI-compatible server told to hang on one query."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.test_rerank import INDEX, manual
from tests.api.test_usage import ingest
from tests.support.api_app import api_with_worker
from tests.support.embedding_server import FakeEmbeddingServer
from tests.support.redis_db import TestRedis
from tests.support.settings import service_settings
from tests.support.waiting import wait_until

HUNG_SECONDS = 120.0
"""How long the endpoint holds a hung query, and the embedder's timeouts: far past the
test's waits, so a search that answers did so without waiting for the hung calls."""
HUNG_QUERY = "hung query about key rotation"
CONCURRENCY = 2
SEARCHES = 48
"""More than the API's worker threads (Starlette's default of 40)."""


def _held(server: FakeEmbeddingServer) -> int:
    """Requests for the hung query the server holds unanswered."""
    return sum(
        1
        for request in server.requests
        if HUNG_QUERY in request.inputs and request.answered is None
    )


@pytest.fixture
def settings_for(tmp_path: Path, redis_db: TestRedis, embedding_server: FakeEmbeddingServer) -> Any:
    def build(**overrides: Any) -> Any:
        return service_settings(
            tmp_path,
            redis_db.prefix,
            embedding_server,
            embedding_timeout_seconds=HUNG_SECONDS,
            embedding_deadline_seconds=HUNG_SECONDS,
            embedding_max_attempts=1,
            query_embedding_concurrency=CONCURRENCY,
            **overrides,
        )

    return build


@pytest.fixture
def client(settings_for: Any, redis_db: TestRedis) -> Iterator[httpx.Client]:
    settings = settings_for(query_embedding_deadline_seconds=HUNG_SECONDS)
    with api_with_worker(settings, name=f"query-bulkhead-{redis_db.prefix}") as api:
        yield api


def test_a_hung_embedding_endpoint_holds_only_its_own_query_calls(
    client: httpx.Client, embedding_server: FakeEmbeddingServer
) -> None:
    ingest(client, INDEX, manual(1), document_id="manual-1.md")
    embedding_server.fail_inputs_containing(HUNG_QUERY, {"delay": HUNG_SECONDS})
    url = f"{client.base_url}/v1/indexes/{INDEX}/search"
    answered: list[httpx.Response] = []
    lock = threading.Lock()

    def vector_search() -> None:
        with httpx.Client(timeout=HUNG_SECONDS * 2) as own:
            response = own.post(url, json={"query": HUNG_QUERY, "mode": "vector"})
        with lock:
            answered.append(response)

    with ThreadPoolExecutor(SEARCHES) as pool:
        futures: list[Future[None]] = [pool.submit(vector_search) for _ in range(SEARCHES)]
        busy = wait_until(
            lambda: (
                len(answered) >= SEARCHES - CONCURRENCY and _held(embedding_server) == CONCURRENCY
            ),
            what="the vector searches beyond the bound answered",
            timeout=90,
        )
        assert busy
        keyword = client.post(url, json={"query": "rotation", "mode": "keyword"}, timeout=60)
        health = client.get("/healthz", timeout=60)
        # Answered while the bounded calls still hang: nothing waited for them.
        still_hung = sum(not future.done() for future in futures)
        assert still_hung == CONCURRENCY and _held(embedding_server) == CONCURRENCY
        embedding_server.stop()  # the hung calls end now, and the pool can end
    assert keyword.status_code == 200 and keyword.json()["results"]
    assert health.json() == {"status": "ok"}
    with lock:
        busy_answers = [r for r in answered[: SEARCHES - CONCURRENCY] if r.status_code == 503]
    assert len(busy_answers) == SEARCHES - CONCURRENCY
    assert {r.json()["error"]["code"] for r in busy_answers} == {"embedding_busy"}
    assert all(r.headers["retry-after"] for r in busy_answers)


def test_a_query_embedding_ends_at_its_own_deadline(
    settings_for: Any, redis_db: TestRedis, embedding_server: FakeEmbeddingServer
) -> None:
    settings = settings_for(query_embedding_deadline_seconds=1.0)
    with api_with_worker(settings, name=f"query-deadline-{redis_db.prefix}") as api:
        ingest(api, INDEX, manual(1), document_id="manual-1.md")
        embedding_server.fail_inputs_containing(HUNG_QUERY, {"delay": HUNG_SECONDS})
        response = api.post(
            f"/v1/indexes/{INDEX}/search",
            json={"query": HUNG_QUERY, "mode": "hybrid"},
            timeout=HUNG_SECONDS * 2,
        )
        # The endpoint still holds the request: the search ended on its deadline.
        assert _held(embedding_server) == 1
        embedding_server.stop()
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "embedding_failed"
    assert response.headers["retry-after"]
