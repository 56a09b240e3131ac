"""The test Redis: DB 15 of the local server, a unique key prefix per test or deployment, and
the deletion of that prefix's keys (never a flush: other engineers share the server)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from redis import Redis

TEST_REDIS_URL = "redis://127.0.0.1:6379/15"


def unique_prefix(tag: str) -> str:
    return f"test-{tag}:{uuid.uuid4().hex[:12]}:"


def purge_keys(prefix: str) -> None:
    """Delete every Redis key of one test deployment (its unique prefix on DB 15)."""
    connection = Redis.from_url(TEST_REDIS_URL)
    try:
        keys = list(connection.scan_iter(match=f"{prefix}*", count=500))
        for start in range(0, len(keys), 500):
            connection.delete(*keys[start : start + 500])
    finally:
        connection.close()


@contextmanager
def private_redis(prefix: str) -> Iterator[Redis]:
    """A decoding client on DB 15 (as the services build theirs); every key under `prefix` is
    deleted afterwards."""
    client = Redis.from_url(TEST_REDIS_URL, decode_responses=True)
    try:
        yield client
    finally:
        client.close()
        purge_keys(prefix)


@dataclass(frozen=True)
class TestRedis:
    """A client of the test Redis and the key prefix that is the test's own."""

    __test__ = False  # not a test class, despite its name

    client: Redis
    prefix: str

    def own_keys(self) -> list[str]:
        """The keys under the prefix."""
        return list(self.client.scan_iter(match=f"{self.prefix}*"))
