"""Every Redis key, queue name and job state name docingest uses, in one place.

    {prefix}job:{job_id}              hash: one job (see `pipeline.jobs.state`); expires `ttl` after
                                      it finishes
    {prefix}jobs                      zset: every job id, scored by creation time
    {prefix}jobs:index:{index}        zset: the job ids of one index, scored by creation time
    {prefix}jobs:queued               zset: queued job ids, scored by when they were queued
    {prefix}jobs:running              zset: processing job ids, scored by their last heartbeat
    {prefix}jobs:finished             hash: jobs finished per terminal status (counters)
    {prefix}version:{index}:{doc}     string: newest version handed out (`pipeline.store.fencing`)
    {prefix}lock:{index}:{doc}        lock: a document's store phase (`pipeline.store.fencing`)
    docingest:ratelimit:...           embedding rate limiter (`pipeline.embedders.ratelimit`): one
                                      prefix for all deployments, since a provider's limit
                                      belongs to its credential, not to a deployment
    {prefix}housekeeping:tick         string with a TTL: who runs the next sweep

Index names cannot contain ":", so a document id after one may contain anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

DEFAULT_PREFIX = "docingest:"

INGEST_QUEUE = "docingest.ingest"
"""Celery queue of ingestion tasks."""
HOUSEKEEPING_QUEUE = "docingest.housekeeping"
"""Celery queue of the periodic sweep, so it never waits behind a backlog of uploads."""


class JobStatus(StrEnum):
    QUEUED = "queued"
    PROCESSING = "processing"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in _TERMINAL


_TERMINAL = frozenset({JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.CANCELLED})


class JobStage(StrEnum):
    """What a processing job is doing, in pipeline order."""

    DETECTING = "detecting"
    EXTRACTING = "extracting"
    CHUNKING = "chunking"
    EMBEDDING = "embedding"
    STORING = "storing"


@dataclass(frozen=True, slots=True)
class Keys:
    """The Redis keys of one deployment (one `prefix`)."""

    prefix: str = DEFAULT_PREFIX

    def job(self, job_id: str) -> str:
        return f"{self.prefix}job:{job_id}"

    @property
    def jobs(self) -> str:
        return f"{self.prefix}jobs"

    def index_jobs(self, index: str) -> str:
        return f"{self.prefix}jobs:index:{index}"

    @property
    def queued(self) -> str:
        return f"{self.prefix}jobs:queued"

    @property
    def running(self) -> str:
        return f"{self.prefix}jobs:running"

    @property
    def finished(self) -> str:
        return f"{self.prefix}jobs:finished"

    @property
    def housekeeping_tick(self) -> str:
        return f"{self.prefix}housekeeping:tick"
