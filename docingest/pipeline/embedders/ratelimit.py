"""Requests-per-minute and tokens-per-minute limits shared by every worker on every host.

A limiter reserves capacity before a request is sent, so ten workers sharing one API key do
not stampede it into 429s.

`RedisRateLimiter` keeps a sliding-window log of reservations in one Redis sorted set per
scope (one scope per provider credential): member `<uuid>:<tokens>`, score the reservation time
in microseconds of Redis's own clock (`TIME`), so the clocks of the hosts do not matter. A
counter next to it holds the sum of the logged tokens. One Lua script, run atomically by Redis,
drops the entries older than the window, and then either logs the new reservation (if one more
request and its tokens fit both budgets) or logs nothing and returns how long until enough of
the oldest entries expire for it to fit.

Why this is exact: Redis runs scripts one at a time, and a reservation at time `t` is granted
only if the logged entries newer than `t - window`, plus itself, stay within both budgets.
Take any half-open interval `[a, a + window)` and the reservation `g` granted last among those
in it: the others were granted before `g`, at times `>= a > t_g - window`, so they were still in
the log and counted when `g` was checked. Hence no interval of one window's length ever holds
more than the budgets, however many processes share the scope, as long as Redis's clock does
not step backwards (an earlier prune could then have dropped entries still due). A token
bucket or GCRA would be O(1) but lets a full burst follow a full refill, up to twice the budget
in one window, so a provider counting a strict rolling minute could still answer 429. The log
holds one entry per reservation of the last window; pruning is amortised O(1) thanks to the
token counter.

What it does not do: queue. A refused caller sleeps until capacity should be free and asks
again, so whoever asks first after an expiry wins, and a large reservation can wait while
smaller ones keep fitting into the freed capacity; `deadline` bounds every wait. The whole
window's budget may also go in one burst, which a provider enforcing its per-minute limit over
shorter slices (OpenAI says it may) would still refuse.

Both keys carry a `{scope}` hash tag (same Redis Cluster slot) and expire one window plus a
second after the last reservation, so idle scopes leave nothing behind.
"""

from __future__ import annotations

import random
import time
import uuid
from typing import TYPE_CHECKING, Protocol

from docingest.pipeline.errors import ProviderRateLimited
from docingest.pipeline.keys import RATE_LIMIT_PREFIX, RateLimitKeys
from docingest.pipeline.redis_errors import map_redis_errors

if TYPE_CHECKING:
    from redis import Redis


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


# KEYS[1] = reservation log (zset), KEYS[2] = sum of the logged tokens.
# ARGV = window_us, max_requests (0: none), max_tokens (0: none), tokens, reservation id.
# Returns {1, now_us} when the reservation is logged, {0, wait_us} when it is not.
_RESERVE_LUA = """
local log, total_key = KEYS[1], KEYS[2]
local window = tonumber(ARGV[1])
local max_requests = tonumber(ARGV[2])
local max_tokens = tonumber(ARGV[3])
local tokens = tonumber(ARGV[4])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cutoff = now - window

local function tokens_of(member)
  return tonumber(string.match(member, ':(%d+)$'))
end

-- time until the oldest entries holding `need` tokens have expired
local function token_wait(need)
  local freed, start = 0, 0
  while true do
    local page = redis.call('ZRANGE', log, start, start + 127, 'WITHSCORES')
    if #page == 0 then return window end  -- counter above the log: wait for it to drain
    for i = 1, #page, 2 do
      freed = freed + tokens_of(page[i])
      if freed >= need then return tonumber(page[i + 1]) + window - now end
    end
    start = start + 128
  end
end

local count = redis.call('ZCARD', log)
local total = tonumber(redis.call('GET', total_key))
if count == 0 then
  total = 0
elseif total == nil then  -- the counter was evicted apart from the log: rebuild it
  total = 0
  for _, m in ipairs(redis.call('ZRANGE', log, 0, -1)) do total = total + tokens_of(m) end
end

local expired = redis.call('ZRANGEBYSCORE', log, '-inf', cutoff)
if #expired > 0 then
  for _, m in ipairs(expired) do total = total - tokens_of(m) end
  redis.call('ZREMRANGEBYSCORE', log, '-inf', cutoff)
  count = count - #expired
end

local wait = 0
if max_requests > 0 and count + 1 > max_requests then
  local oldest = redis.call('ZRANGE', log, count - max_requests, count - max_requests, 'WITHSCORES')
  wait = tonumber(oldest[2]) + window - now
end
if max_tokens > 0 and total + tokens > max_tokens then
  wait = math.max(wait, token_wait(total + tokens - max_tokens))
end

local ttl = math.floor(window / 1000) + 1000
if wait > 0 then
  redis.call('SET', total_key, total, 'PX', ttl)
  return {0, wait}
end
redis.call('ZADD', log, now, ARGV[5] .. ':' .. ARGV[4])
redis.call('SET', total_key, total + tokens, 'PX', ttl)
redis.call('PEXPIRE', log, ttl)
return {1, now}
"""

_MAX_JITTER_SECONDS = 0.02
"""Random extra sleep after a refusal, so waiters woken by the same expiry do not collide."""


class RedisRateLimiter:
    """At most `max_requests` requests and `max_tokens` tokens in any rolling window.

    Shared through Redis by every limiter built with the same `scope` and `key_prefix`; a limit
    of 0 means none for that dimension. Thread-safe (redis-py clients are).
    """

    def __init__(
        self,
        redis: Redis,
        *,
        scope: str,
        max_requests: int,
        max_tokens: int,
        window_seconds: float = 60.0,
        key_prefix: str = RATE_LIMIT_PREFIX,
    ) -> None:
        if max_requests < 0 or max_tokens < 0:
            raise ValueError("rate limits must be >= 0 (0 means no limit)")
        if window_seconds <= 0:
            raise ValueError("window_seconds must be > 0")
        self.scope = scope
        self.max_requests = max_requests
        self.max_tokens = max_tokens
        self.window_seconds = window_seconds
        self._window_us = max(1, round(window_seconds * 1_000_000))
        names = RateLimitKeys(key_prefix)
        self.keys = (names.log(scope), names.tokens(scope))
        self._script = redis.register_script(_RESERVE_LUA)

    def acquire(self, *, tokens: int, deadline: float | None = None) -> None:
        """Block until one request and `tokens` tokens are reserved (see `reserve`)."""
        self.reserve(tokens=tokens, deadline=deadline)

    def reserve(self, *, tokens: int, deadline: float | None = None) -> float:
        """Reserve one request and `tokens` tokens; return the reservation's Redis time.

        Sleeps while the budgets are spent. Raises `ProviderRateLimited` (with `retry_after`)
        when the wait would pass `deadline` (a `time.monotonic()` value), `ValueError` when
        `tokens` exceeds the whole token budget (it could never be granted), and
        `DependencyUnavailable` when Redis cannot be reached.
        """
        if tokens < 0:
            raise ValueError(f"tokens must be >= 0, got {tokens}")
        if self.max_tokens and tokens > self.max_tokens:
            raise ValueError(
                f"a request of {tokens} tokens can never fit the limit of {self.max_tokens} "
                f"tokens per {self.window_seconds:g} s for {self.scope!r}; send smaller batches"
            )
        while True:
            granted, value_us = self._try(tokens)
            if granted:
                return value_us / 1_000_000
            wait = value_us / 1_000_000
            if deadline is None:
                time.sleep(wait + random.uniform(0, _MAX_JITTER_SECONDS))
                continue
            left = deadline - time.monotonic()
            if wait > left:
                raise ProviderRateLimited(
                    f"rate limit of {self.scope!r} leaves no room before the deadline; "
                    f"capacity frees in {wait:.3f} s",
                    retry_after=wait,
                )
            time.sleep(min(wait + random.uniform(0, _MAX_JITTER_SECONDS), left))

    def _try(self, tokens: int) -> tuple[bool, int]:
        args: list[int | str] = [
            self._window_us,
            self.max_requests,
            self.max_tokens,
            tokens,
            uuid.uuid4().hex,
        ]
        with map_redis_errors("Redis for rate limiting is unreachable"):
            granted, value = self._script(keys=list(self.keys), args=args)
        return bool(granted), int(value)


def build_rate_limiter(
    redis: Redis | None,
    *,
    scope: str,
    requests_per_minute: int,
    tokens_per_minute: int,
    key_prefix: str = RATE_LIMIT_PREFIX,
) -> RateLimiter:
    """Return the shared limiter for `scope`, or `NoRateLimit` when no limit is set.

    `scope` names the credential whose limits are shared; it becomes part of a Redis key, so
    pass a name or a hash, never the secret itself.

    A limit without Redis is refused: each process enforcing it alone would multiply it.
    """
    if requests_per_minute == 0 and tokens_per_minute == 0:
        return NoRateLimit()
    if redis is None:
        raise ValueError(
            f"a rate limit is configured for {scope!r} but no Redis client was given; "
            "the limit must be shared through Redis"
        )
    return RedisRateLimiter(
        redis,
        scope=scope,
        max_requests=requests_per_minute,
        max_tokens=tokens_per_minute,
        key_prefix=key_prefix,
    )
