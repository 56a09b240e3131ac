"""Redis fencing for replace-on-reingest: version numbers per document and a store-phase lock.

Every upload of a document gets the next version from a per-(index, document) counter. An
attempt may write and publish only while its version is the newest handed out (`is_current`),
so a slow attempt that finishes after a newer upload was published drops its work instead of
replacing the newer version. The check-write-publish-retire sequence of one document runs
under `lock`, so two attempts never interleave their store calls. The lock has a TTL, so a
worker that dies holding it blocks the document for at most that long; with `keep_alive` the TTL
is short and a thread of the holder renews it, so a live holder keeps the lock as long as it
writes and a killed one frees it within seconds instead of the next attempt waiting for minutes.

The counter is the source of truth only while Redis keeps it. If Redis loses it (flushed,
restored from an old snapshot) while Qdrant still holds version 7, `next_version(floor=7)`
first raises it to the floor, atomically, so versions never go backwards.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from redis.exceptions import LockError, LockNotOwnedError, RedisError

from docingest.pipeline.errors import DocumentBusy
from docingest.pipeline.keys import DEFAULT_PREFIX, Keys
from docingest.pipeline.redis_errors import REDIS_DOWN, map_redis_errors

if TYPE_CHECKING:
    from redis import Redis
    from redis.lock import Lock

log = logging.getLogger(__name__)

DEFAULT_LOCK_TIMEOUT = 600.0
"""Seconds a store-phase lock lives unless released: longer than any one document's writes."""
KEEP_ALIVE_TIMEOUT = 15.0
"""TTL of a kept-alive lock, renewed every third of it: how long a dead holder blocks."""

# KEYS[1] = counter, ARGV[1] = floor. Raise a missing or lower counter to the floor, then INCR.
_NEXT_VERSION = """
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
local floor = tonumber(ARGV[1])
if current < floor then
    redis.call('SET', KEYS[1], floor)
end
return redis.call('INCR', KEYS[1])
"""

# KEYS[1] = counter, ARGV[1] = the value the caller saw ("" for none), ARGV[2] = floor.
# As _NEXT_VERSION, but only while the counter still holds what the caller saw; else -1.
_NEXT_VERSION_IF = """
local seen = redis.call('GET', KEYS[1]) or ''
if seen ~= ARGV[1] then
    return -1
end
local current = tonumber(seen) or 0
local floor = tonumber(ARGV[2])
if current < floor then
    current = floor
end
redis.call('SET', KEYS[1], current + 1)
return current + 1
"""


class DocumentFence:
    """Per-document version counters and locks in Redis under `key_prefix`."""

    def __init__(self, redis: Redis, key_prefix: str = DEFAULT_PREFIX) -> None:
        self._redis = redis
        self._keys = Keys(key_prefix)
        self._next_version = redis.register_script(_NEXT_VERSION)
        self._next_version_if = redis.register_script(_NEXT_VERSION_IF)

    def next_version(self, index: str, document_id: str, *, floor: int = 0) -> int:
        """Hand out the document's next version, never at or below `floor` (the store's)."""
        counter = self._keys.document_version(index, document_id)
        with map_redis_errors():
            return int(self._next_version(keys=[counter], args=[floor]))

    def next_version_if(
        self, index: str, document_id: str, *, seen: int | None, floor: int = 0
    ) -> int | None:
        """Hand out the next version as `next_version` does, but only if the newest handed out
        is still `seen`; None if another attempt took one meanwhile (so the caller, which
        must not supersede it, can say so instead)."""
        counter = self._keys.document_version(index, document_id)
        expected = "" if seen is None else str(seen)
        with map_redis_errors():
            version = int(self._next_version_if(keys=[counter], args=[expected, floor]))
        return None if version < 0 else version

    def current_version(self, index: str, document_id: str) -> int | None:
        """Return the newest version handed out for the document, or None if none was."""
        with map_redis_errors():
            value = self._redis.get(self._keys.document_version(index, document_id))
        return None if value is None else int(value)

    def is_current(self, index: str, document_id: str, version: int) -> bool:
        """Whether `version` may still be published: no newer version was handed out."""
        current = self.current_version(index, document_id)
        return current is None or version >= current

    @contextmanager
    def lock(
        self,
        index: str,
        document_id: str,
        *,
        timeout: float = DEFAULT_LOCK_TIMEOUT,
        blocking_timeout: float | None = None,
        keep_alive: bool = False,
    ) -> Iterator[None]:
        """Hold the document's store-phase lock; it expires `timeout` seconds after it was
        taken, or with `keep_alive` after its last renewal (every `timeout / 3` s).

        Waits up to `blocking_timeout` (default `timeout`: by then a dead holder's lock has
        expired) and raises `DocumentBusy` if another attempt still holds it.
        """
        lock = self._redis.lock(
            self._keys.document_lock(index, document_id),
            timeout=timeout,
            blocking_timeout=timeout if blocking_timeout is None else blocking_timeout,
            thread_local=False,  # the keep-alive thread renews it with the holder's token
        )
        try:
            with map_redis_errors():
                acquired = lock.acquire()
        except LockError as exc:  # pragma: no cover - acquire reports a timeout as False
            raise DocumentBusy(_busy_message(document_id)) from exc
        if not acquired:
            raise DocumentBusy(_busy_message(document_id))
        renewer = _KeepAlive(lock, every=timeout / 3, what=document_id) if keep_alive else None
        try:
            yield
        finally:
            if renewer is not None:
                renewer.stop()
            try:
                lock.release()
            except LockNotOwnedError:
                log.warning(
                    "the store lock of document %r in index %r expired before release; "
                    "raise its timeout",
                    document_id,
                    index,
                )
            except REDIS_DOWN as exc:  # the TTL frees it; do not hide the body's error
                log.warning("could not release the store lock of %r: %s", document_id, exc)


class _KeepAlive:
    """A thread that resets a held lock's TTL every `every` seconds until stopped."""

    def __init__(self, lock: Lock, *, every: float, what: str) -> None:
        self._lock, self._every, self._what = lock, every, what
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lock-{what}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stopped.wait(self._every):
            try:
                self._lock.reacquire()
            except LockNotOwnedError:  # it expired (Redis unreachable for a whole TTL)
                log.warning("the store lock of document %r expired while held", self._what)
                return
            except RedisError as exc:  # a blip: the next renewal may pass before the TTL ends
                log.warning("could not renew the store lock of %r: %s", self._what, exc)


def _busy_message(document_id: str) -> str:
    return f"Another upload of document {document_id!r} is being stored; try again shortly."
