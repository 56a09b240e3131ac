"""API keys made at run time (`POST /v1/keys`), kept in Redis so every API process reads the
same ones: a key is found by the sha256 of its secret, never stored in clear, and a revoked
key is gone from Redis at once, so the next request any process checks it with is refused.

A key has a role: `admin` (everything, every document, manages keys), `service` (acts for the
principals a request names in `X-Docingest-Principals`) or `user` (holds its own
`principals`), and may be limited to some indexes. Keys from `DOCINGEST_API_KEYS` are the
same records, read from the settings instead (`docingest.api.auth`).
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Literal

from redis import Redis

from docingest.pipeline.errors import ApiKeyNotFound, InvalidAccess
from docingest.pipeline.keys import Keys
from docingest.pipeline.redis_errors import map_redis_errors
from docingest.pipeline.store.access import MAX_READER_PRINCIPALS, validate_principals

Role = Literal["admin", "service", "user"]
ROLES: tuple[Role, ...] = ("admin", "service", "user")
SECRET_PREFIX = "dik_"
"""Starts every secret made here, so a leaked one is recognisable (secret scanners)."""
CACHE_SECONDS = 0.5
"""How long a process keeps a key's record: a revoke is refused everywhere within this (the
contract says a second), and a busy caller costs Redis two reads a second, not one a request."""


@dataclass(frozen=True, slots=True)
class KeyRecord:
    """A key as stored and listed (never its secret)."""

    id: str
    name: str
    role: Role
    indexes: list[str] | None
    principals: list[str]
    created_at: str


def check_grant(role: str, principals: Sequence[str]) -> list[str]:
    """The principals of a key of `role`, checked: only a `user` key holds its own."""
    if role not in ROLES:
        raise InvalidAccess(f"role must be one of {', '.join(ROLES)}, not {role!r}.")
    held = validate_principals(list(principals), most=MAX_READER_PRINCIPALS, what="principals")
    if held and role != "user":
        raise InvalidAccess(
            f"A {role} key holds no principals of its own: an admin sees every document, a "
            "service names the principals it acts for in each request's "
            "X-Docingest-Principals header."
        )
    return held


def digest_of(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class ApiKeyStore:
    """The run-time keys in Redis; thread-safe."""

    def __init__(self, redis: Redis, *, keys: Keys) -> None:
        self._redis = redis
        self._keys = keys
        self._cache: dict[str, tuple[float, KeyRecord | None]] = {}

    def create(
        self, *, name: str, role: Role, indexes: list[str] | None, principals: Sequence[str]
    ) -> tuple[KeyRecord, str]:
        """Make a key; return its record and its secret (shown this once)."""
        record = KeyRecord(
            id=f"key_{secrets.token_hex(8)}",
            name=name,
            role=role,
            indexes=None if indexes is None else sorted(set(indexes)),
            principals=check_grant(role, principals),
            created_at=datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        )
        secret = SECRET_PREFIX + secrets.token_urlsafe(32)
        digest = digest_of(secret)
        with map_redis_errors(), self._redis.pipeline(transaction=True) as pipe:
            pipe.hset(self._keys.api_keys, digest, json.dumps(asdict(record)))
            pipe.hset(self._keys.api_key_ids, record.id, digest)
            pipe.execute()
        return record, secret

    def list(self) -> list[KeyRecord]:
        with map_redis_errors():
            raw = self._redis.hvals(self._keys.api_keys)
        records = [_record(value) for value in raw]
        return sorted(records, key=lambda record: (record.created_at, record.id))

    def revoke(self, key_id: str) -> None:
        """Delete the key; `ApiKeyNotFound` if there is no such id."""
        with map_redis_errors():
            digest = self._redis.hget(self._keys.api_key_ids, key_id)
            if digest is None:
                raise ApiKeyNotFound(f"There is no API key with id {key_id[:80]!r}.")
            with self._redis.pipeline(transaction=True) as pipe:
                pipe.hdel(self._keys.api_keys, str(digest))
                pipe.hdel(self._keys.api_key_ids, key_id)
                pipe.execute()
        self._cache.pop(str(digest), None)

    def find(self, digest: str) -> KeyRecord | None:
        """The key whose secret has this hex sha256, or None (read at most every
        `CACHE_SECONDS` per process)."""
        now = time.monotonic()
        cached = self._cache.get(digest)
        if cached is not None and now - cached[0] < CACHE_SECONDS:
            return cached[1]
        with map_redis_errors():
            raw = self._redis.hget(self._keys.api_keys, digest)
        record = None if raw is None else _record(raw)
        if len(self._cache) > 10_000:  # unknown secrets must not grow it without end
            self._cache.clear()
        self._cache[digest] = (now, record)
        return record

    def still_valid(self, digest: str) -> bool:
        """Whether the key is still there, read from Redis now (no cache): for a long
        request to check its key again before it acts."""
        with map_redis_errors():
            return bool(self._redis.hexists(self._keys.api_keys, digest))


def _record(raw: str | bytes) -> KeyRecord:
    data = json.loads(raw)
    return KeyRecord(**data)
