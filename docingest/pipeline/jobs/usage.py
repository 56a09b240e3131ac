"""Each index's cumulative usage in Redis, beside the job state: what its completed jobs
embedded, reused and spent.

The job's completion adds its `result.usage` to its index's hash in the same Lua script that
marks it completed (`scripts.COMPLETE`), once per job id: a marker in the job hash, which no
retry clears, makes a redelivered or replayed completion add nothing. A job's usage holds the
requests of its earlier attempts that ended in a transient error (carried in the job hash by
the re-queue, `usage_carried`); those of an attempt killed with its worker are not known.
Failed and cancelled jobs add nothing (their requests still show in the process metrics). An
index's usage is kept until the index is deleted.

The estimated cost is not stored: it is the tokens times the model's price in the settings
when read, so a price set later applies to what came before.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from docingest.pipeline.jobs.scripts import FORGET_USAGE
from docingest.pipeline.keys import Keys
from docingest.pipeline.redis_errors import map_redis_errors

if TYPE_CHECKING:
    from redis import Redis

COUNTED = (
    "embedding_requests",
    "input_tokens",
    "vectors_reused",
    "rerank_requests",
    "fallback_requests",
)
"""The fields of a job's usage that an index's usage sums."""
OTHER = "(other)"
"""The `index` label of the indexes beyond the per-index metrics' limit (no index name has
parentheses, so it cannot be one)."""


class IndexUsage(BaseModel):
    """An index's cumulative usage, as `GET /v1/indexes/{index}` shows it."""

    jobs: int = 0
    """Completed jobs counted."""
    embedding_requests: int = 0
    """Embedding requests that returned vectors."""
    input_tokens: int = 0
    """Their input tokens: the provider's count when it reports one, else cl100k_base's."""
    vectors_reused: int = 0
    """Chunks that got a vector without an embedding request."""
    rerank_requests: int = 0
    """Searches of the index sent to a re-ranker (counted by `add_rerank_requests`, not by
    jobs: ingestion never re-ranks)."""
    fallback_requests: int = 0
    """Of `embedding_requests`, those a fallback endpoint served."""
    estimated_cost: float | None = None
    """`input_tokens` × the index model's price per million tokens, when one is configured."""

    def priced(self, price_per_million_tokens: float | None) -> IndexUsage:
        """This usage with its estimated cost at `price_per_million_tokens` (None: none)."""
        if price_per_million_tokens is None:
            return self.model_copy(update={"estimated_cost": None})
        cost = round(self.input_tokens * price_per_million_tokens / 1_000_000, 9)
        return self.model_copy(update={"estimated_cost": cost})


def usage_fields(usage: Mapping[str, Any]) -> dict[str, int]:
    """The counted fields of a job's `result.usage` (`JobUsage` as a dict)."""
    endpoints = usage.get("endpoints") or {}
    fallback = sum(
        int(served.get("requests", 0))
        for name, served in endpoints.items()
        if name.startswith("fallback")
    )
    fields = {name: int(usage.get(name) or 0) for name in COUNTED if name != "fallback_requests"}
    return fields | {"fallback_requests": fallback}


def _usage(raw: Mapping[str, str]) -> IndexUsage:
    return IndexUsage(**{name: int(raw.get(name, 0)) for name in ("jobs", *COUNTED)})


class UsageLedger:
    """Read and forget the indexes' usage (the job's completion writes it)."""

    def __init__(self, redis: Redis, *, keys: Keys) -> None:
        self._redis = redis
        self.keys = keys
        self._forget = redis.register_script(FORGET_USAGE)

    def of(self, index: str) -> IndexUsage:
        """The usage of `index` (zeros when none of its jobs completed yet)."""
        return self.of_many([index])[index]

    def of_many(self, indexes: Iterable[str]) -> dict[str, IndexUsage]:
        names = list(indexes)
        with map_redis_errors(), self._redis.pipeline(transaction=False) as pipe:
            for name in names:
                pipe.hgetall(self.keys.index_usage(name))
            raws = pipe.execute()
        return {name: _usage(raw) for name, raw in zip(names, raws, strict=True)}

    def top(self, limit: int) -> tuple[dict[str, IndexUsage], IndexUsage]:
        """The `limit` indexes that used the most tokens, and the rest summed."""
        with map_redis_errors():
            names: list[str] = self._redis.zrevrange(self.keys.usage_ranking, 0, limit - 1)  # type: ignore[assignment]
            everything = _usage(self._redis.hgetall(self.keys.usage_all))  # type: ignore[arg-type]
        named = self.of_many(names) if limit > 0 else {}
        rest = {
            field: getattr(everything, field) - sum(getattr(u, field) for u in named.values())
            for field in ("jobs", *COUNTED)
        }
        return named, IndexUsage(**{name: max(value, 0) for name, value in rest.items()})

    def add_rerank_requests(self, index: str, count: int = 1) -> None:
        """Count `count` searches of `index` sent to a re-ranker (and in the totals)."""
        with map_redis_errors(), self._redis.pipeline(transaction=True) as pipe:
            pipe.hincrby(self.keys.index_usage(index), "rerank_requests", count)
            pipe.hincrby(self.keys.usage_all, "rerank_requests", count)
            pipe.execute()

    def forget(self, index: str) -> None:
        """Drop a deleted index's usage (from the totals too, so `(other)` stays right)."""
        keys = [self.keys.index_usage(index), self.keys.usage_ranking, self.keys.usage_all]
        with map_redis_errors():
            self._forget(keys=keys, args=[index])
