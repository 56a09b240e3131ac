"""The one translation of "Redis is down" into our `DependencyUnavailable` (a transient error).

Only a lost connection and a timeout count: any other Redis error (a script bug, a wrong
type) is ours and stays loud. As httpx's `map_httpcore_exceptions` does, the translation
wraps the calls at the boundary and keeps the cause (`raise ... from exc`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from docingest.pipeline.errors import DependencyUnavailable

REDIS_DOWN: tuple[type[Exception], ...] = (RedisConnectionError, RedisTimeoutError)
"""The Redis errors that mean it cannot be reached now, not that the request was wrong."""

REDIS_UNAVAILABLE = "Redis is unavailable"


@contextmanager
def map_redis_errors(what: str = REDIS_UNAVAILABLE) -> Iterator[None]:
    """Raise `DependencyUnavailable("{what}: {error}")` from a Redis-down error in the block."""
    try:
        yield
    except REDIS_DOWN as exc:
        raise DependencyUnavailable(f"{what}: {exc}") from exc
