"""A job waits for a store server that does not answer, without spending its attempts.

A job's attempts (`job_max_attempts`) pay for its own failures: a lost worker, a provider
error. A store server that does not answer (PostgreSQL or Qdrant not started yet, restarting,
failing over) stops every job alike, and the few seconds of backoff between attempts would
spend them all. So before a job is claimed, a worker on a store server checks that the store
answers; while it does not, the job stays `queued` with its attempts untouched and is run
again after a backoff. The wait is bounded: `job_store_wait_seconds` from when the job first
found the store down (the worker's clock, carried from one task message to the next); past it
the job is claimed and its attempts run as usual, so a store that never comes back fails the
job with `dependency_unavailable` once its attempts are spent. The embedded store lives in the
worker's own process: there is nothing to wait for.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from docingest.pipeline.errors import DependencyUnavailable
from docingest.pipeline.services import Services

STORE_CHECK_MAX_SECONDS = 30.0
"""Longest pause between two checks for a waiting job: a job starts soon after the store is
back, and its held message stays well under the sweep's `lost_message_after_seconds`, past
which the sweep would take it for lost and send a copy."""


@dataclass(frozen=True, slots=True)
class StoreWait:
    """How long one job has waited for the store so far."""

    since: float
    """`time.time()` when the job first found the store down."""
    checks: int = 1
    """How many times in a row it found it so."""

    def to_message(self) -> dict[str, float]:
        """The form a task message carries (JSON)."""
        return {"since": self.since, "checks": self.checks}

    @classmethod
    def from_message(cls, raw: Mapping[str, float] | None) -> StoreWait | None:
        """Read `to_message`'s form; None for a message without one (a first delivery)."""
        if not raw:
            return None
        return cls(since=float(raw["since"]), checks=int(raw.get("checks", 1)))

    def again(self) -> StoreWait:
        return StoreWait(since=self.since, checks=self.checks + 1)


def store_problem(services: Services) -> DependencyUnavailable | None:
    """Why the store server does not answer; None when it does, or when the store is the
    embedded one (in this process)."""
    if not services.settings.shared_store:
        return None
    try:
        services.store.ping()
    except DependencyUnavailable as exc:
        return exc
    return None


def check_cap(services: Services) -> float:
    """The longest pause between two checks (`STORE_CHECK_MAX_SECONDS`, or less when the
    settings make the retries or the sweep's patience shorter)."""
    settings = services.settings
    return min(
        STORE_CHECK_MAX_SECONDS,
        settings.job_retry_max_seconds,
        settings.lost_message_after_seconds / 2,
    )
