"""Jobs with a fallback endpoint: when the primary is down a job completes through the
fallback and says so; when every endpoint is down it is re-queued, then fails with
`embedding_failed` as a lone endpoint's job does. Real Redis, Qdrant in memory, two fake
servers over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from docingest.pipeline.embedders.endpoint_check import PROBE_TEXT
from docingest.pipeline.ingest.runner import RetryJob, run_job
from docingest.pipeline.keys import JobStatus
from docingest.pipeline.services import Services
from tests.pipeline.ingest.test_runner import DOC, INDEX, field_notes, stage
from tests.support.embedding_server import FakeEmbeddingServer
from tests.support.redis_db import TestRedis
from tests.support.services import services_factory


@pytest.fixture
def fallback() -> Iterator[FakeEmbeddingServer]:
    with FakeEmbeddingServer() as server:
        yield server


@pytest.fixture
def services(
    tmp_path: Path,
    redis_db: TestRedis,
    embedding_server: FakeEmbeddingServer,
    fallback: FakeEmbeddingServer,
) -> Iterator[Services]:
    with services_factory(tmp_path, redis_db.prefix, embedding_server) as make:
        yield make(
            openai_fallback_urls=[fallback.base_url],
            embedding_max_attempts=2,
            job_max_attempts=2,
            embedding_max_batch=2,
        )


def test_a_job_completes_through_the_fallback_and_records_it(
    services: Services, embedding_server: FakeEmbeddingServer, fallback: FakeEmbeddingServer
) -> None:
    embedding_server.fail_from(1, {"status": 503})
    job_id = stage(services, field_notes(5, "delta"))
    assert run_job(services, job_id) == "completed"
    job = services.jobs.get(job_id)
    assert job.result is not None
    usage = job.result["usage"]
    assert usage["fallback_used"] is True and set(usage["endpoints"]) == {"fallback1"}
    batches = [r for r in fallback.served if r.inputs != [PROBE_TEXT]]
    assert usage["embedding_requests"] == len(batches)
    assert usage["input_tokens"] == sum(r.prompt_tokens or 0 for r in batches)
    assert services.usage.of(INDEX).fallback_requests == usage["embedding_requests"]
    assert services.store.live_document(INDEX, DOC) is not None


def test_every_endpoint_down_requeues_the_job_then_fails_it_with_embedding_failed(
    services: Services, embedding_server: FakeEmbeddingServer, fallback: FakeEmbeddingServer
) -> None:
    for server in (embedding_server, fallback):
        server.fail_from(1, {"status": 503})
    job_id = stage(services, field_notes(3, "epsilon"))
    with pytest.raises(RetryJob) as retry:
        run_job(services, job_id)
    assert retry.value.cause.code == "embedding_failed"
    assert services.jobs.get(job_id).status is JobStatus.QUEUED

    assert run_job(services, job_id) == "failed: embedding_failed"
    job = services.jobs.get(job_id)
    assert job.status is JobStatus.FAILED and job.error is not None
    assert job.error["message"].startswith("Embedding failed on every endpoint")
    assert "primary" in job.error["message"] and "fallback1" in job.error["message"]
    assert "(gave up after 2 attempts)" in job.error["message"]
    assert services.usage.of(INDEX).jobs == 0
    assert services.store.live_document(INDEX, DOC) is None
