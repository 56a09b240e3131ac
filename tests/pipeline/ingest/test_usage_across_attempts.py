"""A job's usage counts every attempt: one that embedded part of a document and then met a
transient error is re-queued carrying what it used, and the attempt that completes the job
adds its own. Real Redis, Qdrant in memory, the fake server over real HTTP."""

from __future__ import annotations

import pytest

from docingest.pipeline.ingest.runner import RetryJob, run_job
from docingest.pipeline.keys import JobStatus
from tests.pipeline.ingest.test_runner import INDEX, chunk_count, field_notes, stage
from tests.pipeline.ingest.test_runner import make_services as make_services  # the fixture
from tests.support.embedding_server import FakeEmbeddingServer
from tests.support.services import MakeServices


def test_the_usage_of_a_requeued_attempt_is_carried_to_the_one_that_completes(
    make_services: MakeServices, embedding_server: FakeEmbeddingServer
) -> None:
    services = make_services(
        indexing_window_chunks=2,
        embedding_max_batch=2,
        embedding_concurrency=1,
        embedding_max_attempts=1,
        job_max_attempts=2,
        embedding_price_per_million_tokens={"test-embed": 1.0},
    )
    data = field_notes(6, "zeta")
    assert chunk_count(services, data) == 6  # three windows of two, one request each
    job_id = stage(services, data)
    embedding_server.fail_from(3, {"status": 503})  # the third window's request
    with pytest.raises(RetryJob):
        run_job(services, job_id)
    first = list(embedding_server.served)
    assert len(first) == 2
    job = services.jobs.get(job_id)
    assert job.status is JobStatus.QUEUED and job.result is None
    assert services.usage.of(INDEX).jobs == 0

    embedding_server.recover()
    assert run_job(services, job_id) == "completed"
    served = embedding_server.served
    assert len(served) > len(first)  # the second attempt embedded the rest
    usage = services.jobs.get(job_id).result["usage"]  # type: ignore[index]
    assert usage["embedding_requests"] == len(served)  # both attempts' requests
    assert usage["input_tokens"] == sum(r.prompt_tokens or 0 for r in served)
    assert usage["vectors_reused"] == 6 - sum(len(r.inputs) for r in served[len(first) :])
    assert usage["estimated_cost"] == pytest.approx(usage["input_tokens"] / 1e6)
    ledger = services.usage.of(INDEX)
    assert (ledger.jobs, ledger.embedding_requests, ledger.input_tokens) == (
        1,
        usage["embedding_requests"],
        usage["input_tokens"],
    )
