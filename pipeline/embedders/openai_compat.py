"""Embeddings from OpenAI or any OpenAI-compatible `/v1/embeddings` server (Ollama, vLLM, ...).

Inputs are planned into the fewest requests the count and token limits allow
(`batching.iter_batches`), and each full batch is handed at once to a pool of
`concurrency` threads sharing one synchronous `openai.OpenAI` client, so token counting
overlaps the requests in flight. Each batch retries alone (`backoff.build_retrying`) on 429,
408, 409, 5xx, timeouts, connection errors and unparsable replies; a permanent failure (other
4xx, wrong vector size, wrong vector count) is not retried, cancels the batches not yet
started and raises `EmbeddingFailed` naming the provider's error; a batch that spent its
retries on retryable errors raises `EmbeddingUnavailable` (transient: the job is re-queued).
Before every attempt the shared rate limiter reserves one request and the batch's tokens.

Requests go through the `openai` client (auth, base URL, timeouts, its error types) but with
a plain JSON body, and replies are asked for as base64 float32 and parsed here, so a malformed
body is caught and vectors are decoded without a detour through Python floats.

API key: the settings' key, else `OPENAI_API_KEY`. Without either, requests to OpenAI itself
fail at construction with a clear message; other servers get a placeholder key, since local
servers such as Ollama or llama.cpp need none (the `openai` client insists on one).
"""

from __future__ import annotations

import contextvars
import hashlib
import logging
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import numpy as np
import openai
from tenacity import RetryCallState, RetryError

from pipeline import metrics
from pipeline.embedders.backoff import (
    BadReply,
    RetryPolicy,
    build_retrying,
    decode_reply,
    describe,
)
from pipeline.embedders.base import COUNTERS, ProgressCallback, unit_normalise
from pipeline.embedders.batching import KNOWN_MODELS, Batch, BatchRun, iter_batches, token_counter
from pipeline.embedders.ratelimit import NoRateLimit, RateLimiter, build_rate_limiter
from pipeline.errors import EmbeddingFailed, EmbeddingUnavailable
from pipeline.settings import Settings

if TYPE_CHECKING:
    from redis import Redis

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT_SECONDS = 5.0


class _Aborted(Exception):
    """Another batch failed for good; this one stops."""


def credential_scope(base_url: str, api_key: str) -> str:
    """Identify a provider credential for the shared rate limiter, never revealing the key."""
    base_url = base_url.rstrip("/")
    return hashlib.sha256(f"{base_url}\n{api_key}".encode()).hexdigest()[:24]


def build_client(settings: Settings) -> openai.OpenAI:
    """Build the one client: no retries of its own (tenacity retries), settings' timeout."""
    base_url = settings.openai_base_url or os.environ.get("OPENAI_BASE_URL") or None
    api_key = (
        settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    ) or os.environ.get("OPENAI_API_KEY")
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


class OpenAICompatibleEmbedder:
    """Embed with an OpenAI-compatible API: batched, concurrent, retried, rate-limited."""

    provider = "openai"

    def __init__(
        self,
        *,
        client: openai.OpenAI,
        model: str,
        dimensions: int | None = None,
        max_batch: int = 2048,
        max_batch_tokens: int = 300_000,
        max_input_tokens: int | None = None,
        concurrency: int = 4,
        timeout_seconds: float = 60.0,
        retry: RetryPolicy | None = None,
        limiter: RateLimiter | None = None,
    ) -> None:
        """`max_input_tokens` defaults to the model's documented limit (none if unknown).

        `dimensions` is sent to the server for a shortenable model asking for fewer than
        its native size, and for an unknown model whenever given; None means native size
        (an unknown model's is learnt from its first reply).
        """
        spec = KNOWN_MODELS.get(model)
        self._send_dimensions: int | None = None
        if spec is not None:
            if dimensions is not None and dimensions != spec.dimensions:
                if not spec.shortenable or dimensions > spec.dimensions:
                    raise ValueError(
                        f"{model} returns {spec.dimensions} dimensions; {dimensions} unsupported"
                    )
                self._send_dimensions = dimensions
            dimensions = dimensions or spec.dimensions
            max_input_tokens = max_input_tokens or spec.max_input_tokens
        elif dimensions is not None:
            self._send_dimensions = dimensions
        self._client = client
        self.model = model
        self._dimensions = dimensions
        self.max_batch = max_batch
        self.max_batch_tokens = max_batch_tokens
        self.max_input_tokens = max_input_tokens
        self.concurrency = concurrency
        self._timeout = timeout_seconds
        self._retry = retry or RetryPolicy()
        self._limiter: RateLimiter = limiter or NoRateLimit()
        self._counter = token_counter(model)
        self._lock = threading.Lock()

    @classmethod
    def from_settings(
        cls,
        *,
        model: str,
        dimensions: int | None,
        settings: Settings,
        redis: Redis | None = None,
    ) -> OpenAICompatibleEmbedder:
        """Build from settings; rate limits are shared through `redis` per credential.

        The limiter's scope hashes the base URL and key, so every worker using one credential
        shares one budget. A request never holds more tokens than the per-minute budget.
        """
        client = build_client(settings)
        tokens_per_minute = settings.embedding_tokens_per_minute
        limiter = build_rate_limiter(
            redis,
            scope=credential_scope(str(client.base_url), client.api_key),
            requests_per_minute=settings.embedding_requests_per_minute,
            tokens_per_minute=tokens_per_minute,
        )
        max_batch_tokens = settings.embedding_max_batch_tokens
        if tokens_per_minute:  # a bigger request could never be granted
            max_batch_tokens = min(max_batch_tokens, tokens_per_minute)
        return cls(
            client=client,
            model=model,
            dimensions=dimensions,
            max_batch=settings.embedding_max_batch,
            max_batch_tokens=max_batch_tokens,
            concurrency=settings.embedding_concurrency,
            timeout_seconds=settings.embedding_timeout_seconds,
            retry=RetryPolicy.from_settings(settings),
            limiter=limiter,
        )

    @property
    def dimensions(self) -> int:
        """Vector size; for an unknown model without a configured size, one probe asks."""
        if self._dimensions is None:
            self._embed(["dimensions probe"], None)
        assert self._dimensions is not None
        return self._dimensions

    @dimensions.setter
    def dimensions(self, value: int) -> None:
        raise AttributeError("dimensions is fixed when the embedder is built")

    def embed_documents(
        self, texts: Sequence[str], on_progress: ProgressCallback | None = None
    ) -> np.ndarray:
        if not texts:
            return np.empty((0, self.dimensions), dtype=np.float32)
        return self._embed(texts, on_progress)

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query in its own request (OpenAI models need no query prefix)."""
        vector: np.ndarray = self._embed([text], None)[0]
        return vector

    def close(self) -> None:
        self._client.close()

    def _embed(self, texts: Sequence[str], on_progress: ProgressCallback | None) -> np.ndarray:
        """Plan the batches, embed them on the pool as they are planned, and reassemble."""
        for index, text in enumerate(texts):
            if not text:
                raise ValueError(f"input {index} is empty; embedding providers reject it")
        abort = threading.Event()
        run = BatchRun(len(texts), on_progress)
        pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="embed")
        try:
            for batch in iter_batches(
                texts,
                counter=self._counter,
                max_batch=self.max_batch,
                max_batch_tokens=self.max_batch_tokens,
                max_input_tokens=self.max_input_tokens,
            ):
                # in the caller's context, so its log lines keep the job's fields
                context = contextvars.copy_context()
                run.submitted(batch, pool.submit(context.run, self._embed_batch, batch, abort))
                run.collect(block=False)
            while not run.complete:
                run.collect(block=True)
        except BaseException:
            abort.set()
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        return run.vectors()

    def _embed_batch(self, batch: Batch, abort: threading.Event) -> np.ndarray:
        """Embed one batch, retrying it alone; raise EmbeddingFailed when it cannot succeed."""
        deadline = time.monotonic() + self._retry.deadline_seconds
        retrying = build_retrying(
            self._retry, deadline=deadline, abort=abort, before_sleep=self._before_sleep
        )
        errors: list[BaseException] = []  # every attempt's, to name the telling one at the end

        def attempt() -> np.ndarray:
            try:
                return self._attempt(batch, deadline, abort)
            except Exception as exc:
                errors.append(exc)
                raise

        try:
            vectors: np.ndarray = retrying(attempt)
            return vectors
        except _Aborted:
            raise
        except RetryError as exc:
            if abort.is_set():
                raise _Aborted from None
            error = exc.last_attempt.exception()
            assert error is not None
            attempts = exc.last_attempt.attempt_number
            plural = "s" if attempts > 1 else ""
            cause = describe(error)
            timeout = openai.APITimeoutError
            earlier = errors[-2] if len(errors) > 1 else None
            if isinstance(error, timeout) and earlier and not isinstance(earlier, timeout):
                # The deadline cut the last attempt short: the error before it says more.
                cause = f"{describe(earlier)} (the last attempt timed out at the deadline)"
            failure: EmbeddingFailed | EmbeddingUnavailable = EmbeddingUnavailable(
                f"Embedding failed after {attempts} attempt{plural}: {cause}"
            )
        except (openai.APIStatusError, BadReply) as exc:
            error = exc
            failure = EmbeddingFailed(f"Embedding failed (not retried): {describe(exc)}")
        except Exception:
            abort.set()  # the other batches stop before their next attempt
            COUNTERS.add(failures=1)
            raise
        abort.set()
        COUNTERS.add(failures=1)
        raise failure from error

    def _before_sleep(self, retry_state: RetryCallState) -> None:
        COUNTERS.add(retries=1)
        error = retry_state.outcome.exception() if retry_state.outcome else None
        logger.warning(
            "embedding attempt %d failed (%s); retrying in %.2f s",
            retry_state.attempt_number,
            describe(error) if error else "?",
            retry_state.upcoming_sleep,
        )

    def _attempt(self, batch: Batch, deadline: float, abort: threading.Event) -> np.ndarray:
        if abort.is_set():
            raise _Aborted
        self._limiter.acquire(tokens=batch.tokens, deadline=deadline)
        timeout = min(self._timeout, max(deadline - time.monotonic(), 0.001))
        body: dict[str, Any] = {
            "model": self.model,
            "input": batch.texts,
            "encoding_format": "base64",
        }
        if self._send_dimensions is not None:
            body["dimensions"] = self._send_dimensions
        COUNTERS.add(requests=1, inputs=len(batch.pieces), tokens=batch.tokens)
        # The client's generic `post` (its documented way to call any endpoint) with the raw
        # body: `embeddings.create` walks every input through its typing-based transform, which
        # costs more client CPU than the token counting, and parses the reply we parse anyway.
        started = time.perf_counter()
        try:
            content = self._client.post(
                "/embeddings",
                cast_to=bytes,
                body=body,
                options={
                    "timeout": openai.Timeout(
                        timeout, connect=min(CONNECT_TIMEOUT_SECONDS, timeout)
                    ),
                    "headers": {"Authorization": f"Bearer {self._client.api_key}"},
                },
            )
        finally:
            elapsed = time.perf_counter() - started
            metrics.EMBEDDING_REQUEST_SECONDS.labels("openai").observe(elapsed)
        return self._parse(content, len(batch.pieces))

    def _parse(self, content: bytes, expected: int) -> np.ndarray:
        """Decode a reply into unit vectors in input order; learn the size if still unknown."""
        matrix = decode_reply(content, expected)
        with self._lock:
            if self._dimensions is None:
                self._dimensions = matrix.shape[1]
        if matrix.shape[1] != self._dimensions:
            raise BadReply(
                f"{self.model} returned {matrix.shape[1]}-dimensional vectors; "
                f"expected {self._dimensions}"
            )
        return unit_normalise(matrix)
