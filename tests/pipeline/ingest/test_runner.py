"""`run_job` end to end: real Redis (DB 15), Qdrant in memory, the fake OpenAI-compatible
embedding server over real HTTP (fast, and it can fail or slow down on demand)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from docingest.pipeline.embedders.endpoints import build_client, credential_scope
from docingest.pipeline.ingest.runner import RetryJob, run_job
from docingest.pipeline.jobs.state import Job, JobStore
from docingest.pipeline.keys import JobStage, JobStatus
from docingest.pipeline.prepare import prepare_document
from docingest.pipeline.services import Services
from tests.support.embedding_server import FakeEmbeddingServer
from tests.support.jobs import job_spec
from tests.support.redis_db import TestRedis
from tests.support.services import MakeServices, services_factory
from tests.support.waiting import wait_until

INDEX = "notes"
DOC = "field-notes.txt"
RESULT_KEYS = {
    "document_id",
    "version",
    "format",
    "pages",
    "words",
    "chunks",
    "chunks_reused",
    "ocr_pages",
    "unchanged",
    "format_note",
    "usage",
}
"""The contract's job `result` fields (extensions: `format_note`, null unless the name lied;
`usage`, docs/guides/usage-and-fallback.md)."""


def field_notes(paragraphs: int, tag: str) -> bytes:
    """A plain-text document of distinct paragraphs (about one 300-char chunk each)."""
    return "\n\n".join(
        f"Entry {n} of the {tag} notes: " + " ".join(f"{tag}{n}w{word}" for word in range(22)) + "."
        for n in range(paragraphs)
    ).encode()


@pytest.fixture
def make_services(
    tmp_path: Any, embedding_server: FakeEmbeddingServer, redis_db: TestRedis
) -> Iterator[MakeServices]:
    """Build the process's services with settings overrides (one per test: one store)."""
    with services_factory(tmp_path, redis_db.prefix, embedding_server) as make:
        yield make


def stage(services: Services, data: bytes, **fields: Any) -> str:
    """Do what the API does for an upload: stage the bytes and record a queued job."""
    fields.setdefault("document_id", DOC)
    spec = job_spec(INDEX, size_bytes=len(data), **fields)
    services.staged_path(spec.staged_name).write_bytes(data)
    services.jobs.create(spec)
    return spec.job_id


def chunk_count(services: Services, data: bytes) -> int:
    """How many chunks the real pipeline cuts `data` into under the index's settings."""
    config = services.ensure_index(INDEX)
    prepared = prepare_document(
        data, filename=DOC, settings=services.settings, chunking=config.chunking
    )
    return len(prepared.chunks)


class Watcher:
    """Polls a job in a thread, recording every distinct (stage, progress) it shows."""

    def __init__(self, jobs: JobStore, job_id: str) -> None:
        self._jobs, self._job_id = jobs, job_id
        self.seen: list[tuple[JobStage | None, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Watcher:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.is_set():
            job = self._jobs.get(self._job_id)
            if job.status is JobStatus.PROCESSING and (job.stage, job.progress) not in self.seen:
                self.seen.append((job.stage, job.progress))
            time.sleep(0.005)


class Running:
    """`run_job` in a thread, so the test can act on the job meanwhile."""

    def __init__(self, services: Services, job_id: str) -> None:
        self.outcome: str | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(services, job_id), daemon=True)
        self._thread.start()

    def _run(self, services: Services, job_id: str) -> None:
        try:
            self.outcome = run_job(services, job_id)
        except BaseException as exc:  # handed to the test thread by `join`
            self.error = exc

    def join(self, timeout: float = 60.0) -> str:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "run_job did not return"
        if self.error is not None:
            raise self.error
        assert self.outcome is not None
        return self.outcome


def embedding_started(jobs: JobStore, job_id: str) -> Callable[[], bool]:
    def started() -> bool:
        job = jobs.get(job_id)
        return job.stage is JobStage.EMBEDDING and job.chunks_embedded > 0

    return started


def test_a_job_runs_to_completion(
    make_services: MakeServices, embedding_server: FakeEmbeddingServer
) -> None:
    services = make_services(embedding_max_batch=2)
    data = field_notes(10, "alpha")
    expected_chunks = chunk_count(services, data)
    assert expected_chunks >= 8
    job_id = stage(services, data, metadata={"department": "survey"})
    embedding_server.latency = 0.02  # long enough for the watcher to see the embedding stage move

    with Watcher(services.jobs, job_id) as watcher:
        assert run_job(services, job_id) == "completed"

    job = services.jobs.get(job_id)
    assert job.status is JobStatus.COMPLETED and job.stage is None and job.error is None
    assert job.progress == 1.0 and job.attempts == 1
    assert job.finished_at is not None and job.started_at is not None
    assert job.result is not None and set(job.result) == RESULT_KEYS
    assert job.result["document_id"] == DOC and job.result["version"] == 1
    assert job.result["chunks"] == expected_chunks
    assert (job.result["chunks_reused"], job.result["unchanged"]) == (0, False)
    assert job.chunks_total == job.chunks_done == job.chunks_embedded == expected_chunks
    assert not services.staged_path(job_id).exists(), "a completed job's upload is deleted"

    stored = services.store.live_document(INDEX, DOC)
    assert stored is not None and stored.version == 1 and stored.chunks == expected_chunks
    assert stored.metadata == {"department": "survey"}
    assert sum(len(request.inputs) for request in embedding_server.requests) == expected_chunks

    progress = [value for _, value in watcher.seen]
    assert progress == sorted(progress), "progress never goes backwards"
    stages = [stage for stage, _ in watcher.seen if stage is not None]
    order = list(JobStage)
    assert [order.index(s) for s in stages] == sorted(order.index(s) for s in stages)
    assert JobStage.EMBEDDING in stages
    embedding = [value for stage, value in watcher.seen if stage is JobStage.EMBEDDING]
    assert len(set(embedding)) >= 2, f"embedding progress did not move: {watcher.seen}"


def test_a_completed_job_is_not_run_again(
    make_services: MakeServices, embedding_server: FakeEmbeddingServer
) -> None:
    services = make_services()
    job_id = stage(services, field_notes(3, "beta"))
    assert run_job(services, job_id) == "completed"
    before, requests = services.jobs.get(job_id), len(embedding_server.requests)

    assert run_job(services, job_id) == "finished"
    assert services.jobs.get(job_id) == before
    assert len(embedding_server.requests) == requests, "nothing was embedded again"
    assert services.jobs.counts()["completed"] == 1


def test_a_bad_document_fails_for_good_and_keeps_its_upload(
    make_services: MakeServices, embedding_server: FakeEmbeddingServer
) -> None:
    services = make_services()
    job_id = stage(services, os.urandom(8192), document_id="blob.bin")

    assert run_job(services, job_id) == "failed: unsupported_format"
    job = services.jobs.get(job_id)
    assert job.status is JobStatus.FAILED and job.attempts == 1
    assert job.error is not None and job.error["code"] == "unsupported_format"
    assert job.error["message"] and job.result is None
    assert services.staged_path(job_id).exists(), "kept, so the job can be retried"
    assert embedding_server.requests == []
    assert services.store.live_document(INDEX, "blob.bin") is None
    assert services.jobs.counts()["failed"] == 1


def test_a_provider_outage_requeues_the_job_then_fails_it_with_embedding_failed(
    make_services: MakeServices, embedding_server: FakeEmbeddingServer
) -> None:
    """Once the embedder's own retries are spent on errors that may pass (503), the job is
    re-queued to ride out the outage; at its last attempt it fails with `embedding_failed`,
    keeping its upload for a manual retry."""
    services = make_services(embedding_max_attempts=3, job_max_attempts=2)
    job_id = stage(services, field_notes(3, "gamma"))
    embedding_server.fail_when(lambda inputs: True, {"status": 503})

    with pytest.raises(RetryJob) as retry:
        run_job(services, job_id)
    assert retry.value.cause.code == "embedding_failed"
    job = services.jobs.get(job_id)
    assert job.status is JobStatus.QUEUED and job.attempts == 1
    assert len(embedding_server.requests) == 3

    assert run_job(services, job_id) == "failed: embedding_failed"
    job = services.jobs.get(job_id)
    assert job.status is JobStatus.FAILED and job.attempts == 2
    assert job.error is not None and job.error["code"] == "embedding_failed"
    assert "503" in job.error["message"] and "after 2 attempts" in job.error["message"]
    assert len(embedding_server.requests) == 6
    assert services.staged_path(job_id).exists()
    assert services.store.live_document(INDEX, DOC) is None


def test_a_transient_error_requeues_the_job_until_its_last_attempt(
    make_services: MakeServices, embedding_server: FakeEmbeddingServer
) -> None:
    """One request per minute, two chunks per request-sized batch: the second request cannot
    be sent before the embedding deadline, so the provider is `rate_limited` (transient)."""
    services = make_services(
        embedding_requests_per_minute=1,
        embedding_max_batch=1,
        embedding_deadline_seconds=1.0,
        job_max_attempts=2,
    )
    scope = credential_scope(str(build_client(services.settings).base_url), "sk-test")
    try:
        job_id = stage(services, field_notes(4, "delta"))
        with pytest.raises(RetryJob) as caught:
            run_job(services, job_id)
        assert caught.value.cause.code == "rate_limited"
        assert caught.value.countdown > 1.0, "at least the limiter's own wait"

        job = services.jobs.get(job_id)
        assert job.status is JobStatus.QUEUED and job.attempts == 1 and job.stage is None
        assert job.error is None and job.finished_at is None
        last_error = services.redis.hget(services.keys.job(job_id), "last_error")
        assert last_error is not None and '"code": "rate_limited"' in last_error
        assert services.jobs.counts()["queued"] == 1
        assert services.staged_path(job_id).exists()

        assert run_job(services, job_id) == "failed: rate_limited"
        job = services.jobs.get(job_id)
        assert job.status is JobStatus.FAILED and job.attempts == 2
        assert job.error is not None and job.error["code"] == "rate_limited"
        assert "gave up after 2 attempts" in job.error["message"]
        assert services.store.live_document(INDEX, DOC) is None
    finally:
        limiter_keys = list(services.redis.scan_iter(match=f"*{scope}*"))
        if limiter_keys:
            services.redis.delete(*limiter_keys)


def test_a_missing_upload_is_transient(make_services: MakeServices) -> None:
    services = make_services()
    job_id = stage(services, field_notes(2, "epsilon"))
    services.staged_path(job_id).unlink()
    with pytest.raises(RetryJob) as caught:
        run_job(services, job_id)
    assert caught.value.cause.code == "dependency_unavailable"
    assert "staging directory" in caught.value.cause.message
    assert services.jobs.get(job_id).status is JobStatus.QUEUED


def test_cancel_during_embedding_leaves_the_index_as_it_was(
    make_services: MakeServices, embedding_server: FakeEmbeddingServer
) -> None:
    services = make_services(embedding_max_batch=1)
    first = stage(services, field_notes(3, "old"))
    assert run_job(services, first) == "completed"
    before = services.store.live_document(INDEX, DOC)
    assert before is not None
    points_before = services.store.count_points(INDEX, DOC)

    embedding_server.latency = 0.2  # one chunk per request, four requests per cancellation check
    job_id = stage(services, field_notes(24, "new"))
    running = Running(services, job_id)
    wait_until(embedding_started(services.jobs, job_id), what="embedding to start")
    assert services.jobs.cancel(job_id).status is JobStatus.PROCESSING  # asked, not yet done

    assert running.join() == "cancelled"
    job = services.jobs.get(job_id)
    assert job.status is JobStatus.CANCELLED and job.result is None
    assert job.chunks_embedded < 24, "it stopped before embedding everything"
    assert services.store.live_document(INDEX, DOC) == before
    assert services.store.count_points(INDEX, DOC) == points_before
    assert services.staged_path(job_id).exists(), "kept, so the job can be retried"
    assert services.jobs.counts()["cancelled"] == 1


def test_an_attempt_that_was_taken_over_stops_and_records_nothing(
    make_services: MakeServices, embedding_server: FakeEmbeddingServer
) -> None:
    services = make_services(embedding_max_batch=1)
    jobs = services.jobs
    embedding_server.latency = 0.2
    job_id = stage(services, field_notes(16, "zeta"))
    running = Running(services, job_id)
    wait_until(embedding_started(jobs, job_id), what="embedding to start")

    # What the sweep and a second worker do when they judge the first one gone.
    assert jobs.requeue(job_id, stale_after=0.0, note={"code": "worker_lost", "message": "-"})
    claim = jobs.claim(job_id, max_attempts=3, stale_after=60.0)
    assert (claim.outcome, claim.attempt) == ("claimed", 2)
    taken_over: Job = jobs.get(job_id)
    snapshot = services.redis.hgetall(services.keys.job(job_id))

    assert running.join() == "lost"
    assert services.redis.hgetall(services.keys.job(job_id)) == snapshot
    job = jobs.get(job_id)
    assert job == taken_over
    assert job.status is JobStatus.PROCESSING and job.attempts == 2 and job.stage is None
    assert job.result is None and job.error is None
    counts = jobs.counts()
    assert (counts["completed"], counts["failed"], counts["cancelled"]) == (0, 0, 0)
    assert services.store.live_document(INDEX, DOC) is None
    # Windows it stored before it noticed stay staged (invisible) under the job's version,
    # for the new attempt to reuse and overwrite; nothing else is written.
    store = services.store
    assert store.count_points(INDEX, DOC, state="live") == 0
    assert store.count_points(INDEX, DOC) == store.count_points(INDEX, DOC, version=1)
    assert services.staged_path(job_id).exists(), "the new attempt still needs the upload"
