"""Usage you can bill, through the real API: each job's `result.usage`, each index's
cumulative usage and its per-index metrics, equal to the fake servers' own request and token
logs; and a primary that goes down mid-way, replaced by its fallback. Real uvicorn, an
embedded Celery worker sharing the API's services, the test Redis, two fake servers."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

from docingest.pipeline.embedders.endpoint_check import PROBE_TEXT
from docingest.pipeline.keys import TERMINAL_STATUSES
from tests.api.test_metrics import scrape, value
from tests.support.api_app import api_with_worker, upload
from tests.support.embedding_server import FakeEmbeddingServer
from tests.support.redis_db import TestRedis
from tests.support.settings import FAKE_MODEL, service_settings
from tests.support.waiting import wait_until

PRICE = 0.02  # per million tokens


def document(tag: str, paragraphs: int = 8) -> bytes:
    return "\n\n".join(
        f"Usage note {n} of {tag}: " + " ".join(f"{tag}{n}w{word}" for word in range(30))
        for n in range(paragraphs)
    ).encode()


@pytest.fixture
def two_servers() -> Iterator[tuple[FakeEmbeddingServer, FakeEmbeddingServer]]:
    with ExitStack() as stack:
        yield stack.enter_context(FakeEmbeddingServer()), stack.enter_context(FakeEmbeddingServer())


@pytest.fixture
def service(
    tmp_path: Path,
    redis_db: TestRedis,
    two_servers: tuple[FakeEmbeddingServer, FakeEmbeddingServer],
) -> Iterator[httpx.Client]:
    primary, fallback = two_servers
    settings = service_settings(
        tmp_path,
        redis_db.prefix,
        primary,
        openai_fallback_urls=[fallback.base_url],
        embedding_max_batch=3,
        embedding_concurrency=2,
        embedding_max_attempts=2,
        embedding_circuit_failures=2,
        embedding_price_per_million_tokens={FAKE_MODEL: PRICE},
        metrics_max_indexes=1,
    )
    with api_with_worker(settings, name=f"usage-{redis_db.prefix}", concurrency=2) as client:
        yield client


def ingest(client: httpx.Client, index: str, data: bytes, *, document_id: str) -> dict[str, Any]:
    accepted = upload(client, index, data, document_id=document_id).raise_for_status().json()
    found: list[dict[str, Any]] = []

    def finished() -> bool:
        found[:] = [client.get(accepted["status_url"]).raise_for_status().json()]
        return found[0]["status"] in TERMINAL_STATUSES

    wait_until(finished, timeout=60, what=f"job {accepted['job_id']}")
    assert found[0]["status"] == "completed", found[0]
    return found[0]


def served(server: FakeEmbeddingServer) -> tuple[int, int]:
    """(requests, tokens) the server answered with vectors, its checks' probes left out."""
    batches = [r for r in server.served if r.inputs != [PROBE_TEXT]]
    return len(batches), sum(r.prompt_tokens or 0 for r in batches)


def test_usage_of_jobs_and_indexes_equals_the_servers_logs(
    service: httpx.Client, two_servers: tuple[FakeEmbeddingServer, FakeEmbeddingServer]
) -> None:
    primary, fallback = two_servers
    first = ingest(service, "billing", document("alpha"), document_id="a.txt")
    usage = first["result"]["usage"]
    assert (usage["embedding_requests"], usage["input_tokens"]) == served(primary)
    assert usage["endpoints"] == {
        "primary": {"requests": served(primary)[0], "input_tokens": served(primary)[1]}
    }
    assert usage["fallback_used"] is False and usage["rerank_requests"] == 0
    assert usage["vectors_reused"] == 0
    assert usage["estimated_cost"] == pytest.approx(usage["input_tokens"] * PRICE / 1e6)

    # The primary goes down for good; the next uploads complete through the fallback.
    primary.fail_from(len(primary.requests) + 1, {"status": 503})
    second = ingest(service, "billing", document("beta"), document_id="b.txt")
    third = ingest(service, "notes", document("gamma", 3), document_id="c.txt")
    for job in (second, third):
        assert job["result"]["usage"]["fallback_used"] is True
        assert set(job["result"]["usage"]["endpoints"]) == {"fallback1"}
    jobs = (first, second, third)
    total_requests = sum(job["result"]["usage"]["embedding_requests"] for job in jobs)
    total_tokens = sum(job["result"]["usage"]["input_tokens"] for job in jobs)
    assert (total_requests, total_tokens) == tuple(
        a + b for a, b in zip(served(primary), served(fallback), strict=True)
    )

    # Re-uploading a document with one paragraph changed reuses the other vectors.
    changed = document("alpha").replace(b"Usage note 0 of alpha", b"Usage note 0 of ALPHA")
    fourth = ingest(service, "billing", changed, document_id="a.txt")
    assert fourth["result"]["usage"]["vectors_reused"] == fourth["result"]["chunks"] - 1
    assert fourth["result"]["usage"]["embedding_requests"] == 1

    billing = service.get("/v1/indexes/billing").raise_for_status().json()["usage"]
    billed = [first, second, fourth]
    assert billing["jobs"] == 3
    for field in ("embedding_requests", "input_tokens", "vectors_reused"):
        assert billing[field] == sum(job["result"]["usage"][field] for job in billed), field
    assert billing["fallback_requests"] == sum(
        job["result"]["usage"]["endpoints"].get("fallback1", {}).get("requests", 0)
        for job in billed
    )
    assert billing["estimated_cost"] == pytest.approx(billing["input_tokens"] * PRICE / 1e6)
    listed = service.get("/v1/indexes").raise_for_status().json()["indexes"]
    assert {info["name"]: info["usage"]["jobs"] for info in listed} == {"billing": 3, "notes": 1}

    # Per-index metrics: one index by name (metrics_max_indexes=1), the other summed.
    samples = scrape(service)
    tokens = "docingest_index_embedding_tokens_total"
    notes_tokens = third["result"]["usage"]["input_tokens"]
    assert value(samples, tokens, index="billing") == billing["input_tokens"]
    assert value(samples, tokens, index="(other)") == notes_tokens
    assert (
        "docingest_index_embedding_tokens_total",
        frozenset({("index", "notes")}),
    ) not in samples
    assert value(samples, "docingest_embedding_endpoint_requests_total", endpoint="fallback1") >= 1

    # Deleting an index drops its usage, from the totals too.
    assert service.delete("/v1/indexes/billing").status_code == 204
    samples = scrape(service)
    assert value(samples, tokens, index="notes") == notes_tokens
    assert value(samples, tokens, index="(other)") == 0
