"""v1.3 sources: an index kept in sync with a bucket, a website or a server folder, and the
runs that do it."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from docingest.models._base import Body, ErrorInfo, Model

SourceTypeName = Literal["s3", "web", "folder"]


class SourceSchedule(Model):
    every: str
    """A count of s, m, h or d: `"15m"`."""


class SourceSettings(Body):
    """The body of `PUT /v1/indexes/{index}/sources/{name}`."""

    type: str
    """A registered source type: `s3`, `web`, `folder`."""
    config: dict[str, Any] = Field(default_factory=dict)
    schedule: SourceSchedule | None = None
    prune: bool | None = None
    metadata: dict[str, Any] | None = None
    access: list[str] | None = None


class RunCounts(Model):
    listed: int = 0
    new: int = 0
    changed: int = 0
    unchanged: int = 0
    deleted: int = 0
    failed: int = 0


class SourceRun(Model):
    """One run of a source."""

    run_id: str
    status: Literal["queued", "running", "cancelling", "completed", "failed", "cancelled"] | str
    """`cancelling`: its cancel was asked and its process has not stopped it yet."""
    trigger: str | None = None
    created_at: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    counts: RunCounts = Field(default_factory=RunCounts)
    error: ErrorInfo | None = None


class SourceRunList(Model):
    runs: list[SourceRun] = Field(default_factory=list)


class SourceInfo(Model):
    """A source as the server shows it (secrets as "***")."""

    name: str
    index: str | None = None
    type: str
    config: dict[str, Any] = Field(default_factory=dict)
    schedule: SourceSchedule | None = None
    prune: bool = True
    metadata: dict[str, Any] = Field(default_factory=dict)
    access: list[str] | None = None
    state: str = "idle"
    last_run: SourceRun | None = None
    next_run_at: str | None = None
    created_at: str | None = None
    updated_at: str | None = None


class SourceList(Model):
    sources: list[SourceInfo] = Field(default_factory=list)
