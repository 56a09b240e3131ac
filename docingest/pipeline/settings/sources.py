"""The source settings (`DOCINGEST_SOURCE*`), a base of `docingest.pipeline.settings.Settings`.

In their own module, as the webhook settings are, only to keep the settings module short.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode


class SourceSettings(BaseSettings):
    """Where sources may read from, and how their runs are scheduled."""

    source_folder_roots: Annotated[list[Path], NoDecode] = Field(default_factory=list)
    """Comma-separated absolute directories a `folder` source may read under (none by
    default: no `folder` source can be set up until an operator names one)."""

    sources_allow_private: bool = False
    """Allow `s3` endpoints and `web` pages whose host resolves to a loopback, link-local,
    private, multicast or unspecified address (the webhooks' address rule). Off, such a
    target is refused at PUT and again before every request of a run."""

    source_scheduler: bool = True
    """Run the source scheduler in `docingest serve` and `docingest worker`: each process
    looks for due sources every `source_poll_seconds` and runs those whose lease it wins."""

    source_poll_seconds: float = Field(default=5.0, gt=0, le=300)
    """How often a scheduler looks for due sources (one Redis command when none is due)."""

    source_lease_seconds: float = Field(default=60.0, ge=1, le=3600)
    """How long a run's lease lasts without renewal: a process that dies mid-run leaves its
    source to another process after this, which resumes the run from its checkpoint."""

    source_concurrency: int = Field(default=2, gt=0, le=64)
    """Runs one process carries at once (each on a thread of its own)."""

    source_runs_kept: int = Field(default=50, gt=0, le=10_000)
    """Runs kept per source for `GET .../sources/{name}/runs`."""

    source_max_item_bytes: int | None = Field(default=None, gt=0)
    """Largest item a source fetches; a larger one counts as failed with
    `document_too_large`. Unset: `max_upload_bytes`."""

    source_request_timeout_seconds: float = Field(default=30.0, gt=0, le=600)
    """Seconds a source's server has to answer one request (connect, or wait for bytes)."""

    @field_validator("source_folder_roots", mode="before")
    @classmethod
    def _roots(cls, value: object) -> object:
        """`a,b` or a JSON list; each must be absolute (no path relative to the working
        directory)."""
        if isinstance(value, str):
            text = value.strip()
            value = (
                json.loads(text)
                if text.startswith("[")
                else [item.strip() for item in text.split(",") if item.strip()]
            )
        if isinstance(value, list):
            for item in value:
                if not Path(item).is_absolute():
                    raise ValueError(f"source_folder_roots must be absolute paths, not {item!r}")
        return value
