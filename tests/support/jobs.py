"""Jobs in tests: a job as the API records it, and waiting until one reaches a status."""

from __future__ import annotations

import uuid
from collections.abc import Collection
from typing import Any

from docingest.pipeline.jobs.state import Job, JobSpec, JobStore
from docingest.pipeline.keys import TERMINAL_STATUSES
from tests.support.waiting import wait_until


def job_spec(
    index: str = "docs",
    *,
    document_id: str = "notes.txt",
    staged_name: str | None = None,
    size_bytes: int = 10,
    **fields: Any,
) -> JobSpec:
    """A job as the API would record it (its staged file is the caller's business)."""
    job_id = fields.pop("job_id", uuid.uuid4().hex)
    return JobSpec(
        job_id=job_id,
        index=index,
        document_id=document_id,
        filename=fields.pop("filename", document_id),
        staged_name=staged_name or job_id,
        size_bytes=size_bytes,
        content_sha256=fields.pop("content_sha256", None),
        content_type=fields.pop("content_type", None),
        metadata=fields.pop("metadata", {}),
        force=fields.pop("force", False),
        callback_url=fields.pop("callback_url", None),
        callback_secret=fields.pop("callback_secret", None),
    )


def wait_for_status(
    jobs: JobStore,
    job_id: str,
    statuses: Collection[str] = TERMINAL_STATUSES,
    *,
    timeout: float = 30.0,
) -> Job:
    """Poll the job until its status is one of `statuses`; return it."""
    found: list[Job] = []

    def reached() -> bool:
        found[:] = [jobs.get(job_id)]
        return found[0].status in statuses

    try:
        wait_until(reached, timeout=timeout, what=f"job {job_id} reaching {statuses}")
    except TimeoutError as exc:
        raise TimeoutError(f"{exc}; last state: {found[0] if found else None}") from None
    return found[0]
