"""A store server that does not answer, met by a job before its claim
(`docingest.pipeline.ingest.store_wait`): the job waits, queued and without spending attempts,
while a real PostgreSQL of the test's own is stopped, and completes once it is back; past its
wait it runs its attempts and fails with `dependency_unavailable`; a finished job does not
wait. The processes (`docingest api` and `docingest worker`) meeting the same outage are in
`test_store_down_processes.py`.

In process: real Redis (DB 15), the fake embedding server over HTTP, `run_job` as the Celery
task calls it, the task's retry message carrying what `RetryJob` says."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from docingest.pipeline.errors import DependencyUnavailable
from docingest.pipeline.ingest.runner import RetryJob, run_job
from docingest.pipeline.ingest.store_wait import STORE_CHECK_MAX_SECONDS, StoreWait
from docingest.pipeline.keys import JobStatus
from docingest.pipeline.services import Services
from tests.support.embedding_server import FakeEmbeddingServer
from tests.support.engines import schema_for, stop_postgres, stoppable_postgres
from tests.support.jobs import job_spec
from tests.support.redis_db import TestRedis
from tests.support.services import MakeServices, services_factory

if TYPE_CHECKING:
    from pgserver import PostgresServer

INDEX = "waits"
TEXT = b"Tide tables for the northern harbour.\n\nThe lamp is lit at dusk." * 3


@pytest.fixture
def own_server() -> Iterator[PostgresServer]:
    with stoppable_postgres() as server:
        yield server


@pytest.fixture
def make_services(
    tmp_path: Path, embedding_server: FakeEmbeddingServer, redis_db: TestRedis
) -> Iterator[MakeServices]:
    with services_factory(tmp_path, redis_db.prefix, embedding_server) as make:
        yield make


def on_postgres(make: MakeServices, url: str, tmp_path: Path, **more: object) -> Services:
    return make(
        qdrant_url=None,
        database_url=url,
        database_schema=schema_for(tmp_path),
        database_pool_timeout_seconds=2,
        **more,
    )


def stage(services: Services, document_id: str = "tides.txt") -> str:
    """What the API does for an upload: stage the bytes, record a queued job."""
    spec = job_spec(INDEX, document_id=document_id, size_bytes=len(TEXT))
    services.staged_path(spec.staged_name).write_bytes(TEXT)
    services.jobs.create(spec)
    return spec.job_id


def waits(services: Services, job_id: str, wait: StoreWait | None) -> RetryJob:
    with pytest.raises(RetryJob) as raised:
        run_job(services, job_id, store_wait=wait)
    return raised.value


def test_a_job_waits_for_postgres_without_spending_attempts_and_completes_once_back(
    own_server: PostgresServer, make_services: MakeServices, tmp_path: Path
) -> None:
    url = own_server.get_uri()
    services = on_postgres(make_services, url, tmp_path, job_store_wait_seconds=600)
    job_id = stage(services)
    stop_postgres(own_server)

    first = waits(services, job_id, None)
    assert first.cause.code == "dependency_unavailable"
    assert "is unreachable" in first.cause.message
    assert first.store_wait is not None and first.store_wait.checks == 1
    assert 0 < first.countdown <= STORE_CHECK_MAX_SECONDS
    assert str(first).startswith("waiting for the store (0s so far), next check in ")
    time.sleep(1.1)  # past `STORE_REOPEN_SECONDS`: the second check asks the server again
    second = waits(services, job_id, first.store_wait)
    assert second.store_wait == StoreWait(since=first.store_wait.since, checks=2)
    job = services.jobs.get(job_id)
    assert (job.status, job.attempts) == (JobStatus.QUEUED, 0)  # nothing spent, nothing begun

    own_server.ensure_postgres_running()
    # as a worker does: a check within `STORE_REOPEN_SECONDS` of the last failed one answers
    # that failure again, so the job may wait once more before it runs
    wait, deadline, outcome = second.store_wait, time.monotonic() + 60, None
    while outcome is None:
        try:
            outcome = run_job(services, job_id, store_wait=wait)
        except RetryJob as retry:
            assert time.monotonic() < deadline, "the job never ran once the store was back"
            assert retry.store_wait is not None and retry.store_wait.since == wait.since
            wait = retry.store_wait
            time.sleep(retry.countdown)
    assert outcome == "completed"
    job = services.jobs.get(job_id)
    assert job.attempts == 1 and job.result is not None
    documents = services.store.list_documents(INDEX)
    assert [(d.document_id, d.version) for d in documents] == [("tides.txt", 1)]
    assert services.store.count_points(INDEX) == job.result["chunks"]


def test_past_its_wait_a_job_spends_its_attempts_and_fails_with_a_clear_error(
    own_server: PostgresServer, make_services: MakeServices, tmp_path: Path
) -> None:
    url = own_server.get_uri().replace("postgres:@", "postgres:s3cret@")
    services = on_postgres(
        make_services, url, tmp_path, job_store_wait_seconds=5, job_max_attempts=2
    )
    job_id = stage(services)
    stop_postgres(own_server)
    spent = StoreWait(since=time.time() - 6, checks=4)  # what the last retry message carried

    retry = waits(services, job_id, spent)  # claimed: attempt 1 meets the store down
    assert retry.store_wait is not None  # the spent wait goes on: attempt 2 does not wait again
    assert retry.store_wait.since == spent.since
    assert services.jobs.get(job_id).attempts == 1
    outcome = run_job(services, job_id, store_wait=retry.store_wait)
    assert outcome == "failed: dependency_unavailable"
    job = services.jobs.get(job_id)
    assert job.status is JobStatus.FAILED and job.attempts == 2 and job.error is not None
    message = job.error["message"]
    assert message.startswith("PostgreSQL at ") and "is unreachable" in message
    assert message.endswith("(gave up after 2 attempts)") and "s3cret" not in message
    assert services.staged_path(job_id).is_file()  # kept: the job can be retried later


def test_a_job_cancelled_while_it_waited_does_not_wait_again(
    own_server: PostgresServer, make_services: MakeServices, tmp_path: Path
) -> None:
    services = on_postgres(make_services, own_server.get_uri(), tmp_path)
    job_id = stage(services)
    stop_postgres(own_server)
    retry = waits(services, job_id, None)
    services.jobs.cancel(job_id)
    assert run_job(services, job_id, store_wait=retry.store_wait) == "finished"
    assert services.jobs.get(job_id).status is JobStatus.CANCELLED


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # nothing listens once the socket is closed


def test_a_job_waits_for_an_unreachable_qdrant_server_alike(make_services: MakeServices) -> None:
    services = make_services(qdrant_url=f"http://127.0.0.1:{closed_port()}")
    job_id = stage(services)
    retry = waits(services, job_id, None)
    assert isinstance(retry.cause, DependencyUnavailable)
    assert retry.cause.message.startswith("Qdrant at http://127.0.0.1:")
    assert retry.store_wait is not None and retry.store_wait.checks == 1
    assert services.jobs.get(job_id).attempts == 0
