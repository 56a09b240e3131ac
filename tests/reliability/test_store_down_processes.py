"""PostgreSQL down at start and mid-job, met by real processes: `docingest api` and a
`docingest worker` (Celery, a thread pool) against a private PostgreSQL of the test's own that
the test stops (`pg_ctl stop -m immediate`, as a crash would) and starts again, with Redis on
DB 15 and embeddings from the fake OpenAI-compatible server (so a job stays in its embedding
stage as long as the fake's `latency` says).

What must hold: both processes start while the store is down; `/healthz` answers, `/readyz`
answers 503 naming the store and why, uploads and searches answer 503
`dependency_unavailable` (nothing staged is left behind); queued jobs wait without spending
attempts and complete once the store is back; a job whose store went away mid-run completes
once it is back, its document stored once at the new version (nothing of the old one, nothing
staged); a store that never comes back fails the job with `dependency_unavailable` after its
wait and its attempts, and the job can be retried once the store is back.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest
from pydantic import SecretStr

from docingest.pipeline.settings import Settings
from docingest.pipeline.store import VectorStore
from tests.support.crash import assert_stored_once, deployment_env, journal, notes
from tests.support.docingest_service import (
    LOADED_START_TIMEOUT,
    Process,
    ServiceEnv,
    start,
    wait_until_up,
)
from tests.support.embedding_server import FakeEmbeddingServer
from tests.support.engines import schema_for, stop_postgres, stoppable_postgres
from tests.support.http_client import ApiClient, Json, assert_error, poll_until
from tests.support.redis_db import purge_keys
from tests.support.waiting import wait_until

if TYPE_CHECKING:
    from pgserver import PostgresServer

INDEX = "outage"
TIMEOUT = 300.0
"""Seconds a job or process gets: a deadline against a hang on a loaded shared machine."""


@pytest.fixture
def server() -> Iterator[PostgresServer]:
    with stoppable_postgres() as server:
        yield server


@pytest.fixture
def fake() -> Iterator[FakeEmbeddingServer]:
    with FakeEmbeddingServer(dimensions=32) as fake:
        yield fake


@pytest.fixture
def env(tmp_path: Path, server: PostgresServer, fake: FakeEmbeddingServer) -> Iterator[ServiceEnv]:
    env = ServiceEnv(
        data_dir=tmp_path / "data",
        key_prefix=f"outage-{uuid.uuid4().hex[:10]}:",
        extra=deployment_env(fake)
        | {
            "DOCINGEST_DATABASE_URL": server.get_uri(),  # a socket path: the same once restarted
            "DOCINGEST_DATABASE_SCHEMA": schema_for(tmp_path),
            "DOCINGEST_DATABASE_POOL_TIMEOUT_SECONDS": "3",
            "DOCINGEST_JOB_RETRY_BASE_SECONDS": "0.5",
            "DOCINGEST_JOB_RETRY_MAX_SECONDS": "3",
        },
    )
    try:
        yield env
    finally:
        purge_keys(env.key_prefix)


@pytest.fixture
def running() -> Iterator[ExitStack]:
    """Where a test's processes and clients are kept; stopped and closed afterwards."""
    with ExitStack() as stack:
        yield stack


def start_api(env: ServiceEnv, running: ExitStack) -> ApiClient:
    api = start(["api"], env, name="api")
    running.callback(api.stop)
    wait_until_up(api, env.base_url, timeout=LOADED_START_TIMEOUT)
    client = ApiClient(env.base_url)
    running.callback(client.close)
    return client


def start_worker(env: ServiceEnv, running: ExitStack, **extra_env: str) -> Process:
    worker = start(
        ["worker", "--pool", "threads", "--concurrency", "2"],
        env,
        name=f"worker-{uuid.uuid4().hex[:6]}",
        extra_env=extra_env,
    )
    running.callback(worker.stop)
    return worker


def readiness(client: ApiClient) -> httpx.Response:
    return client.http.get("/readyz", timeout=120)


def open_store(env: ServiceEnv) -> VectorStore:
    return VectorStore.open(
        Settings(
            data_dir=env.data_dir,
            database_url=SecretStr(env.extra["DOCINGEST_DATABASE_URL"]),
            database_schema=env.extra["DOCINGEST_DATABASE_SCHEMA"],
        )
    )


def waits_logged(worker: Process, job_id: str) -> int:
    """How many times the worker put the job off because the store did not answer."""
    pattern = rf"job {job_id}: waiting for the store \(\d+s so far\), next check in [0-9.]+s: "
    pattern += "dependency_unavailable: PostgreSQL at "
    return len(re.findall(pattern, worker.log()))


@pytest.mark.timeout(4 * TIMEOUT)
def test_the_api_and_a_worker_started_before_postgres_wait_for_it(
    env: ServiceEnv, server: PostgresServer, running: ExitStack
) -> None:
    stop_postgres(server)
    client = start_api(env, running)  # /healthz answers

    ready = readiness(client)
    assert ready.status_code == 503, ready.text
    body = ready.json()
    assert body["checks"]["postgres"].startswith("unavailable: PostgreSQL at "), body
    assert "is unreachable" in body["checks"]["postgres"] and body["checks"]["redis"] == "ok"
    assert body["store"].startswith("PostgreSQL at "), body
    refused = client.upload(INDEX, notes(0), filename="n0.txt")
    assert "is unreachable" in assert_error(refused, 503, "dependency_unavailable")
    assert refused.headers["retry-after"] == "5"
    assert not any(env.data_dir.joinpath("staging").iterdir())  # nothing staged is kept
    search = client.http.post(f"/v1/indexes/{INDEX}/search", json={"query": "note"})
    assert_error(search, 503, "dependency_unavailable")
    assert_error(client.http.get("/v1/indexes"), 503, "dependency_unavailable")

    server.ensure_postgres_running()
    wait_until(lambda: readiness(client).status_code == 200, timeout=TIMEOUT, what="ready")
    jobs = [client.submit(INDEX, notes(n), filename=f"n{n}.txt") for n in range(3)]
    stop_postgres(server)  # the jobs are queued; no worker has seen them

    worker = start_worker(env, running)
    wait_until(
        lambda: all(waits_logged(worker, job_id) >= 2 for job_id in jobs),
        timeout=TIMEOUT,
        what="each job put off twice",
    )
    assert "does not answer yet, starting anyway" in worker.log()
    for job_id in jobs:
        job = client.job(job_id)
        assert (job["status"], job["attempts"]) == ("queued", 0), job  # nothing spent
    listed = client.http.get("/v1/jobs", params={"index": INDEX})  # the jobs live in Redis
    assert listed.status_code == 200, listed.text
    waiting = {job["job_id"]: (job["status"], job["attempts"]) for job in listed.json()["jobs"]}
    assert waiting == dict.fromkeys(jobs, ("queued", 0))

    server.ensure_postgres_running()
    finished = [client.wait(job_id, timeout=TIMEOUT) for job_id in jobs]
    assert [(job["status"], job["attempts"]) for job in finished] == [("completed", 1)] * 3
    assert client.search(INDEX, "Note 1.2")
    with open_store(env) as store:
        for job in finished:
            assert_stored_once(store, INDEX, job)
    assert "Traceback" not in worker.log()


@pytest.mark.timeout(4 * TIMEOUT)
def test_postgres_stopped_mid_job_the_job_completes_once_it_is_back(
    env: ServiceEnv, server: PostgresServer, fake: FakeEmbeddingServer, running: ExitStack
) -> None:
    client = start_api(env, running)
    worker = start_worker(env, running)
    first = client.ingest(INDEX, notes(1), filename="log.txt")
    assert first["result"]["version"] == 1

    fake.latency = 0.3  # about 20 chunks, two a request: seconds in the embedding stage
    job_id = client.submit(INDEX, journal("storm", 40), filename="log.txt")
    poll_until(job_id, client, lambda job: job["chunks_embedded"] > 0, timeout=TIMEOUT)
    stop_postgres(server)
    assert_error(
        client.http.post(f"/v1/indexes/{INDEX}/search", json={"query": "storm"}),
        503,
        "dependency_unavailable",
    )
    # attempt 1 meets the store down and is re-queued; then the job waits, spending nothing
    poll_until(
        job_id, client, lambda job: job["status"] == "queued" and job["attempts"] == 1,
        timeout=TIMEOUT,
    )  # fmt: skip
    fake.latency = 0.0
    wait_until(lambda: waits_logged(worker, job_id) >= 2, timeout=TIMEOUT, what="waits")
    assert client.job(job_id)["attempts"] == 1

    server.ensure_postgres_running()
    job: Json = client.wait(job_id, timeout=TIMEOUT)
    assert job["status"] == "completed" and job["attempts"] == 2, job
    assert job["result"]["version"] == 2
    [document] = client.documents(INDEX)
    assert (document["document_id"], document["version"]) == ("log.txt", 2)
    results = client.search(INDEX, "storm journal", top_k=20)
    assert results and all("storm" in result["text"] for result in results)  # none of v1
    with open_store(env) as store:
        assert_stored_once(store, INDEX, job)  # v1 retired, nothing staged or duplicated


@pytest.mark.timeout(4 * TIMEOUT)
def test_a_store_that_never_comes_back_fails_the_job_after_its_budget(
    env: ServiceEnv, server: PostgresServer, running: ExitStack
) -> None:
    client = start_api(env, running)
    job_id = client.submit(INDEX, notes(7), filename="n7.txt")
    stop_postgres(server)
    worker = start_worker(
        env, running, DOCINGEST_JOB_STORE_WAIT_SECONDS="4", DOCINGEST_JOB_MAX_ATTEMPTS="2"
    )
    job = client.wait(job_id, timeout=TIMEOUT)
    assert (job["status"], job["attempts"]) == ("failed", 2), job
    assert job["error"]["code"] == "dependency_unavailable"
    assert job["error"]["message"].startswith("PostgreSQL at "), job
    assert job["error"]["message"].endswith("(gave up after 2 attempts)"), job
    assert waits_logged(worker, job_id) >= 1  # it waited before it spent its attempts
    assert worker.popen.poll() is None  # the worker lives on

    server.ensure_postgres_running()
    retried = client.http.post(f"/v1/jobs/{job_id}/retry")
    assert retried.status_code == 202, retried.text
    job = client.wait(job_id, timeout=TIMEOUT)
    assert job["status"] == "completed", job
