"""What a job is, as data: the API's `Job`, what the API records (`JobSpec`), what a worker
reads (`JobWork`), a claim's outcome, and how each is read from the job's Redis hash.

`docingest.pipeline.jobs.state.JobStore` keeps these in Redis; this module holds no client.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from docingest.pipeline.keys import JobStage, JobStatus


class Job(BaseModel):
    """A job as the API shows it (the contract's Job, plus a few extensions)."""

    model_config = ConfigDict(frozen=True)

    job_id: str
    index: str
    document_id: str
    filename: str
    status: JobStatus
    stage: JobStage | None
    progress: float
    pages_total: int | None
    pages_done: int
    chunks_total: int | None
    chunks_done: int
    """Chunks embedded and stored."""
    chunks_embedded: int
    """Chunks with a vector (embedded now or reused), stored or not yet."""
    created_at: str
    started_at: str | None
    finished_at: str | None
    heartbeat_at: str | None
    attempts: int
    result: dict[str, Any] | None
    error: dict[str, str] | None
    size_bytes: int
    content_sha256: str | None
    metadata: dict[str, Any]
    force: bool
    callback_url: str | None = None
    """The upload's `callback_url`, which receives this job's events (docs/guides/webhooks.md)."""
    access: list[str] | None = None
    """The access list the upload gave the document; None: none given (the stored
    version's is kept)."""


@dataclass(frozen=True, slots=True)
class JobSpec:
    """What the API records for a new upload."""

    job_id: str
    index: str
    document_id: str
    filename: str
    staged_name: str
    """The staged upload's file name inside the staging directory (never the client's)."""
    size_bytes: int
    content_sha256: str | None
    content_type: str | None
    metadata: Mapping[str, Any]
    force: bool
    callback_url: str | None = None
    callback_secret: str | None = None
    """Signs the callback's deliveries; kept in the job hash, never shown."""
    access: list[str] | None = None


@dataclass(frozen=True, slots=True)
class JobWork:
    """What a worker needs to run a job (the parts of the hash the API does not show)."""

    job: Job
    staged_name: str
    content_type: str | None
    version: int | None
    usage_carried: dict[str, Any] | None = None
    """The usage of the job's earlier attempts that ended in a transient error (`JobUsage`
    as a dict), added to the usage of the attempt that completes it."""


@dataclass(frozen=True, slots=True)
class Claim:
    """The outcome of claiming a job: `claimed` with an attempt number, or why not."""

    outcome: str
    """claimed | missing | finished | busy | cancelled | exhausted"""
    attempt: int


def _rfc3339(value: str | None) -> str | None:
    if not value:
        return None
    moment = datetime.fromtimestamp(float(value), tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _int(value: str | None) -> int | None:
    return int(value) if value else None


def _json(value: str | None) -> Any:
    return None if not value else json.loads(value)


def job_from_hash(raw: Mapping[str, str]) -> Job:
    """Build a `Job` from its Redis hash."""
    return Job(
        job_id=raw["job_id"],
        index=raw["index"],
        document_id=raw["document_id"],
        filename=raw["filename"],
        status=JobStatus(raw["status"]),
        stage=JobStage(raw["stage"]) if raw.get("stage") else None,
        progress=float(raw.get("progress") or 0.0),
        pages_total=_int(raw.get("pages_total")),
        pages_done=_int(raw.get("pages_done")) or 0,
        chunks_total=_int(raw.get("chunks_total")),
        chunks_done=_int(raw.get("chunks_done")) or 0,
        chunks_embedded=_int(raw.get("chunks_embedded")) or 0,
        created_at=_rfc3339(raw["created_at"]) or "",
        started_at=_rfc3339(raw.get("started_at")),
        finished_at=_rfc3339(raw.get("finished_at")),
        heartbeat_at=_rfc3339(raw.get("heartbeat_at")),
        attempts=_int(raw.get("attempts")) or 0,
        result=_json(raw.get("result")),
        error=_json(raw.get("error")),
        size_bytes=_int(raw.get("size_bytes")) or 0,
        content_sha256=raw.get("content_sha256") or None,
        metadata=_json(raw.get("metadata")) or {},
        force=raw.get("force") == "1",
        callback_url=raw.get("callback_url") or None,
        access=_json(raw.get("access")),
    )


def work_from_hash(raw: Mapping[str, str]) -> JobWork:
    """Build a `JobWork` from its Redis hash."""
    return JobWork(
        job=job_from_hash(raw),
        staged_name=raw["staged_name"],
        content_type=raw.get("content_type") or None,
        version=_int(raw.get("version")),
        usage_carried=json.loads(raw["usage_carried"]) if raw.get("usage_carried") else None,
    )
