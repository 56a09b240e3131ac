"""Each index's cumulative usage in the real Redis: added when a job completes, once per job
id however often its completion is replayed, summed across indexes, forgotten with the index."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import pytest

from docingest.pipeline.embedders.usage import EndpointUsage, JobUsage
from docingest.pipeline.jobs.state import JobStore
from docingest.pipeline.jobs.usage import IndexUsage, UsageLedger
from docingest.pipeline.keys import JobStatus, Keys
from tests.support.jobs import job_spec
from tests.support.redis_db import TestRedis

FRESH = 60.0


@pytest.fixture
def jobs(redis_db: TestRedis) -> JobStore:
    return JobStore(redis_db.client, keys=Keys(redis_db.prefix), ttl_seconds=3600)


@pytest.fixture
def ledger(redis_db: TestRedis) -> UsageLedger:
    return UsageLedger(redis_db.client, keys=Keys(redis_db.prefix))


def result_with(
    requests: int, tokens: int, *, reused: int = 0, fallback: int = 0
) -> dict[str, Any]:
    endpoints = {"primary": EndpointUsage(requests - fallback, tokens)}
    if fallback:
        endpoints["fallback1"] = EndpointUsage(fallback, 0)
    usage = JobUsage(
        embedding_requests=requests,
        input_tokens=tokens,
        vectors_reused=reused,
        fallback_used=bool(fallback),
        endpoints=endpoints,
    )
    return {"document_id": "d", "chunks": 3, "usage": asdict(usage)}


def run_to_completion(jobs: JobStore, index: str, result: dict[str, Any]) -> str:
    job_id = jobs.create(job_spec(index)).job_id
    attempt = jobs.claim(job_id, max_attempts=3, stale_after=FRESH).attempt
    assert jobs.complete(job_id, attempt, result, index=index)
    return job_id


def test_a_completed_job_adds_its_usage_to_its_index(jobs: JobStore, ledger: UsageLedger) -> None:
    run_to_completion(jobs, "a", result_with(2, 300, reused=4, fallback=1))
    run_to_completion(jobs, "a", result_with(1, 50))
    run_to_completion(jobs, "b", result_with(5, 900))
    assert ledger.of("a") == IndexUsage(
        jobs=2, embedding_requests=3, input_tokens=350, vectors_reused=4, fallback_requests=1
    )
    assert ledger.of("never-used") == IndexUsage()
    assert ledger.of("a").priced(0.02).estimated_cost == pytest.approx(350 * 0.02 / 1e6)
    named, other = ledger.top(1)
    assert list(named) == ["b"] and other.input_tokens == 350 and other.jobs == 2
    named, other = ledger.top(0)
    assert named == {} and other.input_tokens == 1250


def test_a_replayed_completion_is_counted_once(
    jobs: JobStore, ledger: UsageLedger, redis_db: TestRedis
) -> None:
    """A completion sent twice (a redelivered task, a client retrying the script after a
    lost reply) adds the job's usage once."""
    job_id = run_to_completion(jobs, "a", result_with(2, 100))
    key = Keys(redis_db.prefix).job(job_id)
    attempt = int(redis_db.client.hget(key, "attempts"))  # type: ignore[arg-type]
    assert not jobs.complete(job_id, attempt, result_with(2, 100), index="a")  # refused
    # Even a completion that gets past the status check (the job put back to processing
    # under the same attempt) adds nothing: the job was counted already.
    redis_db.client.hset(key, "status", JobStatus.PROCESSING.value)
    assert jobs.complete(job_id, attempt, result_with(2, 100), index="a")
    assert ledger.of("a").jobs == 1 and ledger.of("a").input_tokens == 100


def test_a_failed_job_retried_to_completion_counts_once(
    jobs: JobStore, ledger: UsageLedger
) -> None:
    job_id = jobs.create(job_spec("a")).job_id
    attempt = jobs.claim(job_id, max_attempts=3, stale_after=FRESH).attempt
    jobs.fail(job_id, attempt, {"code": "embedding_failed", "message": "down"})
    assert ledger.of("a") == IndexUsage()
    jobs.retry(job_id)
    attempt = jobs.claim(job_id, max_attempts=3, stale_after=FRESH).attempt
    assert jobs.complete(job_id, attempt, result_with(1, 10), index="a")
    assert ledger.of("a").jobs == 1 and ledger.of("a").input_tokens == 10
    assert jobs.get(job_id).result is not None
    assert jobs.get(job_id).result["usage"]["input_tokens"] == 10  # type: ignore[index]


def test_forgetting_an_index_takes_its_usage_out_of_the_totals(
    jobs: JobStore, ledger: UsageLedger
) -> None:
    run_to_completion(jobs, "a", result_with(2, 100))
    run_to_completion(jobs, "b", result_with(1, 40))
    ledger.forget("a")
    assert ledger.of("a") == IndexUsage()
    named, other = ledger.top(5)
    assert list(named) == ["b"] and other == IndexUsage()
    _, everything = ledger.top(0)
    assert everything.input_tokens == 40 and everything.jobs == 1
