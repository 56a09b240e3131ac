"""Ingestion: the answer to an upload, and a job with its stage, counters and result."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from docingest.models._base import ErrorInfo, Model

JobStatus = Literal["queued", "processing", "completed", "failed", "cancelled"]
JobStage = Literal["detecting", "extracting", "chunking", "embedding", "storing"]
TERMINAL: frozenset[str] = frozenset({"completed", "failed", "cancelled"})
"""A job in one of these statuses is finished (until someone retries it)."""


class UploadAccepted(Model):
    """`202` to an upload: the job that will ingest it."""

    job_id: str
    index: str
    document_id: str
    status: str
    status_url: str


class JobResult(Model):
    """What a completed job stored."""

    document_id: str | None = None
    version: int | None = None
    format: str | None = None
    pages: int | None = None
    words: int | None = None
    chunks: int = 0
    chunks_reused: int = 0
    ocr_pages: int = 0
    unchanged: bool = False
    usage: dict[str, Any] | None = None
    """The job's embedding usage (requests, tokens, endpoints): a docingest extension."""
    format_note: str | None = None
    """Set when the bytes were read as another format than the name says."""


class Job(Model):
    """`GET /v1/jobs/{job_id}`: the service's own stage and counters."""

    job_id: str
    index: str
    document_id: str
    filename: str
    status: str
    """One of `JobStatus`; `cancelling` in a cancel's answer while the worker stops."""
    stage: JobStage | None = None
    progress: float = 0.0
    pages_total: int | None = None
    pages_done: int = 0
    chunks_total: int | None = None
    chunks_done: int = 0
    """Chunks embedded and stored."""
    chunks_embedded: int = 0
    """v1.1: chunks with a vector (embedded or reused), stored or not yet."""
    created_at: str
    started_at: str | None = None
    finished_at: str | None = None
    heartbeat_at: str | None = None
    attempts: int = 0
    result: JobResult | None = None
    error: ErrorInfo | None = None
    size_bytes: int | None = None
    content_sha256: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    force: bool = False
    callback_url: str | None = None
    """v1.2: where this job's events are also delivered, when its upload named one."""
    access: list[str] | None = None
    """v1.3: the access list its upload gave the document (None: the stored one kept)."""

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL


class JobList(Model):
    """`GET /v1/jobs`: recent jobs, newest first (a cursor if a server pages them)."""

    jobs: list[Job]
    next_cursor: str | None = None
