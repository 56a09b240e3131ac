"""Crash safety with real processes: `docingest api` and `docingest worker` subprocesses (local
mode, one data directory) are killed, stopped and cut off from Redis mid-job, and every job must
still end exactly once, with the store holding each document once.

Embeddings come from the fake server of this process, so a test decides how long a job stays in
the embedding stage. Every worker runs the housekeeping sweep (every 2 s) and a job's heartbeat
goes stale after 5 s (tests/support/docingest_service.py), so a lost attempt is noticed within
seconds.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from docingest.pipeline.ingest.runner import RetryJob, run_job
from docingest.pipeline.keys import INGEST_QUEUE
from docingest.pipeline.search import SearchRequest, resolve_target, search
from docingest.pipeline.services import Services
from docingest.pipeline.settings import Settings
from docingest.pipeline.store.engine import open_engine
from docingest.pipeline.store.fencing import KEEP_ALIVE_TIMEOUT
from docingest.workers.app import INGEST_TASK, create_celery_app
from tests.support.crash import (
    Deployment,
    FailingWrites,
    PrivateRedis,
    ServicesWithStore,
    alive,
    assert_stored_once,
    children,
    deployment_env,
    journal,
    kill,
    notes,
    start_deployment,
    wait_for_job_state,
)
from tests.support.docingest_service import ServiceEnv
from tests.support.embedding_server import FakeEmbeddingServer
from tests.support.http_client import Json
from tests.support.jobs import job_spec
from tests.support.paths import EXAMPLES_DIR
from tests.support.redis_db import TEST_REDIS_URL, private_redis, purge_keys, unique_prefix
from tests.support.settings import FAKE_DIMENSIONS, service_settings
from tests.support.waiting import wait_until

README = EXAMPLES_DIR / "docling-README.md"
RFC = EXAMPLES_DIR / "rfc6455-websocket.txt"
"""638 chunks of 300 characters: three `write_chunks` calls of at most 256 points."""
RECOVERY_TIMEOUT = 120.0
"""A lost attempt is noticed after the 5 s heartbeat timeout and a sweep (every 2 s), then the
job runs again; generous for a loaded 2-core machine."""


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeEmbeddingServer]:
    with FakeEmbeddingServer(dimensions=FAKE_DIMENSIONS) as server:
        yield server


@pytest.fixture(scope="module")
def service(
    tmp_path_factory: pytest.TempPathFactory, fake: FakeEmbeddingServer
) -> Iterator[Deployment]:
    """`docingest api` for the module: one data directory and Redis prefix, an index per test."""
    env = ServiceEnv(data_dir=tmp_path_factory.mktemp("crash"), extra=deployment_env(fake))
    service = start_deployment(env)
    try:
        yield service
    finally:
        service.close()
        purge_keys(env.key_prefix)


@pytest.fixture
def deployment(service: Deployment, fake: FakeEmbeddingServer) -> Iterator[Deployment]:
    """The module's API and the workers this test starts (all killed at its end)."""
    fake.clear()
    fake.latency = 0.0
    deployment = service.for_test()
    try:
        yield deployment
    finally:
        deployment.kill_workers()


def runs(deployment: Deployment, job_id: str, outcome: str) -> int:
    """How many runs of the job ended with `outcome` (each run logs `job <id>: <outcome>`)."""
    return sum(process.log().count(f"job {job_id}: {outcome}\n") for process in deployment.workers)


def embedding(job: Json) -> bool:
    return job["stage"] == "embedding" and job["chunks_embedded"] > 0


def test_killing_the_pool_child_mid_embedding_completes_the_job_once(
    deployment: Deployment, fake: FakeEmbeddingServer
) -> None:
    index = "pool-child"
    worker = deployment.start_worker("--pool", "prefork", "--concurrency", "1")
    fake.latency = 0.25  # 26 chunks, two a request, two requests at once: ~2 s of embedding
    job_id = deployment.api.submit(index, README)
    assert wait_for_job_state(deployment, job_id, embedding)["attempts"] == 1
    pool = children(worker.popen.pid)
    assert len(pool) == 1, pool
    kill(pool[0])

    job = deployment.api.wait(job_id, timeout=RECOVERY_TIMEOUT)
    assert job["status"] == "completed", (job, deployment.logs())
    assert job["attempts"] >= 2 and job["error"] is None
    assert job["chunks_total"] == job["chunks_done"] == job["result"]["chunks"]
    assert runs(deployment, job_id, "completed") == 1
    assert deployment.finished_counts() == {"completed": 1, "failed": 0, "cancelled": 0}
    # The worker outlived its child: the pool replaced it, and the same worker finished the job.
    assert worker.popen.poll() is None
    replacement = children(worker.popen.pid)
    assert len(replacement) == 1 and replacement != pool and not alive(pool[0])

    deployment.stop_workers()
    with deployment.open_store() as store:
        assert_stored_once(store, index, job)
        assert store.count_points(index) == job["result"]["chunks"]


def test_sigterm_lets_the_running_job_finish_and_leaves_the_queue_to_the_next_worker(
    deployment: Deployment, fake: FakeEmbeddingServer
) -> None:
    """Warm shutdown: the worker stops taking jobs, finishes the one it runs (same attempt),
    and exits 0; the job waiting behind it is untouched and runs on the next worker."""
    index = "warm"
    first = deployment.start_worker("--concurrency", "1")
    fake.latency = 0.25
    running_id = deployment.api.submit(index, README)
    waiting_id = deployment.api.submit(index, notes(1), filename="waiting.txt")
    wait_for_job_state(deployment, running_id, embedding)
    first.popen.send_signal(signal.SIGTERM)

    assert first.popen.wait(RECOVERY_TIMEOUT) == 0, first.log()[-3000:]
    finished = deployment.api.job(running_id)
    assert finished["status"] == "completed", (finished, first.log()[-3000:])
    assert finished["attempts"] == 1, "finished by the attempt that was running, not handed back"
    waiting = deployment.api.job(waiting_id)
    assert (waiting["status"], waiting["attempts"]) == ("queued", 0)

    fake.latency = 0.0
    deployment.start_worker()
    later = deployment.api.wait(waiting_id, timeout=RECOVERY_TIMEOUT)
    assert (later["status"], later["attempts"]) == ("completed", 1), later
    assert deployment.api.job(running_id) == finished
    assert runs(deployment, running_id, "completed") == runs(deployment, waiting_id, "completed")
    assert runs(deployment, running_id, "completed") == 1
    assert deployment.finished_counts() == {"completed": 2, "failed": 0, "cancelled": 0}

    deployment.stop_workers()
    with deployment.open_store() as store:
        assert_stored_once(store, index, finished)
        assert_stored_once(store, index, later)


def test_a_document_that_kills_every_worker_fails_with_timeout_after_its_attempts(
    deployment: Deployment, fake: FakeEmbeddingServer
) -> None:
    """A poison document: each attempt's worker is killed (kill -9 of the whole worker) and a
    fresh one started. After `job_max_attempts` (2) the claim fails the job instead of running
    it a third time, and the worker goes on to the next job."""
    index = "poison"
    limits = {"DOCINGEST_JOB_MAX_ATTEMPTS": "2"}
    fake.latency = 0.25
    job_id = deployment.api.submit(index, README)
    for attempt in (1, 2):
        worker = deployment.start_worker(**limits)

        def running(job: Json, attempt: int = attempt) -> bool:
            return bool(job["attempts"] == attempt and embedding(job))

        job = wait_for_job_state(deployment, job_id, running)
        assert job["status"] == "processing"
        assert worker.stop(signal.SIGKILL) == -signal.SIGKILL

    fake.latency = 0.0
    survivor = deployment.start_worker(**limits)
    job = deployment.api.wait(job_id, timeout=RECOVERY_TIMEOUT)
    assert (job["status"], job["attempts"], job["result"]) == ("failed", 2, None), job
    assert job["error"]["code"] == "timeout"
    assert "each of its 2 attempts" in job["error"]["message"]
    assert runs(deployment, job_id, "exhausted") == 1

    healthy = deployment.api.wait(deployment.api.submit(index, notes(2), filename="next.txt"))
    assert healthy["status"] == "completed" and healthy["attempts"] == 1
    assert survivor.popen.poll() is None
    assert deployment.finished_counts() == {"completed": 1, "failed": 1, "cancelled": 0}
    assert deployment.api.job(job_id)["attempts"] == 2, "never claimed again"

    deployment.stop_workers()
    with deployment.open_store() as store:
        assert store.count_points(index, README.name) == 0, "no points of the killed attempts"
        assert_stored_once(store, index, healthy)


def test_a_duplicate_delivery_of_a_running_or_finished_job_does_nothing(
    deployment: Deployment, fake: FakeEmbeddingServer
) -> None:
    """The same ingest task published again while the job runs (a redelivery, celery#5935) and
    after it finished: both are no-ops; the document is embedded and stored once."""
    index = "dupes"
    settings = Settings(redis_url=TEST_REDIS_URL, redis_key_prefix=deployment.env.key_prefix)
    celery = create_celery_app(settings)
    try:
        deployment.start_worker()  # two threads: the duplicate is taken while the job runs
        fake.latency = 0.4  # the duplicate arrives well before the job ends
        job_id = deployment.api.submit(index, README)
        wait_for_job_state(deployment, job_id, embedding)
        celery.send_task(INGEST_TASK, args=[job_id], queue=INGEST_QUEUE)
        wait_until(
            lambda: runs(deployment, job_id, "busy"), timeout=30, what="the duplicate refused"
        )
        job = deployment.api.wait(job_id)
        celery.send_task(INGEST_TASK, args=[job_id], queue=INGEST_QUEUE)
        wait_until(
            lambda: runs(deployment, job_id, "finished"), timeout=30, what="the late copy refused"
        )
    finally:
        celery.close()

    assert job["status"] == "completed" and job["attempts"] == 1, job
    assert deployment.api.job(job_id) == job
    assert runs(deployment, job_id, "completed") == 1
    assert (runs(deployment, job_id, "busy"), runs(deployment, job_id, "finished")) == (1, 1)
    embedded = sum(len(request.inputs) for request in fake.requests)
    assert embedded == job["result"]["chunks"], "every chunk embedded exactly once"
    assert deployment.finished_counts() == {"completed": 1, "failed": 0, "cancelled": 0}

    deployment.stop_workers()
    with deployment.open_store() as store:
        assert_stored_once(store, index, job)


def test_a_crash_while_storing_does_not_block_the_document_behind_its_lock(
    deployment: Deployment, fake: FakeEmbeddingServer
) -> None:
    """kill -9 after some `write_chunks` calls, with the document's store lock held: the next
    attempt gets the lock soon after the dead holder stops renewing it (not after the old
    10-minute TTL), reuses the vectors of the staged points, and stores the document once."""
    index = "storing"
    # staged window by window (not held for one live write at the end), so a kill lands mid-write
    big_batches = {"DOCINGEST_EMBEDDING_MAX_BATCH": "64", "DOCINGEST_LIVE_WRITE_CHUNKS": "0"}
    worker = deployment.start_worker(**big_batches)
    job_id = deployment.api.submit(index, RFC)
    mid_write = wait_for_job_state(
        deployment,
        job_id,
        # Windows are stored while later ones are embedded: "embedding" or "storing".
        lambda job: 0 < job["chunks_done"] < job["chunks_total"],
        timeout=RECOVERY_TIMEOUT,
    )
    worker.stop(signal.SIGKILL)
    killed_at = time.monotonic()
    redis = deployment.redis()
    try:
        lock_ttl = redis.pttl(f"{deployment.env.key_prefix}lock:{index}:{RFC.name}") / 1000
    finally:
        redis.close()
    assert 0 < lock_ttl <= KEEP_ALIVE_TIMEOUT, "the dead worker held the (kept-alive) lock"

    deployment.start_worker(**big_batches)
    job = deployment.api.wait(job_id, timeout=RECOVERY_TIMEOUT)
    recovered_after = time.monotonic() - killed_at
    assert job["status"] == "completed", (job, deployment.logs())
    assert job["attempts"] == 2
    assert job["result"]["chunks_reused"] >= mid_write["chunks_done"], "staged vectors reused"
    assert runs(deployment, job_id, "completed") == 1
    print(f"lock TTL at the kill {lock_ttl:.1f} s; completed {recovered_after:.1f} s after")  # noqa: T201

    deployment.stop_workers()
    with deployment.open_store() as store:
        assert_stored_once(store, index, job)


def test_workers_and_the_api_reconnect_after_redis_restarts_with_a_backlog(
    tmp_path: Path, fake: FakeEmbeddingServer
) -> None:
    """Ten uploads, then Redis stops (SIGTERM: it writes its append-only file) while they are
    queued or running, and starts again on the same port and directory a few seconds later:
    every job completes once and every document is stored once."""
    fake.clear()
    fake.latency = 0.05  # the running jobs reach their store step while Redis is down
    redis_server = PrivateRedis(tmp_path / "redis-home")
    redis_server.start()
    env = ServiceEnv(
        data_dir=tmp_path / "service",
        extra=deployment_env(fake)
        | {
            "DOCINGEST_REDIS_URL": redis_server.url,
            # A message the worker had fetched but not started when Redis stopped stays in
            # kombu's `unacked` hash (it could not be put back): the sweep sends its job again
            # once the delivery is this old, well within RECOVERY_TIMEOUT (default 300 s).
            "DOCINGEST_LOST_MESSAGE_AFTER_SECONDS": "15",
        },
    )
    deployment = start_deployment(env)
    try:
        index = "backlog"
        worker = deployment.start_worker()
        job_ids = [
            deployment.api.submit(index, notes(n), filename=f"note-{n}.txt") for n in range(10)
        ]
        wait_for_job_state(deployment, job_ids[0], lambda job: job["status"] == "processing")
        before = [deployment.api.job(job_id)["status"] for job_id in job_ids]
        redis_server.stop()
        assert deployment.api.http.get(f"/v1/jobs/{job_ids[0]}").status_code == 503
        time.sleep(5)
        redis_server.start()

        jobs = [deployment.api.wait(job_id, timeout=RECOVERY_TIMEOUT) for job_id in job_ids]
        assert [job["status"] for job in jobs] == ["completed"] * 10, (before, jobs)
        assert "queued" in before, "Redis stopped with a backlog"
        attempts = sorted(job["attempts"] for job in jobs)
        print(f"statuses when Redis stopped {before}; attempts {attempts}")  # noqa: T201
        assert worker.popen.poll() is None, "the worker reconnected rather than exited"
        for job_id in job_ids:
            assert runs(deployment, job_id, "completed") == 1
        assert deployment.finished_counts() == {"completed": 10, "failed": 0, "cancelled": 0}

        deployment.stop_workers()
        with deployment.open_store() as store:
            for job in jobs:
                assert_stored_once(store, index, job)
            assert store.count_points(index) == sum(job["result"]["chunks"] for job in jobs)
    finally:
        deployment.close()
        redis_server.stop()


def stage_job(services: Services, index: str, document_id: str, data: bytes) -> str:
    """Stage `data` as an upload of `document_id` and record its job; return the job id."""
    spec = job_spec(index, document_id=document_id, size_bytes=len(data))
    services.staged_path(spec.staged_name).write_bytes(data)
    services.jobs.create(spec)
    return spec.job_id


@pytest.mark.parametrize("qdrant_url", [None, ":memory:"], ids=["edge", "qdrant-client"])
def test_a_store_failing_mid_write_backs_off_then_completes_and_keeps_the_old_version(
    tmp_path: Path, fake: FakeEmbeddingServer, qdrant_url: str | None
) -> None:
    """In process: real Redis, each store engine, the fake embedder, and the real store with
    fault injection: its next two `write_chunks` calls write half their points and raise
    `DependencyUnavailable`. Each run re-queues the job with a growing backoff (`RetryJob`, as
    the Celery task retries it); the third completes. Until then the previous version stays
    live, whole and searchable, and the half-written new points stay invisible. (Staged
    writes: `live_write_chunks` 0; the next test has the embedded store's live write.)"""
    fake.clear()
    fake.latency = 0.0
    prefix = unique_prefix("crash-store")
    settings = service_settings(
        tmp_path,
        prefix,
        fake,
        job_max_attempts=3,
        isolate_extraction=False,
        qdrant_url=qdrant_url,
        live_write_chunks=0,
    )
    settings.staging_dir.mkdir(parents=True)
    store = FailingWrites(open_engine(settings))
    services = ServicesWithStore(settings, store)
    index, document_id = "harbour", "journal.txt"

    def stage(data: bytes) -> str:
        return stage_job(services, index, document_id, data)

    def hits(word: str) -> list[tuple[str, int]]:
        services.ensure_index(index)
        target = resolve_target(store, index, embedder_for=services.embedder_for)
        request = SearchRequest(query=word, mode="keyword", top_k=100)
        found = search(store, target, request).results
        return sorted((hit.document_id, hit.chunk_index) for hit in found)

    with private_redis(prefix):
        try:
            assert run_job(services, stage(journal("lighthouse", 8))) == "completed"
            old = store.live_document(index, document_id)
            assert old is not None and old.version == 1
            old_hits = hits("lighthouse")
            assert len(old_hits) == old.chunks

            job_id = stage(journal("windmill", 16))
            store.failures = 2
            delays = []
            for attempt in (1, 2):
                with pytest.raises(RetryJob) as caught:
                    run_job(services, job_id)
                assert caught.value.cause.code == "dependency_unavailable"
                delays.append(caught.value.countdown)
                job = services.jobs.get(job_id)
                assert (job.status, job.attempts, job.error) == ("queued", attempt, None)
                # The old version was not touched; the new points are staged, not searchable.
                assert store.live_document(index, document_id) == old
                assert store.count_points(index, document_id, version=1, state="live") == old.chunks
                assert hits("lighthouse") == old_hits and hits("windmill") == []
                staged = store.count_points(index, document_id, version=2)
                assert 0 < staged == store.count_points(index, document_id) - old.chunks
            assert 0 < delays[0] <= delays[1], "the backoff grows"

            assert run_job(services, job_id) == "completed"
            job = services.jobs.get(job_id)
            assert (job.status, job.attempts) == ("completed", 3)
            assert job.result is not None and job.result["version"] == 2
            assert job.result["chunks_reused"] >= job.result["chunks"] // 2, "staged vectors reused"
            new = store.live_document(index, document_id)
            assert new is not None and new.version == 2 and new.chunks == job.result["chunks"]
            assert store.count_points(index, document_id) == new.chunks, "old version retired"
            assert store.count_points(index, document_id, state="live") == new.chunks
            assert hits("lighthouse") == [] and len(hits("windmill")) == new.chunks
            assert services.jobs.counts()["completed"] == 2
        finally:
            services.close()
            store.close()


def test_a_failing_live_write_backs_off_and_leaves_nothing_of_the_new_version(
    tmp_path: Path, fake: FakeEmbeddingServer
) -> None:
    """The embedded store writes a small document once, live, when it ends (`write_live`, one
    update): the fault-injected store fails its next two such writes, each job run backs off,
    and meanwhile the index holds the old version whole and not one point of the new one
    (nothing was staged, so nothing is left over); the third run completes and retires the
    old version."""
    fake.clear()
    fake.latency = 0.0
    prefix = unique_prefix("crash-live")
    settings = service_settings(
        tmp_path, prefix, fake, job_max_attempts=3, isolate_extraction=False, qdrant_url=None
    )
    settings.staging_dir.mkdir(parents=True)
    store = FailingWrites(open_engine(settings))
    assert store.writes_live
    services = ServicesWithStore(settings, store)
    index, document_id = "harbour", "journal.txt"

    def stage(data: bytes) -> str:
        return stage_job(services, index, document_id, data)

    with private_redis(prefix):
        try:
            assert run_job(services, stage(journal("lighthouse", 8))) == "completed"
            old = store.live_document(index, document_id)
            assert old is not None
            job_id = stage(journal("windmill", 16))
            store.failures = 2
            for attempt in (1, 2):
                with pytest.raises(RetryJob) as caught:
                    run_job(services, job_id)
                assert caught.value.cause.code == "dependency_unavailable"
                job = services.jobs.get(job_id)
                assert (job.status, job.attempts) == ("queued", attempt)
                assert store.live_document(index, document_id) == old
                assert store.count_points(index, document_id) == old.chunks, "none of v2"
            assert run_job(services, job_id) == "completed"
            new = store.live_document(index, document_id)
            assert new is not None and new.version == old.version + 1
            assert store.count_points(index, document_id) == new.chunks, "old version retired"
            assert store.count_points(index, document_id, state="live") == new.chunks
        finally:
            services.close()
            store.close()
