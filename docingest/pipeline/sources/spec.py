"""A source as stored and shown, its schedule, and a run as the API shows it."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from docingest.pipeline.errors import InvalidSource

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
"""A source's name: as a webhook's (no ":", which the Redis keys rely on)."""
SECRET_MASK = "***"
_EVERY = re.compile(r"^\s*(\d+)\s*([smhd])\s*$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MIN_EVERY_SECONDS = 1
MAX_EVERY_SECONDS = 366 * 86400
COUNT_FIELDS = ("listed", "new", "changed", "unchanged", "deleted", "failed")
RunStatus = Literal["queued", "running", "cancelling", "completed", "failed", "cancelled"]
"""`cancelling`: a queued or running run whose cancel was asked, until its process stops it."""


def check_name(name: str) -> None:
    if not NAME.match(name):
        raise InvalidSource(
            "A source name is 1-64 letters, digits, '_', '.' or '-', starting with a letter "
            "or digit."
        )


def every_seconds(every: str) -> int:
    """`"15m"` → 900; `InvalidSource` for anything but a count of s, m, h or d."""
    match = _EVERY.match(every)
    seconds = int(match.group(1)) * _UNIT_SECONDS[match.group(2)] if match else 0
    if not MIN_EVERY_SECONDS <= seconds <= MAX_EVERY_SECONDS:
        raise InvalidSource(
            f'A schedule\'s every is a count of s, m, h or d such as "15m", from '
            f"{MIN_EVERY_SECONDS} s to 366 d, not {every!r}."
        )
    return seconds


class Schedule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    every: str = Field(max_length=16)

    @field_validator("every")
    @classmethod
    def _valid(cls, value: str) -> str:
        every_seconds(value)
        return value.strip()

    @property
    def seconds(self) -> int:
        return every_seconds(self.every)


class StoredSource(BaseModel):
    """A source as kept in Redis (secrets in clear, as a webhook's secret is: the run needs
    them); never shown as such (`public_config`)."""

    model_config = ConfigDict(frozen=True)

    name: str
    index: str
    type: str
    config: dict[str, Any]
    schedule: Schedule | None = None
    prune: bool = True
    metadata: dict[str, Any] = Field(default_factory=dict)
    access: list[str] | None = None
    created_at: float
    updated_at: float

    def same_as(self, other: StoredSource) -> bool:
        fields = ("type", "config", "schedule", "prune", "metadata", "access")
        return all(getattr(self, field) == getattr(other, field) for field in fields)


def public_config(config: dict[str, Any], secrets: frozenset[str]) -> dict[str, Any]:
    """`config` with every secret field that is set shown as `SECRET_MASK`."""
    return {
        key: SECRET_MASK if key in secrets and value is not None else value
        for key, value in config.items()
    }


class RunCounts(BaseModel):
    listed: int = 0
    new: int = 0
    changed: int = 0
    unchanged: int = 0
    deleted: int = 0
    failed: int = 0


class RunError(BaseModel):
    code: str
    message: str


class Run(BaseModel):
    run_id: str
    status: RunStatus
    trigger: Literal["manual", "schedule"] = "manual"
    created_at: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    counts: RunCounts = Field(default_factory=RunCounts)
    error: RunError | None = None
