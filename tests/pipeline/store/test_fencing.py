"""Document versions and store locks against the real Redis (DB 15, one key prefix per test)."""

from __future__ import annotations

import logging
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from docingest.pipeline.errors import DependencyUnavailable, DocumentBusy
from docingest.pipeline.keys import Keys
from docingest.pipeline.store.fencing import DocumentFence
from tests.support.redis_db import TEST_REDIS_URL, TestRedis


@pytest.fixture
def fence(redis_db: TestRedis) -> DocumentFence:
    return DocumentFence(redis_db.client, key_prefix=redis_db.prefix)


def lock_key(redis_db: TestRedis, index: str, document_id: str) -> str:
    """The key of the fence's store-phase lock of one document."""
    return Keys(redis_db.prefix).document_lock(index, document_id)


def test_versions_count_up_per_document(fence: DocumentFence) -> None:
    assert fence.current_version("idx", "a.pdf") is None
    assert [fence.next_version("idx", "a.pdf") for _ in range(3)] == [1, 2, 3]
    assert fence.next_version("idx", "b.pdf") == 1
    assert fence.next_version("other", "a.pdf") == 1
    assert fence.current_version("idx", "a.pdf") == 3


def test_any_document_id_has_its_own_counter(fence: DocumentFence) -> None:
    for document_id in ("x:y", "x", "dossier/été 2024.pdf", "x:y:"):
        assert fence.next_version("idx", document_id) == 1
    assert fence.current_version("idx", "x:y") == 1


@pytest.mark.parametrize(
    ("existing", "floor", "expected"),
    [
        (None, 7, 8),  # Redis lost the counter; Qdrant still holds version 7
        (3, 7, 8),  # an old snapshot was restored
        (10, 7, 11),  # the counter is ahead: the floor changes nothing
        (None, 0, 1),
    ],
)
def test_the_floor_keeps_versions_above_the_store(
    fence: DocumentFence, existing: int | None, floor: int, expected: int
) -> None:
    for _ in range(existing or 0):
        fence.next_version("idx", "doc")
    assert fence.next_version("idx", "doc", floor=floor) == expected
    assert fence.current_version("idx", "doc") == expected


def test_concurrent_callers_get_distinct_versions(redis_db: TestRedis) -> None:
    prefix = redis_db.prefix
    results: list[int] = []
    lock = threading.Lock()

    def worker() -> None:
        own = DocumentFence(redis.Redis.from_url(TEST_REDIS_URL), key_prefix=prefix)
        for _ in range(25):
            version = own.next_version("idx", "doc", floor=5)
            with lock:
                results.append(version)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == list(range(6, 106))


def test_only_the_newest_version_is_current(fence: DocumentFence) -> None:
    assert fence.is_current("idx", "doc", 1)  # nothing handed out yet
    first = fence.next_version("idx", "doc")
    assert fence.is_current("idx", "doc", first)
    second = fence.next_version("idx", "doc")
    assert not fence.is_current("idx", "doc", first)
    assert fence.is_current("idx", "doc", second)


def test_the_lock_serialises_holders(fence: DocumentFence) -> None:
    events: list[str] = []
    holding = threading.Event()

    def first() -> None:
        with fence.lock("idx", "doc", timeout=5):
            events.append("first in")
            holding.set()
            time.sleep(0.3)
            events.append("first out")

    thread = threading.Thread(target=first)
    thread.start()
    holding.wait(5)
    with fence.lock("idx", "doc", timeout=5):
        events.append("second in")
    thread.join()
    assert events == ["first in", "first out", "second in"]


def test_other_documents_are_not_blocked(fence: DocumentFence) -> None:
    with fence.lock("idx", "a", timeout=5), fence.lock("idx", "b", timeout=5, blocking_timeout=0):
        pass


def test_a_held_lock_makes_a_short_wait_fail_as_busy(fence: DocumentFence) -> None:
    with fence.lock("idx", "doc", timeout=5):
        # Busy, not acquired once the holder's 5 s TTL ran out (which would enter the block).
        with (
            pytest.raises(DocumentBusy) as caught,
            fence.lock("idx", "doc", timeout=5, blocking_timeout=0.2),
        ):
            pass
    assert caught.value.code == "document_busy"


def test_a_dead_holders_lock_expires(redis_db: TestRedis, fence: DocumentFence) -> None:
    # A worker that dies holds the lock until its TTL: acquire and never release.
    dead = redis_db.client.lock(lock_key(redis_db, "idx", "doc"), timeout=0.5)
    assert dead.acquire(blocking=False)
    started = time.monotonic()
    with fence.lock("idx", "doc", timeout=5, blocking_timeout=30):  # room for a loaded machine
        waited = time.monotonic() - started
    assert waited > 0.2  # it waited for the TTL: a loaded machine only lengthens the wait


def test_a_lock_that_expired_while_held_is_released_quietly(
    fence: DocumentFence, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="docingest.pipeline.store.fencing"):
        with fence.lock("idx", "doc", timeout=0.2):
            time.sleep(0.4)
    assert "expired before release" in caplog.text
    with fence.lock("idx", "doc", timeout=5, blocking_timeout=0):
        pass


def test_a_kept_alive_lock_outlives_its_ttl_while_held(
    redis_db: TestRedis, fence: DocumentFence
) -> None:
    with fence.lock("idx", "doc", timeout=0.3, keep_alive=True):
        time.sleep(1.0)  # more than three TTLs
        assert redis_db.client.exists(lock_key(redis_db, "idx", "doc"))
        with pytest.raises(DocumentBusy), fence.lock("idx", "doc", blocking_timeout=0):
            pass
    assert not redis_db.client.exists(lock_key(redis_db, "idx", "doc"))
    assert not [t for t in threading.enumerate() if t.name.startswith("lock-")], "renewer left"
    with fence.lock("idx", "doc", timeout=5, blocking_timeout=0):
        pass


HOLD_AND_WAIT = """
import sys, time
import redis
from docingest.pipeline.store.fencing import DocumentFence
fence = DocumentFence(redis.Redis.from_url(sys.argv[1]), key_prefix=sys.argv[2])
with fence.lock("idx", "doc", timeout=float(sys.argv[3]), keep_alive=True):
    print("held", flush=True)
    time.sleep(600)
"""


def test_a_killed_holders_kept_alive_lock_is_free_within_its_ttl(
    redis_db: TestRedis, fence: DocumentFence
) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_AND_WAIT, TEST_REDIS_URL, redis_db.prefix, "1.5"],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        time.sleep(2.0)  # renewed past its first TTL while the holder lives
        with pytest.raises(DocumentBusy), fence.lock("idx", "doc", blocking_timeout=0):
            pass
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        # Redis's own clock, which a loaded machine does not stretch: the dead holder's lock
        # lives at most its TTL, and no renewal outlives the holder.
        remaining_ms = redis_db.client.pttl(lock_key(redis_db, "idx", "doc"))
        with fence.lock("idx", "doc", timeout=5, blocking_timeout=30):
            pass
    finally:
        holder.kill()
        holder.wait(10)
        assert holder.stdout is not None
        holder.stdout.close()
    # -2: it already expired (the holder was starved past its TTL before the kill).
    assert remaining_ms == -2 or 0 < remaining_ms <= 1500, remaining_ms


def test_unreachable_redis_is_a_dependency_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed_port = sock.getsockname()[1]
    down = redis.Redis(
        host="127.0.0.1", port=closed_port, socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0)
    )
    fence = DocumentFence(down, key_prefix="unused:")
    for call in (
        lambda: fence.next_version("idx", "doc", floor=3),
        lambda: fence.current_version("idx", "doc"),
        lambda: fence.is_current("idx", "doc", 1),
    ):
        with pytest.raises(DependencyUnavailable):
            call()
    with pytest.raises(DependencyUnavailable) as caught, fence.lock("idx", "doc", timeout=1):
        pass
    assert caught.value.code == "dependency_unavailable"
