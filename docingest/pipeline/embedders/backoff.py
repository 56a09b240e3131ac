"""When to try an embedding request again: which replies and failures, and after how long.

Retried: HTTP 408, 409, 429 and 5xx, timeouts, connection errors, and replies that cannot be
parsed (`MalformedReply`: a proxy glitch, most likely). Not retried: other 4xx, and
well-formed replies with the wrong vectors (`BadReply`: a configuration error).

The wait after a failed attempt is, in order of preference:

1. what the server asked for: `retry-after-ms`, then `Retry-After` (seconds or an HTTP date),
   then, on a 429 only, the `x-ratelimit-reset-requests` / `x-ratelimit-reset-tokens`
   durations ("1s", "6m0s", "20ms") of the exhausted limit. It is obeyed even above
   `cap` (never below a small floor, plus up to 10 % jitter so workers told the same instant
   do not return together);
2. otherwise "full jitter": uniform in [0, min(cap, base * 2 ** (attempt - 1))].

Attempts stop at `max_attempts`, or as soon as the next wait would end past the deadline, or
when the caller aborts (another batch failed for good).
"""

from __future__ import annotations

import base64
import binascii
import json
import random
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

import numpy as np
import openai
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
)
from tenacity.stop import stop_base
from tenacity.wait import wait_base

from docingest.pipeline.settings import Settings

RETRYABLE_STATUS = frozenset({408, 409, 429})
"""Status codes below 500 worth retrying (every 5xx is too)."""

HINT_FLOOR_SECONDS = 0.1
"""Shortest wait even when the server says "retry now"."""

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|us|µs|ns|h|m|s)")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def parse_duration(value: str) -> float | None:
    """Parse a Go-style duration ("6m0s", "1.5s", "20ms"; a bare number is seconds)."""
    value = value.strip()
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    parts = _DURATION_PART.findall(value)
    if not parts or "".join(number + unit for number, unit in parts) != value:
        return None
    return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts)


def _retry_after(value: str, now: float) -> float | None:
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(when.timestamp() - now, 0.0)


def retry_after_seconds(
    headers: Mapping[str, str], *, rate_limited: bool, now: float | None = None
) -> float | None:
    """Return the wait the response headers ask for, or None when they ask for none.

    `now` is the wall-clock time (for an HTTP-date Retry-After); `rate_limited` enables the
    `x-ratelimit-reset-*` headers, which every OpenAI response carries but only a 429 means.
    """
    lower = {name.lower(): value for name, value in headers.items()}
    if (ms := lower.get("retry-after-ms")) is not None:
        try:
            return max(float(ms) / 1000, 0.0)
        except ValueError:
            pass
    if (value := lower.get("retry-after")) is not None:
        seconds = _retry_after(value, time.time() if now is None else now)
        if seconds is not None:
            return seconds
    if not rate_limited:
        return None
    resets = []
    for kind in ("requests", "tokens"):
        reset = lower.get(f"x-ratelimit-reset-{kind}")
        remaining = lower.get(f"x-ratelimit-remaining-{kind}")
        if reset is None or (remaining is not None and remaining.strip() != "0"):
            continue
        if (seconds := parse_duration(reset)) is not None:
            resets.append(seconds)
    return max(resets) if resets else None


class MalformedReply(Exception):
    """A reply that cannot be parsed; retried."""


class BadReply(Exception):
    """A well-formed reply with the wrong vectors; never retried."""


def is_retryable(error: BaseException) -> bool:
    if isinstance(error, openai.APIStatusError):
        return error.status_code in RETRYABLE_STATUS or error.status_code >= 500
    return isinstance(error, openai.APIConnectionError | MalformedReply)


def retry_hint(error: BaseException) -> float | None:
    """Return the wait a failed request's response asked for, if any."""
    if isinstance(error, openai.APIStatusError):
        return retry_after_seconds(error.response.headers, rate_limited=error.status_code == 429)
    return None


def describe(error: BaseException) -> str:
    """Say what the provider answered: status, URL and its message."""
    if isinstance(error, openai.APIStatusError):
        body: Any = error.body
        message = body.get("message") if isinstance(body, dict) else None
        text = str(message or error.message)[:300]
        return f"HTTP {error.status_code} from {error.request.url}: {text}"
    if isinstance(error, openai.APITimeoutError):
        return f"timed out waiting for {error.request.url}"
    if isinstance(error, openai.APIConnectionError):
        return f"cannot connect to {error.request.url}: {error.__cause__ or error}"
    return str(error)


def describe_retries(errors: Sequence[BaseException], attempts: int, *, where: str = "") -> str:
    """Say how retries ended: `after N attempts<where>: <the telling error>`, where a last
    attempt that the deadline cut short defers to the error before it, which says more."""
    error = errors[-1]
    cause = describe(error)
    timeout = openai.APITimeoutError
    earlier = errors[-2] if len(errors) > 1 else None
    if isinstance(error, timeout) and earlier and not isinstance(earlier, timeout):
        cause = f"{describe(earlier)} (the last attempt timed out at the deadline)"
    return f"after {attempts} attempt{'s' if attempts > 1 else ''}{where}: {cause}"


@dataclass(frozen=True, slots=True)
class Reply:
    """A parsed embeddings reply: the vectors, and what the server says about them."""

    vectors: np.ndarray
    prompt_tokens: int | None
    """The reply's `usage.prompt_tokens` (the provider's own count), if it has one."""
    model: str | None
    """The model the reply names, if any."""


def decode_reply(content: bytes, expected: int) -> np.ndarray:
    """Return the float32 vectors of an embeddings reply in input order (see `parse_reply`)."""
    return parse_reply(content, expected).vectors


def parse_reply(content: bytes, expected: int) -> Reply:
    """Return the float32 vectors of an embeddings reply in input order, with its usage.

    Raise `MalformedReply` for a body that is not an embeddings list (retried), `BadReply`
    for one with the wrong number of vectors, bad indexes or non-finite values.
    """
    try:
        payload = json.loads(content)
    except ValueError as exc:
        raise MalformedReply(f"reply is not JSON: {exc}") from exc
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list):
        raise MalformedReply("reply has no `data` list")
    if len(data) != expected:
        raise BadReply(f"reply has {len(data)} vectors for {expected} inputs")
    rows: list[np.ndarray | None] = [None] * expected
    for item in data:
        index = item.get("index") if isinstance(item, dict) else None
        if not isinstance(index, int) or not 0 <= index < expected or rows[index] is not None:
            raise BadReply(f"reply has a bad or repeated index: {index!r}")
        rows[index] = _decode_vector(item.get("embedding"))
    try:
        matrix = np.stack(rows)  # type: ignore[arg-type]
    except ValueError as exc:
        raise BadReply("reply vectors differ in length") from exc
    if not np.isfinite(matrix).all():
        raise BadReply("reply vectors hold non-finite values")
    usage = payload.get("usage")
    tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    model = payload.get("model")
    return Reply(
        matrix,
        prompt_tokens=tokens if isinstance(tokens, int) and tokens >= 0 else None,
        model=model if isinstance(model, str) and model else None,
    )


def _decode_vector(embedding: object) -> np.ndarray:
    if isinstance(embedding, str):  # base64 of little-endian float32
        try:
            raw = base64.b64decode(embedding, validate=True)
        except binascii.Error as exc:
            raise MalformedReply(f"bad base64 vector: {exc}") from exc
        if len(raw) % 4:
            raise MalformedReply("base64 vector is not whole float32 values")
        return np.frombuffer(raw, dtype="<f4")
    if isinstance(embedding, list) and embedding:
        try:
            return np.asarray(embedding, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise MalformedReply(f"bad vector: {exc}") from exc
    raise MalformedReply("reply item has no embedding")


class HintedFullJitter(wait_base):
    """Wait what the failed attempt's hint says, else full-jitter exponential backoff."""

    def __init__(
        self, *, base: float, cap: float, hint: Callable[[BaseException], float | None]
    ) -> None:
        self.base = base
        self.cap = cap
        self.hint = hint

    def __call__(self, retry_state: RetryCallState) -> float:
        error = retry_state.outcome.exception() if retry_state.outcome else None
        hinted = self.hint(error) if error is not None else None
        if hinted is not None:
            return max(hinted, HINT_FLOOR_SECONDS) * random.uniform(1.0, 1.1)
        exponent = min(retry_state.attempt_number - 1, 60)
        return random.uniform(0.0, min(self.cap, self.base * 2.0**exponent))


class StopAtDeadline(stop_base):
    """Stop when the next attempt would start after `deadline` (a `time.monotonic()` value)."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline

    def __call__(self, retry_state: RetryCallState) -> bool:
        return time.monotonic() + retry_state.upcoming_sleep >= self.deadline


class StopWhenSet(stop_base):
    """Stop once `event` is set."""

    def __init__(self, event: threading.Event) -> None:
        self.event = event

    def __call__(self, retry_state: RetryCallState) -> bool:
        return self.event.is_set()


class StopWhen(stop_base):
    """Stop once `predicate()` is true."""

    def __init__(self, predicate: Callable[[], bool]) -> None:
        self.predicate = predicate

    def __call__(self, retry_state: RetryCallState) -> bool:
        return self.predicate()


@dataclass(frozen=True)
class ProviderRetryPolicy:
    """How hard the service tries one call to a provider (an embedding batch, a rerank request):
    attempts, deadline and backoff (`from_settings`: the `embedding_*` settings of the same
    names; a re-ranker's come from its endpoint).

    Not the SDK's public `docingest.RetryPolicy`, which retries a client's requests to this
    service on 429/503; the two cannot share code (the SDK imports none of the service)."""

    max_attempts: int = 6
    deadline_seconds: float = 600.0
    backoff_base_seconds: float = 1.0
    backoff_max_seconds: float = 60.0

    @classmethod
    def from_settings(cls, settings: Settings) -> ProviderRetryPolicy:
        return cls(
            max_attempts=settings.embedding_max_attempts,
            deadline_seconds=settings.embedding_deadline_seconds,
            backoff_base_seconds=settings.embedding_backoff_base_seconds,
            backoff_max_seconds=settings.embedding_backoff_max_seconds,
        )


def build_retrying(
    policy: ProviderRetryPolicy,
    *,
    deadline: float,
    abort: threading.Event,
    is_retryable: Callable[[BaseException], bool] = is_retryable,
    hint: Callable[[BaseException], float | None] = retry_hint,
    before_sleep: Callable[[RetryCallState], Any] | None = None,
    give_up: Callable[[], bool] | None = None,
) -> Retrying:
    """Return the tenacity loop of one batch; it raises `RetryError` when out of attempts/time.

    `deadline` is a `time.monotonic()` value; `give_up` is asked after each failed attempt
    (an endpoint's circuit opening ends its batches' retries).

    Exceptions `is_retryable` rejects are re-raised at once. Sleeping wakes early on `abort`.
    """

    def sleep(seconds: float) -> None:
        abort.wait(seconds)

    stop = stop_after_attempt(policy.max_attempts) | StopAtDeadline(deadline) | StopWhenSet(abort)
    if give_up is not None:
        stop = stop | StopWhen(give_up)
    return Retrying(
        stop=stop,
        wait=HintedFullJitter(
            base=policy.backoff_base_seconds, cap=policy.backoff_max_seconds, hint=hint
        ),
        retry=retry_if_exception(is_retryable),
        sleep=sleep,
        before_sleep=before_sleep,
    )
