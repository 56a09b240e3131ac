"""Job state in the real Redis (DB 15, a private key prefix per test): the Lua scripts' rules."""

from __future__ import annotations

import time

import pytest

from docingest.pipeline.errors import JobNotFound, JobStateConflict
from docingest.pipeline.jobs.state import (
    OVERLAP_SPAN,
    STAGE_SPANS,
    JobStore,
    OverlapProgress,
    overlap_fraction,
    stage_progress,
)
from docingest.pipeline.keys import JobStage, JobStatus, Keys
from tests.support.jobs import job_spec
from tests.support.redis_db import TestRedis

TTL = 3600
STALE = 0.05
"""Heartbeat age after which the tests treat a processing job as abandoned."""
FRESH = 60.0
"""A staleness bound no heartbeat in these tests reaches."""


@pytest.fixture
def jobs(redis_db: TestRedis) -> JobStore:
    return JobStore(redis_db.client, keys=Keys(redis_db.prefix), ttl_seconds=TTL)


def raw(redis_db: TestRedis, job_id: str) -> dict[str, str]:
    """The job's hash as the scripts wrote it."""
    return redis_db.client.hgetall(Keys(redis_db.prefix).job(job_id))  # type: ignore[return-value]


def ttl(redis_db: TestRedis, job_id: str) -> int:
    return int(redis_db.client.ttl(Keys(redis_db.prefix).job(job_id)))


def make_stale(jobs: JobStore) -> None:
    time.sleep(STALE * 2)


def claimed(jobs: JobStore, job_id: str | None = None, *, max_attempts: int = 3) -> tuple[str, int]:
    """Create (unless given) and claim a job; return its id and attempt."""
    job_id = job_id or jobs.create(job_spec()).job_id
    claim = jobs.claim(job_id, max_attempts=max_attempts, stale_after=FRESH)
    assert claim.outcome == "claimed", claim
    return job_id, claim.attempt


# --- create, get, recent -----------------------------------------------------------------


def test_create_records_a_queued_job(jobs: JobStore, redis_db: TestRedis) -> None:
    spec = job_spec(
        "legal",
        document_id="contract.pdf",
        size_bytes=1234,
        content_sha256="ab" * 32,
        metadata={"department": "legal", "tags": ["a"]},
        force=True,
    )
    created = jobs.create(spec)
    job = jobs.get(spec.job_id)
    assert job == created
    assert (job.job_id, job.index, job.document_id) == (spec.job_id, "legal", "contract.pdf")
    assert job.status is JobStatus.QUEUED and job.stage is None
    assert (job.progress, job.attempts, job.pages_done, job.chunks_done) == (0.0, 0, 0, 0)
    assert job.result is None and job.error is None
    assert job.started_at is None and job.finished_at is None and job.heartbeat_at is None
    assert job.created_at.endswith("Z")
    assert job.metadata == {"department": "legal", "tags": ["a"]}
    assert job.force and job.size_bytes == 1234 and job.content_sha256 == "ab" * 32
    assert jobs.work(spec.job_id).staged_name == spec.staged_name
    assert ttl(redis_db, spec.job_id) == -1, "a job that has not finished never expires"
    assert jobs.counts()["queued"] == 1


def test_get_of_an_unknown_job_raises(jobs: JobStore) -> None:
    with pytest.raises(JobNotFound):
        jobs.get("no-such-job")


def test_recent_lists_newest_first_with_index_and_status_filters(jobs: JobStore) -> None:
    ids = [jobs.create(job_spec("a" if n % 2 == 0 else "b")).job_id for n in range(5)]
    a_ids = ids[0::2]
    assert [job.job_id for job in jobs.recent()] == ids[::-1]
    assert [job.job_id for job in jobs.recent(limit=2)] == ids[:-3:-1]
    assert [job.job_id for job in jobs.recent(index="a")] == a_ids[::-1]
    assert [job.job_id for job in jobs.recent(index="b")] == ids[1::2][::-1]
    assert jobs.recent(index="c") == []

    claimed(jobs, a_ids[1])
    processing = jobs.recent(status=JobStatus.PROCESSING)
    assert [job.job_id for job in processing] == [a_ids[1]]
    queued_a = jobs.recent(index="a", status=JobStatus.QUEUED)
    assert [job.job_id for job in queued_a] == [a_ids[2], a_ids[0]]


def test_recent_drops_expired_jobs(jobs: JobStore, redis_db: TestRedis) -> None:
    kept, gone = (jobs.create(job_spec("a")).job_id for _ in range(2))
    redis_db.client.pexpire(jobs.keys.job(gone), 1)
    time.sleep(0.05)
    assert [job.job_id for job in jobs.recent()] == [kept]
    assert [job.job_id for job in jobs.recent(index="a")] == [kept]
    assert redis_db.client.zscore(jobs.keys.jobs, gone) is None, "dropped from the listing"
    assert redis_db.client.zscore(jobs.keys.index_jobs("a"), gone) is None
    assert redis_db.client.zscore(jobs.keys.jobs, kept) is not None


# --- claim -------------------------------------------------------------------------------


def test_claim_starts_an_attempt(jobs: JobStore) -> None:
    job_id = jobs.create(job_spec()).job_id
    claim = jobs.claim(job_id, max_attempts=3, stale_after=FRESH)
    assert (claim.outcome, claim.attempt) == ("claimed", 1)
    job = jobs.get(job_id)
    assert job.status is JobStatus.PROCESSING and job.attempts == 1
    assert job.started_at is not None and job.heartbeat_at is not None
    assert jobs.counts()["queued"] == 0 and jobs.counts()["processing"] == 1


def test_claim_refuses_a_job_with_a_fresh_heartbeat(jobs: JobStore) -> None:
    job_id, attempt = claimed(jobs)
    busy = jobs.claim(job_id, max_attempts=3, stale_after=FRESH)
    assert (busy.outcome, busy.attempt) == ("busy", attempt)
    assert jobs.get(job_id).attempts == attempt


def test_claim_takes_over_a_job_whose_heartbeat_is_stale(jobs: JobStore) -> None:
    job_id, _ = claimed(jobs)
    started_at = jobs.get(job_id).started_at
    make_stale(jobs)
    again = jobs.claim(job_id, max_attempts=3, stale_after=STALE)
    assert (again.outcome, again.attempt) == ("claimed", 2)
    job = jobs.get(job_id)
    assert job.status is JobStatus.PROCESSING and job.attempts == 2
    assert job.started_at == started_at, "the first start is kept"


def test_claim_of_a_finished_or_missing_job(jobs: JobStore) -> None:
    job_id, attempt = claimed(jobs)
    assert jobs.complete(job_id, attempt, {"chunks": 1})
    assert jobs.claim(job_id, max_attempts=3, stale_after=STALE).outcome == "finished"
    assert jobs.get(job_id).status is JobStatus.COMPLETED
    assert jobs.claim("no-such-job", max_attempts=3, stale_after=STALE).outcome == "missing"


def test_claim_finishes_a_job_whose_cancel_was_requested(
    jobs: JobStore, redis_db: TestRedis
) -> None:
    job_id, _ = claimed(jobs)
    assert jobs.cancel(job_id).status is JobStatus.PROCESSING  # asked; its worker then died
    make_stale(jobs)
    assert jobs.claim(job_id, max_attempts=3, stale_after=STALE).outcome == "cancelled"
    job = jobs.get(job_id)
    assert job.status is JobStatus.CANCELLED and job.finished_at is not None
    assert 0 < ttl(redis_db, job_id) <= TTL
    counts = jobs.counts()
    assert (counts["cancelled"], counts["processing"], counts["queued"]) == (1, 0, 0)


def test_claim_fails_a_job_whose_attempts_are_used_up(jobs: JobStore, redis_db: TestRedis) -> None:
    job_id, _ = claimed(jobs, max_attempts=2)
    make_stale(jobs)
    assert jobs.claim(job_id, max_attempts=2, stale_after=STALE).outcome == "claimed"
    make_stale(jobs)
    exhausted = jobs.claim(job_id, max_attempts=2, stale_after=STALE)
    assert (exhausted.outcome, exhausted.attempt) == ("exhausted", 2)
    job = jobs.get(job_id)
    assert job.status is JobStatus.FAILED and job.stage is None
    assert job.error is not None and job.error["code"] == "timeout"
    assert "2 attempts" in job.error["message"]
    assert 0 < ttl(redis_db, job_id) <= TTL
    counts = jobs.counts()
    assert (counts["failed"], counts["processing"]) == (1, 0)


# --- updates, fencing, progress -----------------------------------------------------------


def test_update_records_stage_progress_counts_and_a_heartbeat(jobs: JobStore) -> None:
    job_id, attempt = claimed(jobs)
    first_beat = jobs.get(job_id).heartbeat_at
    time.sleep(0.01)
    assert jobs.update(
        job_id, attempt, stage=JobStage.EXTRACTING, progress=0.1, pages_done=3, pages_total=9
    )
    job = jobs.get(job_id)
    assert job.stage is JobStage.EXTRACTING and job.progress == 0.1
    assert (job.pages_done, job.pages_total) == (3, 9)
    assert job.heartbeat_at is not None and first_beat is not None
    assert job.heartbeat_at > first_beat


def test_progress_never_goes_backwards_within_a_run(jobs: JobStore) -> None:
    job_id, attempt = claimed(jobs)
    seen = []
    for progress in (0.1, 0.5, 0.3, 0.5, 0.7, 0.0):
        assert jobs.update(job_id, attempt, progress=progress)
        seen.append(jobs.get(job_id).progress)
    assert seen == [0.1, 0.5, 0.5, 0.5, 0.7, 0.7]


def test_a_stale_attempt_cannot_change_the_job(jobs: JobStore, redis_db: TestRedis) -> None:
    job_id, old = claimed(jobs)
    assert jobs.update(job_id, old, stage=JobStage.EMBEDDING, progress=0.4)
    make_stale(jobs)
    assert jobs.requeue(job_id, stale_after=STALE)
    new = jobs.claim(job_id, max_attempts=3, stale_after=FRESH).attempt
    assert new == old + 1
    before = raw(redis_db, job_id)

    assert not jobs.update(job_id, old, stage=JobStage.STORING, progress=0.9, chunks_done=7)
    assert not jobs.heartbeat(job_id, old)
    assert not jobs.set_version(job_id, old, 42)
    assert not jobs.complete(job_id, old, {"chunks": 7})
    assert not jobs.fail(job_id, old, {"code": "corrupt_document", "message": "no"})
    assert not jobs.mark_cancelled(job_id, old)
    assert raw(redis_db, job_id) == before

    assert jobs.update(job_id, new, progress=0.5)
    assert jobs.get(job_id).progress == 0.5


def test_nothing_updates_a_queued_job(jobs: JobStore) -> None:
    job_id = jobs.create(job_spec()).job_id
    assert not jobs.update(job_id, 0, progress=0.5)
    assert not jobs.complete(job_id, 0, {})
    assert jobs.get(job_id).progress == 0.0 and jobs.get(job_id).status is JobStatus.QUEUED


def test_complete_sets_progress_to_one_and_an_expiry(jobs: JobStore, redis_db: TestRedis) -> None:
    job_id, attempt = claimed(jobs)
    jobs.update(job_id, attempt, stage=JobStage.STORING, progress=0.93)
    result = {"document_id": "notes.txt", "version": 1, "chunks": 4, "unchanged": False}
    assert jobs.complete(job_id, attempt, result)
    job = jobs.get(job_id)
    assert job.status is JobStatus.COMPLETED
    assert job.progress == 1.0 and raw(redis_db, job_id)["progress"] == "1.0"
    assert job.stage is None and job.finished_at is not None and job.result == result
    assert 0 < ttl(redis_db, job_id) <= TTL
    counts = jobs.counts()
    assert (counts["completed"], counts["processing"]) == (1, 0)
    assert not jobs.complete(job_id, attempt, result), "a job completes once"
    assert jobs.counts()["completed"] == 1


def test_fail_records_the_error(jobs: JobStore, redis_db: TestRedis) -> None:
    job_id, attempt = claimed(jobs)
    error = {"code": "no_text_found", "message": "The document has no text."}
    assert jobs.fail(job_id, attempt, error)
    job = jobs.get(job_id)
    assert job.status is JobStatus.FAILED and job.error == error and job.result is None
    assert 0 < ttl(redis_db, job_id) <= TTL
    assert jobs.counts()["failed"] == 1


# --- cancel and retry ----------------------------------------------------------------------


def test_cancel_of_a_queued_job_is_immediate(jobs: JobStore, redis_db: TestRedis) -> None:
    job_id = jobs.create(job_spec()).job_id
    job = jobs.cancel(job_id)
    assert job.status is JobStatus.CANCELLED and job.finished_at is not None
    assert 0 < ttl(redis_db, job_id) <= TTL
    counts = jobs.counts()
    assert (counts["cancelled"], counts["queued"]) == (1, 0)
    assert jobs.claim(job_id, max_attempts=3, stale_after=FRESH).outcome == "finished"


def test_cancel_of_a_processing_job_asks_its_worker(jobs: JobStore) -> None:
    job_id, attempt = claimed(jobs)
    assert not jobs.cancel_requested(job_id)
    job = jobs.cancel(job_id)
    assert job.status is JobStatus.PROCESSING and job.finished_at is None
    assert jobs.cancel_requested(job_id)
    assert jobs.counts()["cancelled"] == 0
    assert jobs.mark_cancelled(job_id, attempt)
    job = jobs.get(job_id)
    assert job.status is JobStatus.CANCELLED and job.finished_at is not None
    assert jobs.counts()["cancelled"] == 1 and jobs.counts()["processing"] == 0


def test_cancel_of_a_finished_or_missing_job(jobs: JobStore) -> None:
    job_id, attempt = claimed(jobs)
    jobs.complete(job_id, attempt, {})
    with pytest.raises(JobStateConflict, match="completed"):
        jobs.cancel(job_id)
    with pytest.raises(JobNotFound):
        jobs.cancel("no-such-job")
    queued = jobs.create(job_spec()).job_id
    jobs.cancel(queued)
    with pytest.raises(JobStateConflict, match="cancelled"):
        jobs.cancel(queued)


@pytest.mark.parametrize("ending", ["failed", "cancelled"])
def test_retry_queues_a_failed_or_cancelled_job_from_the_start(
    jobs: JobStore, redis_db: TestRedis, ending: str
) -> None:
    job_id, attempt = claimed(jobs)
    jobs.update(
        job_id,
        attempt,
        stage=JobStage.EMBEDDING,
        progress=0.6,
        pages_done=5,
        pages_total=5,
        chunks_total=10,
        chunks_embedded=6,
        chunks_done=2,
        version=3,
    )
    if ending == "failed":
        jobs.fail(job_id, attempt, {"code": "embedding_failed", "message": "HTTP 500"})
    else:
        jobs.cancel(job_id)
        jobs.mark_cancelled(job_id, attempt)

    job = jobs.retry(job_id)
    assert job.status is JobStatus.QUEUED and job.stage is None
    assert (job.progress, job.attempts, job.pages_done, job.chunks_done) == (0.0, 0, 0, 0)
    assert (job.pages_total, job.chunks_total, job.chunks_embedded) == (None, None, 0)
    assert job.error is None and job.result is None
    assert job.started_at is None and job.finished_at is None
    assert jobs.work(job_id).version is None
    assert not jobs.cancel_requested(job_id)
    assert ttl(redis_db, job_id) == -1, "a queued job no longer expires"
    assert jobs.counts()["queued"] == 1
    again = jobs.claim(job_id, max_attempts=1, stale_after=FRESH)
    assert (again.outcome, again.attempt) == ("claimed", 1), "its attempts start over"


def test_retry_refuses_other_states(jobs: JobStore) -> None:
    queued = jobs.create(job_spec()).job_id
    processing, _ = claimed(jobs)
    completed, attempt = claimed(jobs)
    jobs.complete(completed, attempt, {})
    states = ((queued, "queued"), (processing, "processing"), (completed, "completed"))
    for job_id, status in states:
        with pytest.raises(JobStateConflict, match=status):
            jobs.retry(job_id)
        assert jobs.get(job_id).status == status
    with pytest.raises(JobNotFound):
        jobs.retry("no-such-job")


# --- requeue, staleness ----------------------------------------------------------------------


def test_requeue_by_attempt_after_a_transient_error(jobs: JobStore, redis_db: TestRedis) -> None:
    job_id, attempt = claimed(jobs)
    jobs.update(job_id, attempt, stage=JobStage.EMBEDDING, progress=0.3)
    note = {"code": "rate_limited", "message": "slow down"}
    assert not jobs.requeue(job_id, attempt=attempt + 1, note=note), "not this attempt's job"
    assert jobs.get(job_id).status is JobStatus.PROCESSING
    assert jobs.requeue(job_id, attempt=attempt, note=note)
    job = jobs.get(job_id)
    assert job.status is JobStatus.QUEUED and job.stage is None
    assert raw(redis_db, job_id)["last_error"] == '{"code": "rate_limited", "message": "slow down"}'
    counts = jobs.counts()
    assert (counts["queued"], counts["processing"]) == (1, 0)
    assert not jobs.requeue(job_id, attempt=attempt), "only a processing job is requeued"
    assert jobs.claim(job_id, max_attempts=3, stale_after=FRESH).attempt == attempt + 1


def test_requeue_by_staleness(jobs: JobStore) -> None:
    job_id, _ = claimed(jobs)
    assert jobs.stale(older_than=FRESH) == []
    assert not jobs.requeue(job_id, stale_after=FRESH), "its heartbeat is fresh"
    assert jobs.get(job_id).status is JobStatus.PROCESSING
    make_stale(jobs)
    assert jobs.stale(older_than=STALE) == [job_id]
    assert jobs.requeue(job_id, stale_after=STALE)
    assert jobs.get(job_id).status is JobStatus.QUEUED
    assert jobs.stale(older_than=STALE) == []


# --- numbers for /metrics ----------------------------------------------------------------------


def test_counts_and_oldest_queued_age(jobs: JobStore) -> None:
    assert jobs.counts() == {s.value: 0 for s in JobStatus}
    assert jobs.oldest_queued_age() == 0.0
    first = jobs.create(job_spec()).job_id
    time.sleep(0.2)
    second = jobs.create(job_spec()).job_id
    age = jobs.oldest_queued_age()
    assert 0.2 <= age < 5, age
    assert jobs.counts()["queued"] == 2
    done, attempt = claimed(jobs, first)
    jobs.complete(done, attempt, {})
    assert jobs.oldest_queued_age() < age, "the oldest left is younger"
    claimed(jobs, second)
    failed, attempt = claimed(jobs)
    jobs.fail(failed, attempt, {"code": "corrupt_document", "message": "bad"})
    jobs.cancel(jobs.create(job_spec()).job_id)
    assert jobs.counts() == {
        "queued": 0,
        "processing": 1,
        "completed": 1,
        "failed": 1,
        "cancelled": 1,
    }
    assert jobs.oldest_queued_age() == 0.0


def test_mark_unqueueable_fails_the_job(jobs: JobStore, redis_db: TestRedis) -> None:
    job_id = jobs.create(job_spec()).job_id
    jobs.mark_unqueueable(job_id, {"code": "dependency_unavailable", "message": "no broker"})
    job = jobs.get(job_id)
    assert job.status is JobStatus.FAILED and job.error is not None
    assert job.error["code"] == "dependency_unavailable"
    assert jobs.counts()["queued"] == 0 and jobs.counts()["failed"] == 1
    assert 0 < ttl(redis_db, job_id) <= TTL


# --- stage spans --------------------------------------------------------------------------------


def test_stage_spans_cover_zero_to_below_one_in_pipeline_order() -> None:
    spans = [STAGE_SPANS[stage] for stage in JobStage]
    assert spans[0][0] == 0.0
    assert all(low < high for low, high in spans)
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False)), "contiguous"
    assert spans[-1][1] < 1.0, "1.0 is reserved for a completed job"


def test_stage_progress_within_a_span() -> None:
    low, high = STAGE_SPANS[JobStage.EMBEDDING]
    assert stage_progress(JobStage.EMBEDDING) == low
    assert stage_progress(JobStage.EMBEDDING, 0, 10) == low
    assert stage_progress(JobStage.EMBEDDING, 5, 10) == round((low + high) / 2, 4)
    assert stage_progress(JobStage.EMBEDDING, 10, 10) == high
    assert stage_progress(JobStage.EMBEDDING, 12, 10) == high, "clamped"
    assert stage_progress(JobStage.EMBEDDING, 0, 0) == high, "nothing to do is done"
    steps = [stage_progress(stage, done, 4) for stage in JobStage for done in range(5)]
    assert steps == sorted(steps)


def test_overlap_progress_moves_with_pages_and_chunks_and_never_goes_back() -> None:
    """A long PDF as a worker sees it: pages read ahead of a window, the window embedded
    batch by batch, the next pages; the total known only at the end."""
    low, high = OVERLAP_SPAN
    estimate = OverlapProgress()
    seen = [estimate.progress]
    pages, per_page, window = 300, 7, 1024
    embedded = 0
    for page in range(1, pages + 1):
        received = page * per_page
        seen.append(estimate.advance(_fraction(page, pages, embedded, received, None)))
        if received - embedded >= window:  # a window is full: embedded in batches of 64
            for _ in range(window // 64):
                embedded += 64
                seen.append(estimate.advance(_fraction(page, pages, embedded, received, None)))
    total = pages * per_page
    while embedded < total:
        embedded = min(total, embedded + 64)
        seen.append(estimate.advance(_fraction(pages, pages, embedded, total, total)))
    assert seen == sorted(seen), "never backwards"
    assert seen[-1] == high and seen[0] == low
    assert len(set(seen)) > 0.9 * len(seen), "moves at (nearly) every step"


def test_overlap_progress_without_pages_moves_and_ends_at_the_span_end() -> None:
    estimate = OverlapProgress()
    seen = []
    for embedded in range(0, 14_000, 256):  # an XLSX's chunks, total unknown
        seen.append(estimate.advance(_fraction(0, None, embedded, embedded + 512, None)))
    assert seen == sorted(seen) and len(set(seen)) == len(seen)
    assert seen[-1] < OVERLAP_SPAN[1]
    for embedded in range(14_000, 20_001, 500):  # the total is known at last
        seen.append(estimate.advance(_fraction(0, None, embedded, 20_000, 20_000)))
    assert seen == sorted(seen)
    assert seen[-1] == OVERLAP_SPAN[1]


def _fraction(
    pages_done: int, pages_total: int | None, embedded: int, received: int, total: int | None
) -> float:
    return overlap_fraction(
        pages_done=pages_done,
        pages_total=pages_total,
        chunks_embedded=embedded,
        chunks_received=received,
        chunks_total=total,
    )
