"""The shared rate limiter against the real Redis (DB 15, one key prefix per test)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence

import pytest
import redis
import redis.exceptions
from redis.backoff import NoBackoff
from redis.retry import Retry

from docingest.pipeline.embedders.ratelimit import NoRateLimit, RedisRateLimiter, build_rate_limiter
from docingest.pipeline.errors import DependencyUnavailable, ProviderRateLimited
from tests.support.paths import REPO_DIR
from tests.support.redis_db import TEST_REDIS_URL, TestRedis

WINDOW = 1.0
"""Window length of most tests; the production default is 60 s."""


def limiter(
    redis_db: TestRedis,
    *,
    max_requests: int = 0,
    max_tokens: int = 0,
    window: float = WINDOW,
) -> RedisRateLimiter:
    return RedisRateLimiter(
        redis_db.client,
        scope="openai:key-1",
        max_requests=max_requests,
        max_tokens=max_tokens,
        window_seconds=window,
        key_prefix=redis_db.prefix,
    )


def busiest_window(grants: Sequence[tuple[float, int]], window: float) -> tuple[int, int]:
    """Most requests and most tokens granted in any half-open interval `[a, a + window)`."""
    grants = sorted(grants)
    most_requests = most_tokens = 0
    end = tokens = 0
    for start, (at, _) in enumerate(grants):
        while end < len(grants) and grants[end][0] < at + window:
            tokens += grants[end][1]
            end += 1
        most_requests = max(most_requests, end - start)
        most_tokens = max(most_tokens, tokens)
        tokens -= grants[start][1]
    return most_requests, most_tokens


def test_busiest_window_counts_half_open_intervals() -> None:
    grants = [(1.2, 1), (0.0, 5), (0.5, 5), (0.999, 1), (1.0, 7), (2.3, 20)]
    assert busiest_window(grants, 1.0) == (4, 20)  # [0.5, 1.5) and [2.3, 3.3)
    assert busiest_window([(0.0, 1), (1.0, 1)], 1.0) == (1, 1)
    assert busiest_window([], 1.0) == (0, 0)


# --- factory ---------------------------------------------------------------------------


def test_factory_without_limits_is_a_no_op(redis_db: TestRedis) -> None:
    for conn in (redis_db.client, None):
        built = build_rate_limiter(conn, scope="s", requests_per_minute=0, tokens_per_minute=0)
        assert isinstance(built, NoRateLimit)
        built.acquire(tokens=10**9)  # returns at once, whatever the size


def test_factory_refuses_a_limit_without_redis() -> None:
    with pytest.raises(ValueError, match="no Redis client"):
        build_rate_limiter(None, scope="s", requests_per_minute=10, tokens_per_minute=0)
    with pytest.raises(ValueError, match="no Redis client"):
        build_rate_limiter(None, scope="s", requests_per_minute=0, tokens_per_minute=1000)


def test_factory_builds_a_one_minute_redis_limiter(redis_db: TestRedis) -> None:
    built = build_rate_limiter(
        redis_db.client,
        scope="s",
        requests_per_minute=2,
        tokens_per_minute=0,
        key_prefix=redis_db.prefix,
    )
    assert isinstance(built, RedisRateLimiter)
    assert (built.max_requests, built.max_tokens, built.window_seconds) == (2, 0, 60.0)
    built.acquire(tokens=1)
    built.acquire(tokens=1)
    with pytest.raises(ProviderRateLimited) as caught:
        built.acquire(tokens=1, deadline=time.monotonic() + 1)
    assert caught.value.retry_after is not None and 59 < caught.value.retry_after <= 60


# --- single process ----------------------------------------------------------------------


def test_requests_beyond_the_limit_wait_for_the_window(redis_db: TestRedis) -> None:
    limit = limiter(redis_db, max_requests=5)
    started = time.monotonic()
    first = [limit.reserve(tokens=1) for _ in range(5)]
    assert time.monotonic() - started < 0.75 * WINDOW  # no wait for the first five
    sixth = limit.reserve(tokens=1)
    assert sixth >= first[0] + WINDOW  # Redis time: exact
    assert sixth < first[0] + WINDOW + 0.2
    assert time.monotonic() - started >= WINDOW - 0.05


def test_tokens_wait_for_just_enough_old_reservations(redis_db: TestRedis) -> None:
    limit = limiter(redis_db, max_tokens=100)
    t0 = limit.reserve(tokens=70)
    time.sleep(0.3)
    t1 = limit.reserve(tokens=30)
    # 70 more tokens need exactly the 70 of t0 to expire, not the 30 of t1 as well.
    t2 = limit.reserve(tokens=70)
    assert t0 + WINDOW <= t2 < t1 + WINDOW


def test_a_request_larger_than_the_token_budget_fails_fast(redis_db: TestRedis) -> None:
    limit = limiter(redis_db, max_tokens=100)
    started = time.monotonic()
    with pytest.raises(ValueError, match="101 tokens can never fit the limit of 100"):
        limit.acquire(tokens=101)
    assert time.monotonic() - started < WINDOW  # refused, not waited for
    assert not redis_db.own_keys()
    limit.acquire(tokens=100)  # exactly the budget is fine
    with pytest.raises(ValueError, match="tokens must be >= 0"):
        limit.acquire(tokens=-1)


def test_deadline_raises_rate_limited_without_sleeping(redis_db: TestRedis) -> None:
    # The deadline comes before the window frees a request: raised at once, not slept up to
    # the deadline (the margins are seconds, which a loaded machine does not eat).
    limit = limiter(redis_db, max_requests=1, window=10.0)
    limit.acquire(tokens=1)
    started = time.monotonic()
    with pytest.raises(ProviderRateLimited) as caught:
        limit.acquire(tokens=1, deadline=started + 5.0)
    assert time.monotonic() - started < 5.0
    assert caught.value.code == "rate_limited"
    assert caught.value.retry_after is not None and 5.0 < caught.value.retry_after <= 10.0


def test_a_deadline_that_leaves_room_waits_and_succeeds(redis_db: TestRedis) -> None:
    limit = limiter(redis_db, max_requests=1, window=0.5)
    first = limit.reserve(tokens=1)
    second = limit.reserve(tokens=1, deadline=time.monotonic() + 2)
    assert second >= first + 0.5


def test_keys_expire_after_the_window(redis_db: TestRedis) -> None:
    limit = limiter(redis_db, max_requests=3, max_tokens=10, window=0.2)
    limit.acquire(tokens=4)
    for key in limit.keys:
        assert 0 < redis_db.client.pttl(key) <= 1200
    time.sleep(1.3)
    assert not redis_db.own_keys()


def test_a_lost_token_counter_is_rebuilt_from_the_log(redis_db: TestRedis) -> None:
    limit = limiter(redis_db, max_tokens=100, window=5.0)
    limit.acquire(tokens=80)
    redis_db.client.delete(limit.keys[1])  # as maxmemory eviction might
    with pytest.raises(ProviderRateLimited):
        limit.acquire(tokens=30, deadline=time.monotonic() + 0.5)
    limit.acquire(tokens=20)
    assert int(redis_db.client.get(limit.keys[1]) or 0) == 100


def test_unreachable_redis_is_a_dependency_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed_port = sock.getsockname()[1]
    conn = redis.Redis(
        host="127.0.0.1", port=closed_port, socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0)
    )
    limit = RedisRateLimiter(conn, scope="s", max_requests=1, max_tokens=0)
    with pytest.raises(DependencyUnavailable, match="unreachable") as caught:
        limit.acquire(tokens=1)
    assert isinstance(caught.value.__cause__, redis.exceptions.ConnectionError)
    assert caught.value.code == "dependency_unavailable"
    conn.close()


# --- contention --------------------------------------------------------------------------

HAMMER = """
import json, sys, time
import redis
from docingest.pipeline.embedders.ratelimit import RedisRateLimiter

url, prefix, max_requests, max_tokens, window, tokens, pause = sys.argv[1:]
client = redis.Redis.from_url(url)
limit = RedisRateLimiter(
    client, scope="openai:key-1", max_requests=int(max_requests), max_tokens=int(max_tokens),
    window_seconds=float(window), key_prefix=prefix,
)
sizes = [int(n) for n in tokens.split(",")]
grants = []
client.ping()
print("ready", flush=True)  # started and connected: the test sends the start and stop times
start_at, stop_at = sys.stdin.readline().split()
time.sleep(max(0.0, float(start_at) - time.time()))
while time.time() < float(stop_at):
    size = sizes[len(grants) % len(sizes)]
    at = limit.reserve(tokens=size)
    grants.append((at, time.time(), size))
    time.sleep(float(pause))  # the request the reservation was for
print(json.dumps(grants))
"""

# max_requests, max_tokens, token sizes cycled through, seconds per request after a grant
CASES = {
    "requests": (8, 0, "1", 0.0),
    "tokens": (0, 100, "7,25,12,5,18", 0.0),
    "both": (6, 60, "9,14", 0.0),
    "paced": (8, 0, "1", 0.03),
}


@pytest.mark.parametrize("case", CASES)
def test_two_processes_share_one_limit(redis_db: TestRedis, case: str) -> None:
    max_requests, max_tokens, sizes, pause = CASES[case]
    argv = [TEST_REDIS_URL, redis_db.prefix, max_requests, max_tokens, WINDOW, sizes, pause]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", HAMMER, *map(str, argv)],
            cwd=REPO_DIR,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    # Both interpreters say when they are ready, however long a loaded machine takes to start
    # them; only then is the common start time set, a moment ahead.
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    start_at = time.time() + 0.2
    stop_at = start_at + 3.5 * WINDOW
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write(f"{start_at} {stop_at}\n")
        proc.stdin.flush()
    outputs = [proc.communicate(timeout=120)[0] for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0]
    per_process = [json.loads(output) for output in outputs]
    assert_within_limits(
        per_process, max_requests=max_requests, max_tokens=max_tokens, even=pause > 0
    )


def test_threads_share_one_limit(redis_db: TestRedis) -> None:
    limit = limiter(redis_db, max_requests=5, max_tokens=40)
    per_thread: list[list[tuple[float, float, int]]] = [[] for _ in range(4)]
    start = threading.Barrier(len(per_thread))
    stop_at = time.time() + 3.5 * WINDOW

    def hammer(grants: list[tuple[float, float, int]], first: int) -> None:
        sizes = (3, 6, 9, 12)
        start.wait()
        while time.time() < stop_at:
            size = sizes[(first + len(grants)) % len(sizes)]
            at = limit.reserve(tokens=size)
            grants.append((at, time.time(), size))

    threads = [
        threading.Thread(target=hammer, args=(grants, first))
        for first, grants in enumerate(per_thread)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert_within_limits(per_thread, max_requests=5, max_tokens=40, even=False)


def assert_within_limits(
    per_worker: Sequence[Sequence[Sequence[float]]],
    *,
    max_requests: int,
    max_tokens: int,
    even: bool,
) -> None:
    """Check `(redis_time, client_time, tokens)` grants of workers that shared one limit.

    No window holds more than a budget, by Redis's clock and (allowing for the lag between a
    grant and its return) by the clients'; every worker got grants; the budget was used.
    """
    by_redis = [(round(g[0] * 1e6), int(g[2])) for grants in per_worker for g in grants]
    by_client = [(g[1], int(g[2])) for grants in per_worker for g in grants]
    requests, tokens = busiest_window(by_redis, round(WINDOW * 1e6))
    client_requests, client_tokens = busiest_window(by_client, WINDOW - 0.25)
    used = []  # how many windows' worth of the budget was granted
    if max_requests:
        assert requests <= max_requests and client_requests <= max_requests
        used.append(len(by_redis) / max_requests)
    if max_tokens:
        assert tokens <= max_tokens and client_tokens <= max_tokens
        used.append(sum(n for _, n in by_redis) / max_tokens)
    # Grants start at once and again each WINDOW: 4 windows' worth fit in 3.5 windows.
    assert max(used) >= 3.0, used
    counts = [len(grants) for grants in per_worker]
    assert min(counts) >= 1, counts
    if even:
        assert min(counts) >= len(by_redis) / len(per_worker) / 4, counts
