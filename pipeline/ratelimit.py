"""Requests-per-minute and tokens-per-minute limits shared by every worker on every host.

A limiter reserves capacity before a request is sent, so ten workers sharing one API key do
not stampede it into 429s.
"""

from __future__ import annotations

from typing import Protocol


class RateLimiter(Protocol):
    def acquire(self, *, tokens: int, deadline: float | None = None) -> None:
        """Block until one request and `tokens` tokens are reserved.

        `deadline` is a `time.monotonic()` value; raise `ProviderRateLimited` if the
        reservation cannot be made before it.
        """
        ...


class NoRateLimit:
    """The limiter used when no limit is configured."""

    def acquire(self, *, tokens: int, deadline: float | None = None) -> None:
        return None
