"""`/v1/jobs`: poll, list, cancel and retry ingestion jobs."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel

from docingest.api.deps import CeleryDep, JobsDep, PrincipalDep, ServicesDep, authorize_index
from docingest.api.enqueue import enqueue
from docingest.pipeline.errors import JobStateConflict
from docingest.pipeline.jobs.job import Job
from docingest.pipeline.keys import JobStatus

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


class JobList(BaseModel):
    jobs: list[Job]


class CancelledJob(Job):
    """The job as a cancel left it: `cancelled` if it was still queued, `cancelling` while its
    worker is stopping (a `GET` shows `processing` until the job ends `cancelled`)."""

    status: JobStatus | Literal["cancelling"]  # type: ignore[assignment]


def _visible_job(jobs: JobsDep, principal: PrincipalDep, job_id: str) -> Job:
    job = jobs.get(job_id)
    principal.check(job.index)
    return job


@router.get("/{job_id}", response_model=Job)
def get_job(job_id: str, jobs: JobsDep, principal: PrincipalDep) -> Job:
    """The job's status, stage and progress."""
    return _visible_job(jobs, principal, job_id)


@router.get("", response_model=JobList)
def list_jobs(
    jobs: JobsDep,
    principal: PrincipalDep,
    index: str | None = None,
    status: JobStatus | None = None,
    limit: int = Query(default=50, ge=1, le=500),
) -> JobList:
    """Recent jobs, newest first."""
    if index is not None:
        authorize_index(index, principal)  # optional here, so not `AuthorizedIndex`
        return JobList(jobs=jobs.recent(index=index, status=status, limit=limit))
    if principal.indexes is None:
        return JobList(jobs=jobs.recent(status=status, limit=limit))
    found: list[Job] = []
    for name in sorted(principal.indexes):
        found.extend(jobs.recent(index=name, status=status, limit=limit))
    found.sort(key=lambda job: job.created_at, reverse=True)
    return JobList(jobs=found[:limit])


@router.delete("/{job_id}", response_model=CancelledJob, status_code=202)
def cancel_job(job_id: str, jobs: JobsDep, principal: PrincipalDep) -> CancelledJob:
    """Cancel a queued or processing job; the index is left as it was. A processing job's
    worker stops within seconds, between OCR pages or embedding batches
    (docs/guides/documents.md, "Jobs")."""
    _visible_job(jobs, principal, job_id)
    job = jobs.cancel(job_id)
    status = "cancelling" if job.status is JobStatus.PROCESSING else job.status
    return CancelledJob(**(job.model_dump() | {"status": status}))


@router.post("/{job_id}/retry", response_model=Job, status_code=202)
def retry_job(
    job_id: str, services: ServicesDep, principal: PrincipalDep, celery: CeleryDep
) -> Job:
    """Queue a failed or cancelled job again, while its staged upload is kept; else 409."""
    jobs = services.jobs
    current = _visible_job(jobs, principal, job_id)
    retryable = current.status in (JobStatus.FAILED, JobStatus.CANCELLED)
    if retryable and not services.staged_path(jobs.work(job_id).staged_name).is_file():
        raise JobStateConflict(
            f"The upload of job '{job_id}' is no longer kept; upload the file again."
        )
    job = jobs.retry(job_id)
    enqueue(celery, jobs, job_id)
    return job
