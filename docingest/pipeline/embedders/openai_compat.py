"""Embeddings from OpenAI or any OpenAI-compatible `/v1/embeddings` server (Ollama, vLLM, ...).

Inputs are planned into the fewest requests the count and token limits allow
(`batching.iter_batches`), and each full batch is handed at once to a pool of
`concurrency` threads sharing the endpoints' synchronous `openai.OpenAI` clients, so token
counting overlaps the requests in flight. Each batch retries alone (`backoff.build_retrying`)
on 429, 408, 409, 5xx, timeouts, connection errors and unparsable replies; a permanent failure
(other 4xx, wrong vector size, wrong vector count) is not retried, cancels the batches not yet
started and raises `EmbeddingFailed` naming the provider's error. A batch that spent its
retries on one endpoint goes to the next (`docingest.pipeline.embedders.endpoints`: the same model's
fallbacks, circuit breakers, the check of each endpoint); one that spent them on every
endpoint raises `EmbeddingUnavailable` (transient: the job is re-queued). Before every attempt
the endpoint's shared rate limiter reserves one request and the batch's tokens.

Requests go through the `openai` client (auth, base URL, timeouts, its error types) but with
a plain JSON body, and replies are asked for as base64 float32 and parsed here, so a malformed
body is caught and vectors are decoded without a detour through Python floats. Each served
request is counted for the running job (`docingest.pipeline.embedders.usage`) and per endpoint in
`/metrics`.

API key: the settings' key, else `OPENAI_API_KEY`. Without either, requests to OpenAI itself
fail at construction with a clear message; other servers get a placeholder key, since local
servers such as Ollama or llama.cpp need none (the `openai` client insists on one).
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
import openai
from tenacity import RetryCallState, RetryError

from docingest.pipeline import metrics
from docingest.pipeline.embedders.backoff import (
    BadReply,
    ProviderRetryPolicy,
    Reply,
    build_retrying,
    describe,
    describe_retries,
    is_retryable,
    parse_reply,
)
from docingest.pipeline.embedders.base import COUNTERS, ProgressCallback, unit_normalise
from docingest.pipeline.embedders.batching import (
    Batch,
    BatchRun,
    iter_batches,
    token_counter,
)
from docingest.pipeline.embedders.endpoint_check import PROBE_TEXT, EndpointRefused, SameModelCheck
from docingest.pipeline.embedders.endpoints import Endpoint, build_endpoints
from docingest.pipeline.embedders.models import sizing
from docingest.pipeline.embedders.ratelimit import RateLimiter
from docingest.pipeline.embedders.usage import PRIMARY
from docingest.pipeline.errors import EmbeddingFailed, EmbeddingUnavailable
from docingest.pipeline.settings import Settings

if TYPE_CHECKING:
    from redis import Redis

__all__ = ["OpenAICompatibleEmbedder"]

logger = logging.getLogger(__name__)


class _Aborted(Exception):
    """Another batch failed for good; this one stops."""


class _GaveUp(Exception):
    """One endpoint spent its retries (or its circuit opened) on a batch; try the next."""

    def __init__(self, failure: EmbeddingUnavailable) -> None:
        super().__init__(failure.message)
        self.failure = failure


class OpenAICompatibleEmbedder:
    """Embed with an OpenAI-compatible API: batched, concurrent, retried, rate-limited, with
    same-model fallback endpoints."""

    provider = "openai"

    def __init__(
        self,
        *,
        client: openai.OpenAI | None = None,
        model: str,
        dimensions: int | None = None,
        max_batch: int = 2048,
        max_batch_tokens: int = 300_000,
        max_input_tokens: int | None = None,
        concurrency: int = 4,
        timeout_seconds: float = 60.0,
        retry: ProviderRetryPolicy | None = None,
        query_deadline_seconds: float | None = None,
        limiter: RateLimiter | None = None,
        endpoints: Sequence[Endpoint] | None = None,
    ) -> None:
        """`dimensions` and `max_input_tokens` as `models.sizing` says (None: the model's
        native size, an unknown model's learnt from its first reply; its documented limit).

        Give either `client` (and `limiter`): one endpoint; or `endpoints`, the primary
        first. With more than one, each is checked before its first batch.

        `query_deadline_seconds` bounds a query's embedding, retries included (a search
        waits for it); None means `retry`'s deadline, as for documents.
        """
        sized = sizing(model, dimensions, max_input_tokens)
        self._send_dimensions = sized.send_dimensions
        if endpoints is None:
            if client is None:
                raise ValueError("give a client or endpoints")
            kwargs: dict[str, Any] = {"limiter": limiter} if limiter is not None else {}
            endpoints = [Endpoint(PRIMARY, client, **kwargs)]
        self._endpoints = list(endpoints)
        if len(self._endpoints) == 1:  # nothing to tell apart: a lone endpoint is not probed
            self._endpoints[0].checked = True
        self.model = model
        self._dimensions = sized.dimensions
        self.max_batch = max_batch
        self.max_batch_tokens = max_batch_tokens
        self.max_input_tokens = sized.max_input_tokens
        self.concurrency = concurrency
        self._timeout = timeout_seconds
        self._retry = retry or ProviderRetryPolicy()
        self._query_retry = (
            self._retry
            if query_deadline_seconds is None
            else replace(self._retry, deadline_seconds=query_deadline_seconds)
        )
        self._counter = token_counter(model)
        self._lock = threading.Lock()
        self._same_model = SameModelCheck(model, probe=self._probe, size=self._size)

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

        The limiter's scope hashes each endpoint's base URL and key, so every worker using
        one credential shares one budget. A request never holds more tokens than the
        per-minute budget.
        """
        tokens_per_minute = settings.embedding_tokens_per_minute
        max_batch_tokens = settings.embedding_max_batch_tokens
        if tokens_per_minute:  # a bigger request could never be granted
            max_batch_tokens = min(max_batch_tokens, tokens_per_minute)
        return cls(
            model=model,
            dimensions=dimensions,
            max_batch=settings.embedding_max_batch,
            max_batch_tokens=max_batch_tokens,
            concurrency=settings.embedding_concurrency,
            timeout_seconds=settings.embedding_timeout_seconds,
            retry=ProviderRetryPolicy.from_settings(settings),
            query_deadline_seconds=settings.query_embedding_deadline_seconds,
            endpoints=build_endpoints(settings, redis),
        )

    @property
    def endpoints(self) -> list[Endpoint]:
        """The primary, then the fallbacks, in the order batches try them."""
        return list(self._endpoints)

    @property
    def dimensions(self) -> int:
        """Vector size; for an unknown model without a configured size, one probe asks."""
        if self._dimensions is None:
            self._embed([PROBE_TEXT], None)
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
        """Embed one query in its own request (OpenAI models need no query prefix), retried
        within the query's deadline, not the documents'."""
        vector: np.ndarray = self._embed([text], None, self._query_retry)[0]
        return vector

    def check_endpoints(self) -> dict[str, str]:
        """Check every endpoint not checked yet (done on start); label → `ok`, `refused: ...`
        or `unchecked: ...` (it did not answer; checked again before its first batch)."""
        outcome = {}
        for endpoint in self._endpoints:
            problem = self._check(endpoint)
            if endpoint.refused is not None:
                outcome[endpoint.label] = f"refused: {endpoint.refused}"
            else:
                outcome[endpoint.label] = "ok" if problem is None else f"unchecked: {problem}"
        return outcome

    def close(self) -> None:
        for endpoint in self._endpoints:
            endpoint.client.close()

    def _embed(
        self,
        texts: Sequence[str],
        on_progress: ProgressCallback | None,
        retry: ProviderRetryPolicy | None = None,
    ) -> np.ndarray:
        """Plan the batches, embed them on the pool as they are planned, and reassemble;
        each batch is retried on each endpoint as `retry` says (documents' by default)."""
        retry = retry or self._retry
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
                run.submitted(
                    batch, pool.submit(context.run, self._embed_batch, batch, abort, retry)
                )
                run.collect(block=False)
            while not run.complete:
                run.collect(block=True)
        except BaseException:
            abort.set()
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        return run.vectors()

    def _embed_batch(
        self, batch: Batch, abort: threading.Event, retry: ProviderRetryPolicy
    ) -> np.ndarray:
        """Embed one batch on the first endpoint that serves it; raise EmbeddingFailed when
        it cannot succeed, EmbeddingUnavailable when no endpoint could serve it now."""
        skipped: list[str] = []
        gave_up: list[_GaveUp] = []
        for endpoint in self._endpoints:
            if abort.is_set():
                raise _Aborted
            if endpoint.refused is not None:
                skipped.append(f"{endpoint.label} refused ({endpoint.refused})")
                continue
            admitted = endpoint.breaker.admit()
            if admitted is None:
                skipped.append(f"{endpoint.label}'s circuit is open")
                gave_up.append(_GaveUp(EmbeddingUnavailable(skipped[-1])))
                continue
            try:
                return self._embed_on(
                    endpoint, batch, abort, probe=admitted == "probe", retry=retry
                )
            except _Aborted:
                if admitted == "probe":
                    endpoint.breaker.probe_ended()
                raise
            except EndpointRefused as exc:
                skipped.append(f"{endpoint.label} refused ({exc})")
                continue
            except _GaveUp as exc:
                gave_up.append(exc)
                if endpoint is not self._endpoints[-1]:
                    metrics.EMBEDDING_FAILOVERS.labels(endpoint.label).inc()
                    logger.warning(
                        "embedding endpoint %s (%s) gave up on a batch of %d inputs (%s); "
                        "the next endpoint takes it",
                        endpoint.label,
                        endpoint.url,
                        len(batch.pieces),
                        exc.failure.message,
                    )
        abort.set()
        COUNTERS.add(failures=1)
        if len(self._endpoints) == 1 and gave_up:
            raise gave_up[0].failure from gave_up[0].failure.__cause__
        reasons = "; ".join(dict.fromkeys(skipped + [exc.failure.message for exc in gave_up]))
        if not gave_up:  # every endpoint refused: no retry can help, the settings must change
            raise EmbeddingFailed(f"No embedding endpoint serves the index's model: {reasons}")
        raise EmbeddingUnavailable(f"Embedding failed on every endpoint: {reasons}") from (
            gave_up[-1].failure
        )

    def _embed_on(
        self,
        endpoint: Endpoint,
        batch: Batch,
        abort: threading.Event,
        *,
        probe: bool,
        retry: ProviderRetryPolicy,
    ) -> np.ndarray:
        """Embed one batch on `endpoint`, retrying it there (a half-open `probe` tries once);
        `_GaveUp` when its retries or its circuit say stop."""
        deadline = time.monotonic() + retry.deadline_seconds
        policy = replace(retry, max_attempts=1) if probe else retry
        breaker = endpoint.breaker
        retrying = build_retrying(
            policy,
            deadline=deadline,
            abort=abort,
            before_sleep=self._before_sleep,
            give_up=lambda: breaker.is_open,
        )
        errors: list[BaseException] = []  # every attempt's, to name the telling one at the end

        def attempt() -> np.ndarray:
            try:
                return self._attempt(endpoint, batch, deadline, abort)
            except Exception as exc:
                errors.append(exc)
                if is_retryable(exc):
                    metrics.EMBEDDING_ENDPOINT_FAILURES.labels(endpoint.label).inc()
                    if breaker.failed():
                        metrics.EMBEDDING_CIRCUIT_OPENED.labels(endpoint.label).inc()
                        logger.warning(
                            "embedding endpoint %s (%s): circuit open for %g s after %s",
                            endpoint.label,
                            endpoint.url,
                            breaker.open_seconds,
                            describe(exc),
                        )
                raise

        try:
            vectors: np.ndarray = retrying(attempt)
            return vectors
        except (_Aborted, EndpointRefused):
            raise
        except RetryError as exc:
            if abort.is_set():
                raise _Aborted from None
            error = exc.last_attempt.exception()
            assert error is not None
            where = f" on {endpoint.label}" if len(self._endpoints) > 1 else ""
            attempts = exc.last_attempt.attempt_number
            failure = EmbeddingUnavailable(
                f"Embedding failed {describe_retries(errors, attempts, where=where)}"
            )
            failure.__cause__ = error
            raise _GaveUp(failure) from error
        except (openai.APIStatusError, BadReply) as exc:
            abort.set()
            COUNTERS.add(failures=1)
            raise EmbeddingFailed(f"Embedding failed (not retried): {describe(exc)}") from exc
        except Exception:
            abort.set()  # the other batches stop before their next attempt
            COUNTERS.add(failures=1)
            raise

    def _before_sleep(self, retry_state: RetryCallState) -> None:
        COUNTERS.add(retries=1)
        error = retry_state.outcome.exception() if retry_state.outcome else None
        logger.warning(
            "embedding attempt %d failed (%s); retrying in %.2f s",
            retry_state.attempt_number,
            describe(error) if error else "?",
            retry_state.upcoming_sleep,
        )

    def _body(self, texts: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "input": texts, "encoding_format": "base64"}
        if self._send_dimensions is not None:
            body["dimensions"] = self._send_dimensions
        return body

    def _send(self, endpoint: Endpoint, texts: list[str], *, tokens: int, timeout: float) -> bytes:
        COUNTERS.add(requests=1, inputs=len(texts), tokens=tokens)
        started = time.perf_counter()
        try:
            return endpoint.post(self._body(texts), timeout=timeout)
        finally:
            elapsed = time.perf_counter() - started
            metrics.EMBEDDING_REQUEST_SECONDS.labels("openai").observe(elapsed)

    def _attempt(
        self, endpoint: Endpoint, batch: Batch, deadline: float, abort: threading.Event
    ) -> np.ndarray:
        if abort.is_set():
            raise _Aborted
        if not endpoint.checked:
            self._same_model.require(endpoint)
        endpoint.limiter.acquire(tokens=batch.tokens, deadline=deadline)
        timeout = min(self._timeout, max(deadline - time.monotonic(), 0.001))
        content = self._send(endpoint, batch.texts, tokens=batch.tokens, timeout=timeout)
        reply = parse_reply(content, len(batch.pieces))
        vectors = self._vectors(reply)
        endpoint.served(len(batch.pieces), reply.prompt_tokens or batch.tokens)
        return vectors

    def _vectors(self, reply: Reply) -> np.ndarray:
        """Unit vectors of a reply in input order; learn the size if still unknown."""
        matrix = reply.vectors
        with self._lock:
            if self._dimensions is None:
                self._dimensions = matrix.shape[1]
        if matrix.shape[1] != self._dimensions:
            raise BadReply(
                f"{self.model} returned {matrix.shape[1]}-dimensional vectors; "
                f"expected {self._dimensions}"
            )
        return unit_normalise(matrix)

    def _check(self, endpoint: Endpoint) -> str | None:
        """None once `endpoint` is known to serve this model (see `SameModelCheck`)."""
        return self._same_model.check(endpoint)

    def _probe(self, endpoint: Endpoint) -> Reply:
        content = self._send(endpoint, [PROBE_TEXT], tokens=0, timeout=self._timeout)
        return parse_reply(content, 1)

    def _size(self, observed: int) -> int:
        """The index's vector size, learnt from `observed` if still unknown."""
        with self._lock:
            if self._dimensions is None:
                self._dimensions = observed
            return self._dimensions
