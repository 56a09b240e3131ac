"""One JSON POST to a re-ranker, retried, rate-limited and bounded by the search's deadline.

The retry layer is the embeddings' own (`docingest.pipeline.embedders.backoff`): tenacity with full
jitter, honouring Retry-After and the rate-limit reset headers, on 408/409/429/5xx, timeouts,
connection errors and unparsable replies. What differs is the clock: a search waits for its
re-ranker, so every attempt, every backoff and every wait for the shared rate limiter
(`docingest.pipeline.embedders.ratelimit`, one budget per credential across processes) must end by
the deadline, and each request's timeout is cut to the time left. A failure becomes `RerankFailed`
with a code the response shows: `timeout`, `rate_limited`, `rerank_unavailable` (5xx or
unreachable after the retries), `rerank_refused` (another 4xx: a wrong key or model) or
`rerank_bad_reply`.

httpx rather than the `openai` client: three of the four wire formats are not OpenAI's, and
the reply is read in pieces so a huge body is refused at `MAX_REPLY_BYTES` instead of filling
memory.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx
from tenacity import RetryError

from docingest.pipeline.embedders.backoff import (
    RETRYABLE_STATUS,
    MalformedReply,
    ProviderRetryPolicy,
    build_retrying,
    retry_after_seconds,
)
from docingest.pipeline.embedders.endpoints import credential_scope
from docingest.pipeline.embedders.ratelimit import RateLimiter, build_rate_limiter
from docingest.pipeline.errors import ProviderRateLimited, RerankFailed
from docingest.pipeline.rerank.base import bad_reply
from docingest.pipeline.settings import Settings

if TYPE_CHECKING:
    from redis import Redis

MAX_REPLY_BYTES = 16 * 1024**2
"""Largest reply read: 1,000 documents echoed back at 16 KiB each fit."""
CONNECT_TIMEOUT_SECONDS = 2.0
BACKOFF_BASE_SECONDS = 0.2
"""First backoff; small because a person is waiting for the search."""
BACKOFF_MAX_SECONDS = 2.0
_ERROR_TEXT_BYTES = 2048


class _StatusError(Exception):
    """An HTTP error reply, with what the retry layer needs from it."""

    def __init__(self, status: int, headers: Mapping[str, str], text: str, url: str) -> None:
        super().__init__(f"HTTP {status} from {url}: {text[:300]}")
        self.status = status
        self.headers = dict(headers)


class _DeadlinePassed(Exception):
    pass


def _retryable(error: BaseException) -> bool:
    if isinstance(error, _StatusError):
        return error.status in RETRYABLE_STATUS or error.status >= 500
    return isinstance(error, httpx.TransportError | MalformedReply)


def _hint(error: BaseException) -> float | None:
    if isinstance(error, _StatusError):
        return retry_after_seconds(error.headers, rate_limited=error.status == 429)
    return None


def endpoint_label(url: str) -> str:
    """Scheme, host and port of `url` (what logs and metrics may show of an endpoint)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}" if parts.netloc else url


@dataclass(frozen=True, slots=True)
class RerankEndpoint:
    """Where a re-ranker is and how hard to try it (from the `rerank_*` settings)."""

    url: str
    api_key: str | None
    timeout_seconds: float
    max_attempts: int
    requests_per_minute: int = 0

    @classmethod
    def from_settings(cls, settings: Settings) -> RerankEndpoint:
        if not settings.rerank_url:
            raise RerankFailed(
                "rerank_not_configured", "Rerank is on but DOCINGEST_RERANK_URL is not set."
            )
        key = settings.rerank_api_key
        return cls(
            url=settings.rerank_url.rstrip("/"),
            api_key=key.get_secret_value() if key is not None else None,
            timeout_seconds=settings.rerank_timeout_seconds,
            max_attempts=settings.rerank_max_attempts,
            requests_per_minute=settings.rerank_requests_per_minute,
        )


class RerankHttp:
    """POSTs JSON to one re-ranker endpoint; thread-safe (httpx clients are)."""

    def __init__(self, endpoint: RerankEndpoint, *, redis: Redis | None = None) -> None:
        self.endpoint = endpoint
        self.label = endpoint_label(endpoint.url)
        headers = {"Accept": "application/json"}
        if endpoint.api_key:
            headers["Authorization"] = f"Bearer {endpoint.api_key}"
        self._client = httpx.Client(headers=headers, follow_redirects=False)
        self._limiter: RateLimiter = build_rate_limiter(
            redis,
            scope="rerank-" + credential_scope(endpoint.url, endpoint.api_key or ""),
            requests_per_minute=endpoint.requests_per_minute,
            tokens_per_minute=0,
        )
        self._policy = ProviderRetryPolicy(
            max_attempts=endpoint.max_attempts,
            deadline_seconds=endpoint.timeout_seconds * endpoint.max_attempts,
            backoff_base_seconds=BACKOFF_BASE_SECONDS,
            backoff_max_seconds=BACKOFF_MAX_SECONDS,
        )

    def post(self, path: str, body: dict[str, Any], *, deadline: float) -> Any:
        """POST `body` to `{url}{path}` and return the parsed JSON reply (see the module)."""
        url = self.endpoint.url + path
        retrying = build_retrying(
            self._policy,
            deadline=deadline,
            abort=threading.Event(),
            is_retryable=_retryable,
            hint=_hint,
        )
        try:
            return retrying(self._once, url, body, deadline)
        except RetryError as exc:
            raise _failure(exc.last_attempt.exception(), url) from exc
        except RerankFailed:
            raise
        except Exception as exc:  # the non-retryable: translated once, here
            raise _failure(exc, url) from exc

    def close(self) -> None:
        self._client.close()

    def _once(self, url: str, body: dict[str, Any], deadline: float) -> Any:
        left = deadline - time.monotonic()
        if left <= 0:
            raise _DeadlinePassed
        self._limiter.acquire(tokens=0, deadline=deadline)
        left = deadline - time.monotonic()
        if left <= 0:
            raise _DeadlinePassed
        timeout = httpx.Timeout(
            min(self.endpoint.timeout_seconds, left), connect=min(CONNECT_TIMEOUT_SECONDS, left)
        )
        with self._client.stream("POST", url, json=body, timeout=timeout) as response:
            if response.status_code >= 400:
                text = _read(response, _ERROR_TEXT_BYTES, deadline, strict=False)
                raise _StatusError(
                    response.status_code,
                    response.headers,
                    text.decode(errors="replace"),
                    endpoint_label(url),
                )
            content = _read(response, MAX_REPLY_BYTES, deadline, strict=True)
        try:
            return json.loads(content)
        except (ValueError, RecursionError) as exc:
            raise MalformedReply(f"reply is not JSON: {str(exc)[:200]}") from exc


def _read(response: httpx.Response, limit: int, deadline: float, *, strict: bool) -> bytes:
    """Read up to `limit` bytes by the deadline; past the limit refuse (`strict`) or cut."""
    parts, size = [], 0
    for part in response.iter_bytes():
        size += len(part)
        if size > limit:
            if strict:
                raise bad_reply(f"it is larger than {limit // 1024**2} MiB")
            parts.append(part[: limit - size + len(part)])
            break
        parts.append(part)
        if time.monotonic() > deadline:
            raise _DeadlinePassed
    return b"".join(parts)


def _failure(error: BaseException | None, url: str) -> RerankFailed:
    """Translate the last attempt's error into the code the response shows."""
    where = endpoint_label(url)
    if isinstance(error, RerankFailed):
        return error
    if isinstance(error, _DeadlinePassed | httpx.TimeoutException):
        return RerankFailed("timeout", f"The re-ranker at {where} did not answer in time.")
    if isinstance(error, ProviderRateLimited):
        return RerankFailed("rate_limited", f"The rerank rate limit leaves no room: {error}")
    if isinstance(error, _StatusError):
        if error.status == 429:
            return RerankFailed("rate_limited", f"The re-ranker is rate limiting: {error}")
        code = "rerank_unavailable" if _retryable(error) else "rerank_refused"
        return RerankFailed(code, f"The re-ranker answered {error}")
    if isinstance(error, httpx.TransportError):
        return RerankFailed("rerank_unavailable", f"Cannot reach the re-ranker at {where}.")
    if isinstance(error, MalformedReply):
        return bad_reply(str(error))
    return RerankFailed("rerank_unavailable", f"The re-ranker at {where} failed: {error}")


class HttpReranker:
    """What every provider over a `RerankHttp` shares: its client, model and endpoint label,
    and closing the client; a provider adds `provider` and `scores`."""

    def __init__(self, http: RerankHttp, *, model: str) -> None:
        self.http = http
        self.model = model
        self.endpoint = http.label

    def close(self) -> None:
        self.http.close()
