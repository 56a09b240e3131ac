"""The endpoints of an OpenAI-compatible model: the primary and its same-model fallbacks,
each with its client, its share of the rate limit, its circuit breaker and its check.

`DOCINGEST_OPENAI_FALLBACK_URLS` lists base URLs that serve the same model as the primary
(another Azure region, a second vLLM or TEI replica, OpenAI behind Azure). A batch goes to the
first endpoint that will take it: the primary, unless its circuit is open; after its retries
are spent, the next. Vectors of two models share no space, so an endpoint is used only once
it has answered a probe for the index's model with the index's dimensions (and, where the
primary's probe vector is known, with the same vector); one that answers otherwise is
refused for good, with the reason logged (`Endpoint.refuse`).

A `CircuitBreaker` per endpoint (per process) opens after `embedding_circuit_failures`
failed attempts in a row: its batches stop retrying there and go on to the next endpoint,
and new batches skip it. After `embedding_circuit_open_seconds` one batch probes it with a
single attempt (half-open): a success closes the circuit (the primary takes the traffic
back), a failure keeps it open for another period. The last endpoint of the chain has no
breaker: with nowhere else to go, its batches retry as a lone endpoint always did.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import numpy as np
import openai

from docingest.pipeline import metrics
from docingest.pipeline.embedders.ratelimit import NoRateLimit, RateLimiter, build_rate_limiter
from docingest.pipeline.embedders.usage import PRIMARY, record_request
from docingest.pipeline.errors import EmbeddingFailed
from docingest.pipeline.settings import Settings

if TYPE_CHECKING:
    from redis import Redis

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_SECONDS = 5.0


def credential_scope(base_url: str, api_key: str) -> str:
    """Identify a provider credential for the shared rate limiter, never revealing the key."""
    base_url = base_url.rstrip("/")
    return hashlib.sha256(f"{base_url}\n{api_key}".encode()).hexdigest()[:24]


def build_client(
    settings: Settings, *, base_url: str | None = None, api_key: str | None = None
) -> openai.OpenAI:
    """Build one endpoint's client: no retries of its own (tenacity retries), the settings'
    timeout. Without `base_url`/`api_key`, the primary's from the settings or environment."""
    base_url = base_url or settings.openai_base_url or os.environ.get("OPENAI_BASE_URL") or None
    api_key = api_key or primary_api_key(settings)
    if not api_key:
        host = urlsplit(base_url).hostname if base_url else "api.openai.com"
        if host is None or host == "openai.com" or host.endswith(".openai.com"):
            raise EmbeddingFailed(
                "No OpenAI API key: set DOCINGEST_OPENAI_API_KEY or OPENAI_API_KEY"
            )
        api_key = "unused"
    timeout = settings.embedding_timeout_seconds
    return openai.OpenAI(
        api_key=api_key,
        base_url=base_url,
        max_retries=0,
        timeout=openai.Timeout(timeout, connect=min(CONNECT_TIMEOUT_SECONDS, timeout)),
    )


def primary_api_key(settings: Settings) -> str | None:
    if settings.openai_api_key is not None:
        return settings.openai_api_key.get_secret_value() or None
    return os.environ.get("OPENAI_API_KEY") or None


class CircuitBreaker:
    """Closed, open for `open_seconds` after `failures` failed attempts in a row, then
    half-open: one probe decides. Thread-safe; `clock` is `time.monotonic` but in tests."""

    def __init__(
        self,
        *,
        failures: int,
        open_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.threshold = failures
        self.open_seconds = open_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._failures = 0
        self._opened_at: float | None = None
        self._probing = False

    @property
    def state(self) -> str:
        """`closed`, `open` or `half-open` (a probe may go, or is out)."""
        with self._lock:
            if self._opened_at is None:
                return "closed"
            if self._probing or self._clock() - self._opened_at >= self.open_seconds:
                return "half-open"
            return "open"

    @property
    def is_open(self) -> bool:
        """Whether batches should leave this endpoint alone (half-open counts as open,
        except for the probe `admit` let through)."""
        with self._lock:
            return self._opened_at is not None

    def admit(self) -> str | None:
        """Ask to send a batch: `"normal"` (closed), `"probe"` (the one half-open try, a
        single attempt) or None (open: go elsewhere)."""
        with self._lock:
            if self._opened_at is None:
                return "normal"
            if self._probing or self._clock() - self._opened_at < self.open_seconds:
                return None
            self._probing = True
            return "probe"

    def probe_ended(self) -> None:
        """Let another probe go if the one `admit` let through ended undecided (aborted
        with its job), so a circuit never stays half-open for good."""
        with self._lock:
            self._probing = False

    def succeeded(self) -> bool:
        """Record a served request; return whether this closed an open circuit."""
        with self._lock:
            was_open = self._opened_at is not None
            self._failures, self._opened_at, self._probing = 0, None, False
            return was_open

    def failed(self) -> bool:
        """Record a failed attempt; return whether this opened the circuit (or kept a
        half-open one open)."""
        with self._lock:
            self._failures += 1
            if self._probing or (self._opened_at is None and self._failures >= self.threshold):
                self._opened_at, self._probing = self._clock(), False
                return True
            return False


class NeverOpen(CircuitBreaker):
    """The breaker of the last endpoint: always closed, so its batches keep retrying."""

    def __init__(self) -> None:
        super().__init__(failures=1, open_seconds=0.0)

    def admit(self) -> str | None:
        return "normal"

    def failed(self) -> bool:
        return False


@dataclass
class Endpoint:
    """One base URL serving the index's model."""

    label: str
    """`primary`, `fallback1`, `fallback2`, ...: what metrics, logs and results call it."""
    client: openai.OpenAI
    limiter: RateLimiter = field(default_factory=NoRateLimit)
    breaker: CircuitBreaker = field(default_factory=NeverOpen)
    checked: bool = False
    """Whether a probe showed it serves the index's model (or no check is wanted)."""
    refused: str | None = None
    """Why it may never be used, once a probe showed it serves something else."""
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    """Held while it is being checked, so one probe runs per endpoint and process."""

    @property
    def url(self) -> str:
        return str(self.client.base_url).rstrip("/")

    @property
    def is_fallback(self) -> bool:
        return self.label != PRIMARY

    def served(self, inputs: int, tokens: int) -> None:
        """Count a served request for the job and the metrics; say which endpoint served."""
        record_request(self.label, tokens=tokens)
        metrics.EMBEDDING_ENDPOINT_REQUESTS.labels(self.label).inc()
        metrics.EMBEDDING_ENDPOINT_TOKENS.labels(self.label).inc(tokens)
        if self.breaker.succeeded():
            log.warning("embedding endpoint %s (%s) answered again: circuit closed", self.label,
                        self.url)  # fmt: skip
        level = logging.INFO if self.is_fallback else logging.DEBUG
        log.log(level, "%d inputs (%d tokens) embedded by %s (%s)", inputs, tokens, self.label,
                self.url)  # fmt: skip

    def refuse(self, reason: str) -> None:
        self.refused = reason
        log.error("embedding endpoint %s (%s) refused: %s", self.label, self.url, reason)

    def post(self, body: dict[str, object], *, timeout: float) -> bytes:
        """Send one `/embeddings` request; the reply's raw body (`openai` errors raised)."""
        # The client's generic `post` (its documented way to call any endpoint) with the raw
        # body: `embeddings.create` walks every input through its typing-based transform, which
        # costs more client CPU than the token counting, and parses the reply we parse anyway.
        content: bytes = self.client.post(
            "/embeddings",
            cast_to=bytes,
            body=body,
            options={
                "timeout": openai.Timeout(timeout, connect=min(CONNECT_TIMEOUT_SECONDS, timeout)),
                "headers": {"Authorization": f"Bearer {self.client.api_key}"},
            },
        )
        return content


def build_endpoints(settings: Settings, redis: Redis | None) -> list[Endpoint]:
    """The primary and the settings' fallbacks, in order; each shares the rate limit of its
    own credential (base URL and key) with every worker through `redis`."""
    fallback_keys = [key.get_secret_value() for key in settings.openai_fallback_api_keys]
    clients = [build_client(settings)]
    for number, url in enumerate(settings.openai_fallback_urls):
        key = fallback_keys[number] if number < len(fallback_keys) else ""
        clients.append(build_client(settings, base_url=url, api_key=key or None))
    endpoints = []
    for number, client in enumerate(clients):
        last = number == len(clients) - 1
        breaker = (
            NeverOpen()
            if last
            else CircuitBreaker(
                failures=settings.embedding_circuit_failures,
                open_seconds=settings.embedding_circuit_open_seconds,
            )
        )
        limiter = build_rate_limiter(
            redis,
            scope=credential_scope(str(client.base_url), client.api_key),
            requests_per_minute=settings.embedding_requests_per_minute,
            tokens_per_minute=settings.embedding_tokens_per_minute,
        )
        label = PRIMARY if number == 0 else f"fallback{number}"
        endpoints.append(Endpoint(label, client, limiter=limiter, breaker=breaker))
    return endpoints


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity of two vectors (0 when either is zero)."""
    norms = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(np.dot(a, b) / norms) if norms else 0.0
