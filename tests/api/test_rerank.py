"""Rerank through the real API: an index's `rerank` set, shown and changed by PUT, searches
re-ranked by the fake re-ranker (or not, and saying why), `explain`, and the rerank requests
counted in the index's usage and in `/metrics`. Real uvicorn, an embedded Celery worker, the
test Redis, the fake embedding and rerank servers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.test_metrics import scrape, value
from tests.api.test_usage import ingest
from tests.support.api_app import api_with_worker
from tests.support.embedding_server import FakeEmbeddingServer
from tests.support.redis_db import TestRedis
from tests.support.rerank_server import FakeRerankServer, fake_score
from tests.support.settings import service_settings

INDEX = "manuals"
QUERY = "how do I rotate the signing keys"


@pytest.fixture
def rerank_server() -> Iterator[FakeRerankServer]:
    with FakeRerankServer(style="jina") as fake:
        yield fake


@pytest.fixture
def client(
    tmp_path: Path,
    redis_db: TestRedis,
    embedding_server: FakeEmbeddingServer,
    rerank_server: FakeRerankServer,
) -> Iterator[httpx.Client]:
    settings = service_settings(
        tmp_path,
        redis_db.prefix,
        embedding_server,
        rerank_url=rerank_server.url + "/v1",
        rerank_provider="cohere",
        rerank_model="jina-reranker-v2-base-multilingual",
        rerank_max_attempts=1,
        rerank_deadline_seconds=30.0,
    )
    with api_with_worker(settings, name=f"rerank-{redis_db.prefix}") as api:
        yield api


def manual(number: int) -> bytes:
    return "\n\n".join(
        f"# Keys part {number}.{p}\n\nRotate the signing keys of service {number} every "
        f"{p + 30} days; step {p} of the key rotation runbook for manual {number}."
        for p in range(4)
    ).encode()


def search(client: httpx.Client, **fields: Any) -> dict[str, Any]:
    response = client.post(f"/v1/indexes/{INDEX}/search", json={"query": QUERY} | fields)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_rerank_through_the_api(client: httpx.Client, rerank_server: FakeRerankServer) -> None:
    created = client.put(f"/v1/indexes/{INDEX}", json={"rerank": {"candidates": 20}})
    assert created.status_code == 201, created.text
    assert created.json()["rerank"] == {
        "provider": None,
        "model": None,
        "candidates": 20,
        "fusion": None,
    }
    for number in range(3):
        ingest(client, INDEX, manual(number), document_id=f"manual-{number}")

    body = search(client, top_k=5, explain=True)
    assert body["reranked"] is True and body["rerank_error"] is None
    sent = rerank_server.requests[-1]
    assert sent.path == "/v1/rerank"
    assert sent.body["model"] == "jina-reranker-v2-base-multilingual"
    texts = sent.body["documents"]
    best = sorted((fake_score(QUERY, text) for text in texts), reverse=True)[:5]
    assert [r["score"] for r in body["results"]] == best
    assert all(r["scores"]["rerank"] == r["score"] for r in body["results"])
    assert [r["explain"]["rerank_rank"] for r in body["results"]] == [1, 2, 3, 4, 5]
    assert all("rotat" in r["explain"]["matched_terms"] for r in body["results"])

    plain = search(client, top_k=5, rerank=False)
    assert plain["reranked"] is False and plain["rerank_error"] is None
    assert all(r["scores"]["rerank"] is None and r["explain"] is None for r in plain["results"])

    got = client.get(
        f"/v1/indexes/{INDEX}/search", params={"q": QUERY, "top_k": 5, "explain": "true"}
    ).json()
    assert got["reranked"] is True and [r["score"] for r in got["results"]] == best
    assert got["results"][0]["explain"]["rerank_rank"] == 1

    rerank_server.always = {"status": 503}
    failed = search(client, top_k=5)
    assert failed["reranked"] is False
    assert failed["rerank_error"]["code"] == "rerank_unavailable"
    assert [r["chunk_index"] for r in failed["results"]] == [
        r["chunk_index"] for r in plain["results"]
    ]

    usage = client.get(f"/v1/indexes/{INDEX}").json()["usage"]
    assert usage["rerank_requests"] == 3  # the one with rerank off sent none
    samples = scrape(client)
    endpoint = rerank_server.url
    name = "docingest_rerank_requests_total"
    assert value(samples, name, provider="cohere", endpoint=endpoint, outcome="ok") == 2
    assert (
        value(samples, name, provider="cohere", endpoint=endpoint, outcome="rerank_unavailable")
        == 1
    )


def test_the_index_rerank_may_change_but_not_to_an_unknown_provider(
    client: httpx.Client,
) -> None:
    assert client.put(f"/v1/indexes/{INDEX}").status_code == 201
    assert client.get(f"/v1/indexes/{INDEX}").json()["rerank"] is None
    changed = client.put(f"/v1/indexes/{INDEX}", json={"rerank": {"provider": "tei"}})
    assert changed.status_code == 200
    assert client.get(f"/v1/indexes/{INDEX}").json()["rerank"]["provider"] == "tei"
    assert client.put(f"/v1/indexes/{INDEX}", json={}).status_code == 200  # left out: kept
    assert client.get(f"/v1/indexes/{INDEX}").json()["rerank"]["provider"] == "tei"
    cleared = client.put(f"/v1/indexes/{INDEX}", json={"rerank": None})
    assert cleared.status_code == 200 and cleared.json()["rerank"] is None

    unknown = client.put(f"/v1/indexes/{INDEX}", json={"rerank": {"provider": "colbert"}})
    assert unknown.status_code == 422
    assert unknown.json()["error"]["code"] == "validation_error"
    assert "cohere, llm, tei" in unknown.json()["error"]["message"]
