"""The Celery tasks on a real worker (`EmbeddedWorker`, thread pool) over the real Redis broker
(DB 15, a private key prefix), with Qdrant in memory and the fake embedding server."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from celery import Celery

from docingest.pipeline.ingest.sweep import InBroker
from docingest.pipeline.keys import HOUSEKEEPING_QUEUE, INGEST_QUEUE, JobStatus
from docingest.pipeline.services import Services
from docingest.workers import context
from docingest.workers.app import HOUSEKEEPING_TASK, INGEST_TASK, create_celery_app
from docingest.workers.broker import job_ids_in_broker
from docingest.workers.embedded import EmbeddedWorker
from docingest.workers.ticker import HousekeepingTicker
from tests.support.embedding_server import FakeEmbeddingServer
from tests.support.jobs import job_spec, wait_for_status
from tests.support.redis_db import private_redis, unique_prefix
from tests.support.settings import FAKE_DIMENSIONS, service_settings
from tests.support.waiting import wait_until

INDEX = "worker-notes"
HEARTBEAT_TIMEOUT = 1.0
LOST_AFTER = 2.0
"""Long enough that a message delivered just before a sweep is surely still recent in it."""


@dataclass
class Deployment:
    services: Services
    celery: Celery
    fake: FakeEmbeddingServer

    def stage(self, data: bytes, *, write: bool = True) -> str:
        spec = job_spec(INDEX, document_id=f"notes-{time.monotonic_ns()}.txt", size_bytes=len(data))
        if write:
            self.services.staged_path(spec.staged_name).write_bytes(data)
        self.services.jobs.create(spec)
        return spec.job_id

    def send(self, job_id: str) -> None:
        self.celery.send_task(INGEST_TASK, args=[job_id], queue=INGEST_QUEUE)


def notes(tag: str) -> bytes:
    return "\n\n".join(
        f"Worker note {n} ({tag}): the tide table for the harbour changes on Sunday."
        for n in range(4)
    ).encode()


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    """One worker for the module: starting Celery's consumer costs a few seconds."""
    prefix = unique_prefix("worker")
    with FakeEmbeddingServer(dimensions=FAKE_DIMENSIONS) as fake, private_redis(prefix):
        settings = service_settings(
            tmp_path_factory.mktemp("worker"),
            prefix,
            fake,
            heartbeat_interval_seconds=0.2,
            heartbeat_timeout_seconds=HEARTBEAT_TIMEOUT,
            job_retry_base_seconds=1.0,
            job_retry_max_seconds=2.0,
            lost_message_after_seconds=LOST_AFTER,
        )
        services = Services(settings, owns_store=True)
        settings.staging_dir.mkdir(parents=True)
        celery = create_celery_app(settings)
        context.install(services)
        worker = EmbeddedWorker(celery, concurrency=2, hostname=f"test-{prefix}@%h")
        worker.start()
        try:
            yield Deployment(services, celery, fake)
        finally:
            worker.stop(timeout=30)
            context.forget()
            services.close()


def test_an_ingest_task_runs_a_job_to_completion(deployment: Deployment) -> None:
    job_id = deployment.stage(notes("plain"))
    deployment.send(job_id)
    job = wait_for_status(deployment.services.jobs, job_id)
    assert job.status is JobStatus.COMPLETED, job
    assert job.result is not None and job.result["chunks"] >= 1 and job.attempts == 1
    stored = deployment.services.store.live_document(INDEX, job.document_id)
    assert stored is not None and stored.chunks == job.result["chunks"]
    assert not deployment.services.staged_path(job_id).exists()


def test_a_job_that_hits_a_transient_error_is_retried_by_celery(deployment: Deployment) -> None:
    """The upload is not on this worker yet (`dependency_unavailable`, transient): the task
    re-queues the job and Celery runs it again after the countdown, when the file is there."""
    jobs = deployment.services.jobs
    data = notes("late")
    job_id = deployment.stage(data, write=False)
    deployment.send(job_id)

    def requeued() -> bool:
        raw = deployment.services.redis.hget(deployment.services.keys.job(job_id), "last_error")
        return raw is not None and raw != "null"

    wait_until(requeued, what="the first attempt to fail")
    job = jobs.get(job_id)
    assert job.status is JobStatus.QUEUED and job.attempts == 1
    last_error = deployment.services.redis.hget(deployment.services.keys.job(job_id), "last_error")
    assert last_error is not None
    assert json.loads(last_error)["code"] == "dependency_unavailable"

    deployment.services.staged_path(job_id).write_bytes(data)  # the dependency recovers
    job = wait_for_status(jobs, job_id)
    assert job.status is JobStatus.COMPLETED, job
    assert job.attempts == 2, "one retry, by Celery, with the same job"


def test_the_housekeeping_task_revives_a_job_whose_worker_died(deployment: Deployment) -> None:
    jobs = deployment.services.jobs
    job_id = deployment.stage(notes("orphan"))
    claim = jobs.claim(job_id, max_attempts=3, stale_after=HEARTBEAT_TIMEOUT)
    assert claim.outcome == "claimed"  # by a worker that then vanished without a trace
    time.sleep(HEARTBEAT_TIMEOUT + 0.2)

    deployment.celery.send_task(HOUSEKEEPING_TASK, queue=HOUSEKEEPING_QUEUE)
    job = wait_for_status(jobs, job_id)
    assert job.status is JobStatus.COMPLETED, job
    assert job.attempts == 2


def test_a_queued_job_whose_message_was_lost_is_sent_again(deployment: Deployment) -> None:
    """Recorded as queued, but its message never reached the broker (say, a Redis failover
    between the two writes): the sweep finds it in no queue and sends it again."""
    jobs = deployment.services.jobs
    job_id = deployment.stage(notes("lost"))  # recorded, never sent
    time.sleep(LOST_AFTER + 0.2)
    assert jobs.get(job_id).status is JobStatus.QUEUED

    deployment.celery.send_task(HOUSEKEEPING_TASK, queue=HOUSEKEEPING_QUEUE)
    job = wait_for_status(jobs, job_id)
    assert job.status is JobStatus.COMPLETED, job
    assert job.attempts == 1


@contextmanager
def delivered_unacknowledged(
    deployment: Deployment, job_id: str, *, countdown: float | None = None
) -> Iterator[None]:
    """Deliver an ingest message of `job_id` to a kombu consumer that does not acknowledge it
    while the block runs: kombu's Redis transport keeps it in `unacked`, its delivery time in
    `unacked_index`, as for a worker's prefetch (or a worker that lost Redis before it could
    put the message back). The message goes through a queue no worker consumes, since the
    module's worker would take it from the ingest queue first; only where kombu would restore
    it differs. Leaving the block closes the consumer, which restores it to that queue (one
    per job, so a later test does not fetch this message)."""
    queue = f"docingest.test-held.{job_id}"
    deployment.celery.send_task(INGEST_TASK, args=[job_id], queue=queue, countdown=countdown)
    with deployment.celery.connection_for_read() as connection:
        message = connection.default_channel.basic_get(queue, no_ack=False)
        assert message is not None and message.headers["argsrepr"] == repr([job_id])
        yield


def test_a_never_started_job_whose_message_was_delivered_long_ago_is_sent_again(
    deployment: Deployment,
) -> None:
    """A worker fetched the message and never acknowledged it (it lost Redis before it could
    put it back; kombu would restore it only after the 2 h visibility timeout): once the job
    has waited and the delivery is older than `lost_message_after_seconds`, the sweep sends
    the job again and it runs once."""
    jobs = deployment.services.jobs
    job_id = deployment.stage(notes("stranded"))
    with delivered_unacknowledged(deployment, job_id):
        time.sleep(LOST_AFTER + 0.2)
        assert jobs.get(job_id).status is JobStatus.QUEUED
        assert job_ids_in_broker(
            deployment.services, [job_id], overdue_after=LOST_AFTER
        ) == InBroker(present=set(), overdue={job_id})

        deployment.celery.send_task(HOUSEKEEPING_TASK, queue=HOUSEKEEPING_QUEUE)
        job = wait_for_status(jobs, job_id)
    assert job.status is JobStatus.COMPLETED, job
    assert job.attempts == 1


def test_a_message_delivered_recently_or_held_for_a_retry_is_not_sent_again(
    deployment: Deployment,
) -> None:
    """Two jobs have waited past `lost_message_after_seconds`, their messages unacknowledged:
    one fetched just now (a worker about to start it), one fetched long ago but a Celery retry
    of a claimed job, held until its countdown. The sweep sends neither again."""
    jobs = deployment.services.jobs
    fresh, retried = deployment.stage(notes("held")), deployment.stage(notes("backing off"))
    assert jobs.claim(retried, max_attempts=3, stale_after=HEARTBEAT_TIMEOUT).outcome == "claimed"
    assert jobs.requeue(retried, attempt=1)  # a transient error: the task retries later
    with delivered_unacknowledged(deployment, retried, countdown=60):
        time.sleep(LOST_AFTER + 0.2)
        with delivered_unacknowledged(deployment, fresh):
            delivered = time.monotonic()
            report = deployment.celery.tasks[HOUSEKEEPING_TASK]()  # the sweep, in this thread
            assert time.monotonic() - delivered < LOST_AFTER, "the delivery must still be recent"
    assert report["resent"] == []
    assert jobs.get(fresh).status is JobStatus.QUEUED and jobs.get(fresh).attempts == 0
    assert jobs.get(retried).status is JobStatus.QUEUED and jobs.get(retried).attempts == 1


def test_the_broker_lookup_sees_waiting_messages_only_for_their_jobs(tmp_path: Path) -> None:
    prefix = unique_prefix("broker")
    settings = service_settings(tmp_path, prefix, None)
    with private_redis(prefix):
        services = Services(settings, owns_store=False)
        try:
            celery = create_celery_app(settings)  # no worker consumes this prefix
            waiting, lost = job_spec(INDEX).job_id, job_spec(INDEX).job_id
            celery.send_task(INGEST_TASK, args=[waiting], queue=INGEST_QUEUE)
            found = job_ids_in_broker(services, [waiting, lost], overdue_after=LOST_AFTER)
            assert found == InBroker(present={waiting}, overdue=set())
        finally:
            services.close()


def _queued_tasks(services: Services, queue: str) -> list[str]:
    """Task names of the messages waiting in `queue` (the Redis transport's list)."""
    key = f"{services.settings.redis_key_prefix}celery:{queue}"
    messages = services.redis.lrange(key, 0, -1)
    return [json.loads(message)["headers"]["task"] for message in messages]


def test_two_tickers_send_one_sweep_per_interval(tmp_path: Path) -> None:
    prefix = unique_prefix("ticker")
    interval = 0.5
    settings = service_settings(tmp_path, prefix, None, housekeeping_interval_seconds=interval)
    with private_redis(prefix):
        first, second = Services(settings, owns_store=False), Services(settings, owns_store=False)
        try:
            celery = create_celery_app(settings)
            tickers = [HousekeepingTicker(celery, first), HousekeepingTicker(celery, second)]
            assert [ticker.tick() for ticker in tickers] == [True, False]
            assert [ticker.tick() for ticker in reversed(tickers)] == [False, False]
            assert _queued_tasks(first, HOUSEKEEPING_QUEUE) == [HOUSEKEEPING_TASK]

            time.sleep(interval + 0.1)
            assert sorted(ticker.tick() for ticker in reversed(tickers)) == [False, True]
            assert _queued_tasks(first, HOUSEKEEPING_QUEUE) == [HOUSEKEEPING_TASK] * 2
            assert _queued_tasks(first, INGEST_QUEUE) == []
        finally:
            first.close()
            second.close()
