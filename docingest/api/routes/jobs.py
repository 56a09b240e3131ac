"""`/v1/jobs`: poll, list, cancel and retry ingestion jobs."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel

from docingest.api.auth import Caller
from docingest.api.deps import (
    CallerDep,
    CeleryDep,
    ReaderDep,
    ServicesDep,
    authorize_index,
)
from docingest.api.enqueue import enqueue
from docingest.pipeline.errors import JobNotFound, JobStateConflict
from docingest.pipeline.jobs.job import Job
from docingest.pipeline.jobs.visibility import job_visible, visible_jobs
from docingest.pipeline.keys import JobStatus
from docingest.pipeline.services import Services
from docingest.pipeline.store import Reader

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


class JobList(BaseModel):
    jobs: list[Job]


class CancelledJob(Job):
    """The job as a cancel left it: `cancelled` if it was still queued, `cancelling` while its
    worker is stopping (a `GET` shows `processing` until the job ends `cancelled`)."""

    status: JobStatus | Literal["cancelling"]  # type: ignore[assignment]


def _visible_job(services: Services, caller: Caller, reader: Reader, job_id: str) -> Job:
    job = services.jobs.get(job_id)
    caller.check(job.index)
    if not reader.is_admin and not job_visible(services.store, job, reader):
        raise JobNotFound(f"Job '{job_id}' does not exist (or has expired).")
    return job


@router.get("/{job_id}", response_model=Job)
def get_job(job_id: str, services: ServicesDep, caller: CallerDep, reader: ReaderDep) -> Job:
    """The job's status, stage and progress; 404 as for a missing job when its document is
    one the caller may not see."""
    return _visible_job(services, caller, reader, job_id)


@router.get("", response_model=JobList)
def list_jobs(
    services: ServicesDep,
    caller: CallerDep,
    reader: ReaderDep,
    index: str | None = None,
    status: JobStatus | None = None,
    limit: int = Query(default=50, ge=1, le=500),
) -> JobList:
    """Recent jobs, newest first (of documents the caller may see: a page is filled with
    visible jobs, reading further back, up to `MAX_SCAN` jobs, past hidden ones)."""
    if index is not None:
        authorize_index(index, caller)  # optional here, so not `AuthorizedIndex`
    wanted = limit
    while True:
        found = _recent(services, caller, index, status, wanted)
        shown = found if reader.is_admin else visible_jobs(services.store, found, reader)
        if len(shown) >= limit or len(found) < wanted or wanted >= MAX_SCAN:
            return JobList(jobs=shown[:limit])
        wanted = min(wanted * 4, MAX_SCAN)


MAX_SCAN = 2000
"""The most recent jobs one listing reads to fill a page with jobs the caller may see."""


def _recent(
    services: Services, caller: Caller, index: str | None, status: JobStatus | None, limit: int
) -> list[Job]:
    jobs = services.jobs
    if index is not None:
        return jobs.recent(index=index, status=status, limit=limit)
    if caller.indexes is None:
        return jobs.recent(status=status, limit=limit)
    found: list[Job] = []
    for name in sorted(caller.indexes):
        found.extend(jobs.recent(index=name, status=status, limit=limit))
    found.sort(key=lambda job: job.created_at, reverse=True)
    return found[:limit]


@router.delete("/{job_id}", response_model=CancelledJob, status_code=202)
def cancel_job(
    job_id: str, services: ServicesDep, caller: CallerDep, reader: ReaderDep
) -> CancelledJob:
    """Cancel a queued or processing job; the index is left as it was. A processing job's
    worker stops within seconds, between OCR pages or embedding batches
    (docs/guides/documents.md, "Jobs")."""
    _visible_job(services, caller, reader, job_id)
    job = services.jobs.cancel(job_id)
    status = "cancelling" if job.status is JobStatus.PROCESSING else job.status
    return CancelledJob(**(job.model_dump() | {"status": status}))


@router.post("/{job_id}/retry", response_model=Job, status_code=202)
def retry_job(
    job_id: str, services: ServicesDep, caller: CallerDep, reader: ReaderDep, celery: CeleryDep
) -> Job:
    """Queue a failed or cancelled job again, while its staged upload is kept; else 409."""
    jobs = services.jobs
    current = _visible_job(services, caller, reader, job_id)
    retryable = current.status in (JobStatus.FAILED, JobStatus.CANCELLED)
    if retryable and not services.staged_path(jobs.work(job_id).staged_name).is_file():
        raise JobStateConflict(
            f"The upload of job '{job_id}' is no longer kept; upload the file again."
        )
    job = jobs.retry(job_id)
    enqueue(celery, jobs, job_id)
    return job
