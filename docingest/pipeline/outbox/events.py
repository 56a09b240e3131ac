"""The events a webhook may subscribe to."""

from __future__ import annotations

from enum import StrEnum


class Event(StrEnum):
    JOB_COMPLETED = "job.completed"
    JOB_FAILED = "job.failed"
    JOB_CANCELLED = "job.cancelled"
    DOCUMENT_DELETED = "document.deleted"
    SOURCE_SYNC_COMPLETED = "source.sync.completed"
    SOURCE_SYNC_FAILED = "source.sync.failed"
    SOURCE_SYNC_CANCELLED = "source.sync.cancelled"


EVENTS: frozenset[str] = frozenset(event.value for event in Event)
JOB_EVENTS: frozenset[str] = frozenset({Event.JOB_COMPLETED, Event.JOB_FAILED, Event.JOB_CANCELLED})
"""The events a per-upload `callback_url` receives (its own job's)."""
