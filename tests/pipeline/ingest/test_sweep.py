"""The sweep against the real Redis (DB 15): silent jobs re-queued, orphaned uploads deleted."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from docingest.pipeline.ingest.sweep import STAGED_GRACE_SECONDS, sweep
from docingest.pipeline.keys import JobStatus
from docingest.pipeline.services import Services
from tests.support.jobs import job_spec
from tests.support.redis_db import private_redis, unique_prefix
from tests.support.settings import service_settings

HEARTBEAT_TIMEOUT = 0.5


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    prefix = unique_prefix("sweep")
    settings = service_settings(
        tmp_path,
        prefix,
        None,
        heartbeat_interval_seconds=0.1,
        heartbeat_timeout_seconds=HEARTBEAT_TIMEOUT,
    )
    with private_redis(prefix):
        services = Services(settings, owns_store=True)
        yield services
        services.close()


def claim(services: Services, job_id: str) -> int:
    claimed = services.jobs.claim(job_id, max_attempts=3, stale_after=HEARTBEAT_TIMEOUT)
    assert claimed.outcome == "claimed"
    return claimed.attempt


def test_a_silent_job_is_requeued_and_sent_again(services: Services) -> None:
    jobs = services.jobs
    silent, alive, waiting = (jobs.create(job_spec()).job_id for _ in range(3))
    claim(services, silent)
    alive_attempt = claim(services, alive)
    time.sleep(HEARTBEAT_TIMEOUT + 0.2)
    assert jobs.heartbeat(alive, alive_attempt)  # its worker is still at it

    enqueued: list[str] = []
    report = sweep(services, enqueue=enqueued.append)

    assert report.requeued == [silent] and enqueued == [silent]
    job = jobs.get(silent)
    assert job.status is JobStatus.QUEUED and job.attempts == 1
    last_error = services.redis.hget(services.keys.job(silent), "last_error")
    assert last_error is not None and "worker_lost" in last_error
    assert jobs.get(alive).status is JobStatus.PROCESSING
    assert jobs.get(waiting).status is JobStatus.QUEUED
    assert jobs.counts()["queued"] == 2 and jobs.counts()["processing"] == 1

    assert claim(services, silent) == 2, "the next delivery is a new attempt"
    again: list[str] = []
    assert sweep(services, enqueue=again.append).requeued == [] and again == []


def test_orphaned_uploads_past_the_grace_period_are_deleted(services: Services) -> None:
    staging = services.settings.staging_dir
    staging.mkdir(parents=True)
    long_ago = time.time() - STAGED_GRACE_SECONDS - 60

    def staged(name: str, *, old: bool) -> Path:
        path = staging / name
        path.write_bytes(b"staged upload")
        if old:
            os.utime(path, (long_ago, long_ago))
        return path

    failed = services.jobs.create(job_spec()).job_id  # its job exists: it may be retried
    expired = services.jobs.create(job_spec()).job_id
    services.redis.pexpire(services.keys.job(expired), 1)
    time.sleep(0.05)
    kept_for_its_job = staged(failed, old=True)
    orphan_of_expired_job = staged(expired, old=True)
    orphan = staged("0123456789abcdef0123456789abcdef", old=True)
    young_orphan = staged("fedcba9876543210fedcba9876543210", old=False)
    directory = staging / "not-an-upload"
    directory.mkdir()
    os.utime(directory, (long_ago, long_ago))

    report = sweep(services, enqueue=lambda job_id: None)

    assert report.staged_deleted == 2
    assert not orphan_of_expired_job.exists() and not orphan.exists()
    assert kept_for_its_job.exists(), "a job that still exists keeps its upload"
    assert young_orphan.exists(), "a young file may belong to a job being recorded"
    assert directory.is_dir()


def test_the_sweep_tolerates_a_missing_staging_directory(services: Services) -> None:
    assert not services.settings.staging_dir.exists()
    report = sweep(services, enqueue=lambda job_id: None)
    assert (report.requeued, report.staged_deleted) == ([], 0)


def test_a_failed_or_cancelled_jobs_upload_is_deleted_after_its_retry_window(
    tmp_path: Path,
) -> None:
    prefix = unique_prefix("sweep-retry")
    settings = service_settings(tmp_path, prefix, None, staging_failed_ttl_hours=0.5 / 3600)
    with private_redis(prefix):
        services = Services(settings, owns_store=True)
        jobs = services.jobs
        failed, cancelled, running, done_recently = (jobs.create(job_spec()).job_id for _ in "abcd")
        for job_id in (failed, running, done_recently):
            claim(services, job_id)
        jobs.fail(failed, 1, {"code": "unsupported_format", "message": "no"})
        jobs.cancel(cancelled)
        settings.staging_dir.mkdir(parents=True)
        paths = {job_id: settings.staging_dir / job_id for job_id in (failed, cancelled, running)}
        for path in paths.values():
            path.write_bytes(b"staged upload")
        time.sleep(0.6)  # past the retry window of the two finished jobs
        jobs.fail(done_recently, 1, {"code": "unsupported_format", "message": "no"})
        (settings.staging_dir / done_recently).write_bytes(b"staged upload")

        report = sweep(services, enqueue=lambda job_id: None)

        assert report.staged_deleted == 2
        assert not paths[failed].exists() and not paths[cancelled].exists()
        assert paths[running].exists(), "a running job's upload is never deleted"
        assert (settings.staging_dir / done_recently).exists(), "still within its window"
        services.close()
