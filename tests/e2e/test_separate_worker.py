"""End to end with `docingest api` and `docingest worker` as separate processes sharing one
environment (same Redis prefix, same data directory, so the embedded store is owned by the worker).

The API accepts uploads and reports jobs but cannot read the store; the tests stop the worker
and open the store themselves to check what it holds. One test kills the worker mid-job: the
sweep of a new worker re-queues the job once its heartbeat is stale, and it completes once.
"""

from __future__ import annotations

import itertools
import signal
from collections.abc import Callable, Iterator

import pytest

from docingest.pipeline.settings import Settings
from docingest.pipeline.store import VectorStore
from tests.support.docingest_service import Process, ServiceEnv, start, wait_until_up
from tests.support.http_client import ApiClient, assert_error, poll_until
from tests.support.paths import CORPUS_DIR, EXAMPLES_DIR
from tests.support.redis_db import purge_keys

DOCUMENTS = [
    EXAMPLES_DIR / "tika-sample-word-document.docx",
    EXAMPLES_DIR / "docling-README.md",
    CORPUS_DIR / "txt" / "latin1-french-visa.txt",
]
LONG_DOCUMENT = EXAMPLES_DIR / "federal-register-2020-17221.pdf"
WORKER_NUMBERS = itertools.count(1)
"""Numbers the workers of this module, so each has a log file of its own."""
RECOVERY_TIMEOUT = 240.0
"""A new worker starts (model load), the heartbeat goes stale (5 s), a sweep (every 2 s)
re-queues the job and it runs again from the start, on a busy 2-core machine."""


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceEnv]:
    env = ServiceEnv(data_dir=tmp_path_factory.mktemp("split"))
    api_process = start(["api"], env, name="api")
    try:
        wait_until_up(api_process, env.base_url)
        yield env
    finally:
        api_process.stop()
        purge_keys(env.key_prefix)


@pytest.fixture(scope="module")
def api(env: ServiceEnv) -> Iterator[ApiClient]:
    client = ApiClient(env.base_url)
    yield client
    client.close()


@pytest.fixture
def start_worker(env: ServiceEnv) -> Iterator[Callable[[], Process]]:
    """Start `docingest worker` processes; any still running at the end are killed."""
    started: list[Process] = []

    def launch() -> Process:
        process = start(["worker"], env, name=f"worker-{next(WORKER_NUMBERS)}")
        started.append(process)
        return process

    yield launch
    for process in started:
        process.stop(signal.SIGKILL)


def open_store(env: ServiceEnv) -> VectorStore:
    """Open the worker's embedded store (only once every worker has stopped)."""
    return VectorStore.open(Settings(data_dir=env.data_dir))


def test_jobs_run_in_the_worker_and_the_api_does_not_own_the_store(
    env: ServiceEnv, api: ApiClient, start_worker: Callable[[], Process]
) -> None:
    index = "split"
    worker = start_worker()
    job_ids = {path.name: api.submit(index, path) for path in DOCUMENTS}
    jobs = {name: api.wait(job_id) for name, job_id in job_ids.items()}
    for job in jobs.values():
        assert job["status"] == "completed", job
        assert job["attempts"] == 1 and job["progress"] == 1.0

    response = api.http.post(f"/v1/indexes/{index}/search", json={"query": "Python"})
    message = assert_error(response, 503, "store_not_here")
    assert "docingest serve" in message or "DOCINGEST_QDRANT_URL" in message
    assert_error(api.http.get(f"/v1/indexes/{index}/documents"), 503, "store_not_here")
    assert api.http.get("/healthz").status_code == 200

    assert worker.stop(signal.SIGTERM) == 0, worker.log()[-3000:]
    with open_store(env) as store:
        documents = {doc.document_id: doc for doc in store.list_documents(index)}
        assert set(documents) == set(jobs)
        for name, job in jobs.items():
            result = job["result"]
            assert documents[name].version == result["version"] == 1
            assert documents[name].chunks == result["chunks"]
            assert store.count_points(index, name) == result["chunks"]
            assert store.count_points(index, name, state="live") == result["chunks"]
        assert store.count_points(index) == sum(job["result"]["chunks"] for job in jobs.values())


def test_a_killed_worker_job_is_requeued_and_completes_once(
    env: ServiceEnv, api: ApiClient, start_worker: Callable[[], Process]
) -> None:
    index = "survivor"
    first = start_worker()
    job_id = api.submit(index, LONG_DOCUMENT)
    running = poll_until(job_id, api, lambda job: job["stage"] == "embedding")
    assert running["attempts"] == 1
    first.stop(signal.SIGKILL)
    assert first.popen.returncode == -signal.SIGKILL
    assert api.job(job_id)["status"] == "processing"  # nobody knows yet that it died

    second = start_worker()
    job = api.wait(job_id, timeout=RECOVERY_TIMEOUT)
    assert job["status"] == "completed", (job, second.log()[-3000:])
    assert job["attempts"] >= 2
    assert job["progress"] == 1.0 and job["error"] is None
    result = job["result"]
    assert job["chunks_total"] == job["chunks_done"] == result["chunks"]

    assert second.stop(signal.SIGTERM) == 0, second.log()[-3000:]
    with open_store(env) as store:
        documents = store.list_documents(index)
        assert [(d.document_id, d.version) for d in documents] == [
            (LONG_DOCUMENT.name, result["version"])
        ]
        assert documents[0].chunks == result["chunks"]
        assert store.count_points(index, LONG_DOCUMENT.name) == result["chunks"]  # no duplicates
        assert store.count_points(index) == result["chunks"]
