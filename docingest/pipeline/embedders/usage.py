"""What embedding one job cost: requests, input tokens, vectors reused, and which endpoint
served them, counted where the requests are made.

A `UsageMeter` is opened around one job's indexing (`metering()`); every embedder call made
inside it adds to it, and to every meter open around it (the job runner's spans the job's
attempts), on any thread that runs in a copy of the caller's context (the OpenAI embedder's
pool does), so two jobs sharing one embedder in one process never mix their counts.
Outside a meter (a search's query, a readiness check) nothing is counted here; the process-wide
totals in `/metrics` count everything.

Tokens are the provider's own count when its reply carries `usage.prompt_tokens` (OpenAI,
Azure, vLLM, TEI), else ours: tiktoken's `cl100k_base`, which is OpenAI's tokenizer for its
embedding models and an estimate for the others (`docingest.pipeline.embedders.batching`). The
probes that check an endpoint (`docingest.pipeline.embedders.endpoints`) belong to no job and are
not counted.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

PRIMARY = "primary"
"""The endpoint label of the configured base URL; fallbacks are `fallback1`, `fallback2`..."""
LOCAL = "local"
"""The endpoint label of the local model (its "requests" are model runs)."""


@dataclass(frozen=True, slots=True)
class EndpointUsage:
    """What one endpoint served for a job."""

    requests: int = 0
    input_tokens: int = 0


@dataclass(frozen=True, slots=True)
class JobUsage:
    """A job's embedding usage, as its `result.usage` shows it."""

    embedding_requests: int = 0
    """Requests that returned vectors (failed attempts are retries, not usage)."""
    input_tokens: int = 0
    """Tokens of those requests: the provider's count when it reports one, else ours."""
    vectors_reused: int = 0
    """Chunks that got a vector without an embedding request: from the stored version, or
    repeated from earlier in the document."""
    rerank_requests: int = 0
    """Always 0: docingest has no rerank stage yet; kept so the shape need not change."""
    fallback_used: bool = False
    """Whether a fallback endpoint served any of the requests."""
    endpoints: Mapping[str, EndpointUsage] = field(default_factory=dict)
    """Endpoint label (`primary`, `fallback1`, ..., `local`) → what it served."""
    estimated_cost: float | None = None
    """`input_tokens` × the model's price per million tokens, when one is configured."""


class UsageMeter:
    """The counts of one job so far; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reused = 0
        self._endpoints: dict[str, EndpointUsage] = {}

    def add_request(self, endpoint: str, *, tokens: int, requests: int = 1) -> None:
        with self._lock:
            seen = self._endpoints.get(endpoint, EndpointUsage())
            self._endpoints[endpoint] = EndpointUsage(
                seen.requests + requests, seen.input_tokens + tokens
            )

    def add_reused(self, count: int) -> None:
        with self._lock:
            self._reused += count

    def absorb(self, usage: Mapping[str, Any]) -> None:
        """Add the requests and tokens of a `JobUsage` as a dict (an earlier attempt's): they
        were billed. Not its reused vectors: the attempt that completes reuses them again
        (or the earlier attempt's staged ones), and says what the document needed."""
        for name, used in (usage.get("endpoints") or {}).items():
            tokens, requests = int(used.get("input_tokens", 0)), int(used.get("requests", 0))
            self.add_request(name, tokens=tokens, requests=requests)

    def usage(self, *, price_per_million_tokens: float | None = None) -> JobUsage:
        """The counts so far; with a price, their estimated cost."""
        with self._lock:
            endpoints = dict(sorted(self._endpoints.items()))
            reused = self._reused
        tokens = sum(used.input_tokens for used in endpoints.values())
        cost = None
        if price_per_million_tokens is not None:
            cost = round(tokens * price_per_million_tokens / 1_000_000, 9)
        return JobUsage(
            embedding_requests=sum(used.requests for used in endpoints.values()),
            input_tokens=tokens,
            vectors_reused=reused,
            fallback_used=any(name.startswith("fallback") for name in endpoints),
            endpoints=endpoints,
            estimated_cost=cost,
        )


_OPEN: ContextVar[tuple[UsageMeter, ...]] = ContextVar("docingest_usage_meters", default=())


@contextmanager
def metering() -> Iterator[UsageMeter]:
    """Count the embedding usage of everything run inside the block (in this context)."""
    meter = UsageMeter()
    token = _OPEN.set((*_OPEN.get(), meter))
    try:
        yield meter
    finally:
        _OPEN.reset(token)


def record_request(endpoint: str, *, tokens: int, requests: int = 1) -> None:
    """Add served requests to the open meters, if any."""
    for meter in _OPEN.get():
        meter.add_request(endpoint, tokens=tokens, requests=requests)


def record_reused(count: int) -> None:
    """Add vectors that needed no request to the open meters, if any."""
    for meter in _OPEN.get() if count else ():
        meter.add_reused(count)
