"""The scaled-out topology, run for real on one machine: `docingest api` and two `docingest
worker` processes sharing Redis and a PostgreSQL store (the private pgvector server).

Small documents are uploaded from concurrent clients, a quarter of them re-uploads of an
earlier document id with other content, so versions of one document race across the two
workers, while a client searches the index the whole time. Mid-run one worker is killed with
SIGKILL while it holds a job; the sweep re-queues that job once its heartbeat is stale and the
other worker runs it. At the end (`tests/support/load_checks.py`): every job ended, none was
lost or completed twice, each document is listed once at its newest version, the store holds
exactly its live chunks and nothing else (nothing staged or orphaned), and no search ever held
two versions of one document.
"""

from __future__ import annotations

import logging
import signal
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr

from docingest.pipeline.settings import Settings
from tests.support.docingest_service import Process, ServiceEnv, start, wait_until_up
from tests.support.embedding_server import FakeEmbeddingServer
from tests.support.engines import postgres_url, schema_for
from tests.support.load import EMBEDDING_MODEL, LoadRun, plan_uploads, run_load, source_files
from tests.support.load_checks import check_api, check_store
from tests.support.redis_db import purge_keys
from tests.support.waiting import wait_until

log = logging.getLogger(__name__)

UPLOADS, REUPLOAD_SHARE, CLIENTS, SEARCHERS = 200, 0.25, 6, 1
SEARCH_PAUSE = 0.1
"""Seconds between searches, so the searcher leaves CPU to the workers of a 2-core box."""
TIMEOUT = 420.0
"""Seconds until every job must have ended: a deadline against a hang, not a speed target
(the killed worker's job waits for its heartbeat to go stale, 5 s, and a sweep)."""
WORKER_CONCURRENCY = 2
INDEX = "scaled"


@pytest.fixture
def env(tmp_path: Path) -> Iterator[ServiceEnv]:
    schema = schema_for(tmp_path)
    with FakeEmbeddingServer(dimensions=64, latency=0.02) as fake:
        env = ServiceEnv(
            data_dir=tmp_path / "data",
            key_prefix=f"scaled-{uuid.uuid4().hex[:10]}:",
            extra={
                "DOCINGEST_DATABASE_URL": postgres_url(),
                "DOCINGEST_DATABASE_SCHEMA": schema,
                "DOCINGEST_EMBEDDING_PROVIDER": "openai",
                "DOCINGEST_EMBEDDING_MODEL": EMBEDDING_MODEL,
                "DOCINGEST_EMBEDDING_DIMENSIONS": "64",
                "DOCINGEST_OPENAI_BASE_URL": fake.base_url,
                "DOCINGEST_OPENAI_API_KEY": "sk-scaled-out",
            },
        )
        try:
            yield env
        finally:
            purge_keys(env.key_prefix)


def store_settings(env: ServiceEnv) -> Settings:
    extra = env.extra
    return Settings(
        data_dir=env.data_dir,
        database_url=SecretStr(extra["DOCINGEST_DATABASE_URL"]),
        database_schema=extra["DOCINGEST_DATABASE_SCHEMA"],
    )


def processing(client: httpx.Client) -> int:
    params: dict[str, str | int] = {"index": INDEX, "status": "processing", "limit": 10}
    return len(client.get("/v1/jobs", params=params).raise_for_status().json()["jobs"])


@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT + 300)
def test_api_and_two_workers_on_postgres_survive_a_killed_worker(
    env: ServiceEnv, corpus_dir: Path
) -> None:
    plan = plan_uploads(source_files(corpus_dir), uploads=UPLOADS, reupload_share=REUPLOAD_SHARE)
    document_ids = {upload.document_id for upload in plan}
    assert len(document_ids) == UPLOADS - round(UPLOADS * REUPLOAD_SHARE)
    processes: list[Process] = []
    try:
        api = start(["api"], env, name="api")
        processes.append(api)
        wait_until_up(api, env.base_url)
        workers = [
            start(
                ["worker", "--pool", "threads", "--concurrency", str(WORKER_CONCURRENCY)],
                env,
                name=f"worker-{n}",
            )
            for n in (1, 2)
        ]
        processes += workers
        ready = httpx.get(f"{env.base_url}/readyz", timeout=60).json()
        assert ready["checks"]["postgres"] == "ok", ready
        assert ready["store"].startswith("PostgreSQL at "), ready

        runs: list[LoadRun] = []
        load = threading.Thread(
            target=lambda: runs.append(
                run_load(env.base_url, plan, index=INDEX, clients=CLIENTS, searchers=SEARCHERS,
                         search_pause=SEARCH_PAUSE, timeout=TIMEOUT)
            ),
            daemon=True,
        )  # fmt: skip
        load.start()
        with httpx.Client(base_url=env.base_url, timeout=60) as client:
            # more jobs at work than the other worker can hold: the first one holds one
            wait_until(
                lambda: processing(client) > WORKER_CONCURRENCY,
                timeout=TIMEOUT,
                what="both workers busy",
                poll=0.05,
            )
            workers[0].stop(signal.SIGKILL)
            assert workers[0].popen.returncode == -signal.SIGKILL
            load.join(TIMEOUT + 120)
            assert runs, "the load did not finish"
            run = runs[0]
            max_attempts = Settings.model_fields["job_max_attempts"].default
            found = check_api(client, run, max_attempts=max_attempts)
        check_store(found, env.data_dir, INDEX, settings=store_settings(env))
    finally:
        for process in reversed(processes):
            process.stop(signal.SIGKILL if process is not processes[0] else signal.SIGTERM)

    # the figures RELIABILITY.md quotes ("PostgreSQL store"): `pytest -o log_cli=true`
    log.warning(f"scaled out: {found.completed} completed, failed {dict(found.failed)}, attempts "
          f"{dict(found.attempts)}, {found.documents} documents, {found.chunks} chunks, "
          f"{len(run.searches)} searches, {run.wall_seconds:.0f} s")  # fmt: skip
    assert found.violations == [], "\n".join(found.violations[:20])
    assert found.uploads == UPLOADS
    assert found.completed + sum(found.failed.values()) == UPLOADS  # every job ended
    assert set(found.failed) <= {"superseded"}
    assert found.documents == len(document_ids)  # each document live once, at its newest
    assert max(found.attempts) >= 2, found.attempts  # the killed worker's job ran again
    assert len(run.searches) >= 10
    assert any(search.results for search in run.searches)
