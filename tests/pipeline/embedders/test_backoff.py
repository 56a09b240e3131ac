"""Retry policy: which replies are retried, how long to wait, when to stop."""

from __future__ import annotations

import base64
import json
import threading
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import numpy as np
import pytest
from tenacity import RetryCallState, RetryError, Retrying

from docingest.pipeline.embedders.backoff import (
    BadReply,
    HintedFullJitter,
    MalformedReply,
    ProviderRetryPolicy,
    build_retrying,
    decode_reply,
    parse_duration,
    retry_after_seconds,
)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("1s", 1.0), ("6m0s", 360.0), ("20ms", 0.02), ("1h2m3.5s", 3723.5), ("2", 2.0)],
)
def test_parse_duration(value: str, seconds: float) -> None:
    assert parse_duration(value) == pytest.approx(seconds)


@pytest.mark.parametrize("value", ["", "soon", "1x", "5s later"])
def test_parse_duration_refuses_garbage(value: str) -> None:
    assert parse_duration(value) is None


def test_retry_after_headers() -> None:
    now = datetime(2025, 1, 1, tzinfo=UTC)
    later = format_datetime(now + timedelta(seconds=30), usegmt=True)
    hint = retry_after_seconds
    assert hint({"Retry-After": later}, rate_limited=False, now=now.timestamp()) == 30
    assert hint({"Retry-After": "5", "retry-after-ms": "250"}, rate_limited=True) == 0.25
    assert hint({"Retry-After": "soon"}, rate_limited=False) is None
    resets = {"x-ratelimit-reset-requests": "1s", "x-ratelimit-reset-tokens": "6m0s"}
    assert hint(resets, rate_limited=False) is None
    assert hint(resets, rate_limited=True) == 360.0  # which one is exhausted is not said
    assert hint({**resets, "x-ratelimit-remaining-tokens": "5"}, rate_limited=True) == 1.0


def state_after(attempt: int, error: BaseException) -> RetryCallState:
    state = RetryCallState(Retrying(), fn=None, args=(), kwargs={})
    state.attempt_number = attempt
    state.set_exception((type(error), error, None))
    return state


def test_full_jitter_stays_in_the_growing_window() -> None:
    wait = HintedFullJitter(base=1.0, cap=10.0, hint=lambda error: None)
    for attempt in range(1, 9):
        waits = [wait(state_after(attempt, RuntimeError())) for _ in range(200)]
        high = min(10.0, 2.0 ** (attempt - 1))
        assert all(0 <= value <= high for value in waits)
        assert max(waits) > 0.7 * high  # spread over the window, not stuck low


def test_a_hint_is_obeyed_even_above_the_cap_and_never_below_the_floor() -> None:
    wait = HintedFullJitter(base=1.0, cap=10.0, hint=lambda error: float(str(error)))
    assert all(30 <= wait(state_after(1, RuntimeError("30"))) <= 33 for _ in range(50))
    assert all(0.1 <= wait(state_after(1, RuntimeError("0"))) <= 0.11 for _ in range(50))


def test_retrying_stops_before_the_deadline() -> None:
    # Calls at about 0 and 1 s; the next wait would end at 2 s, past the 1.5 s deadline, so
    # the loop stops after the second call. Ignoring the deadline would take at least 2 s,
    # whatever the load: the bound tells the two apart without a tight margin.
    policy = ProviderRetryPolicy(
        max_attempts=1000, backoff_base_seconds=1.0, backoff_max_seconds=1.0
    )
    calls: list[float] = []

    def always_malformed() -> None:
        calls.append(time.monotonic())
        raise MalformedReply("garbage")

    started = time.monotonic()
    retrying = build_retrying(policy, deadline=started + 1.5, abort=threading.Event())
    with pytest.raises(RetryError):
        retrying(always_malformed)
    # Stopped by the 1.5 s deadline, not after its 1,000 attempts of 1 s each (the margin is
    # room for a loaded machine).
    assert time.monotonic() - started < 30
    assert len(calls) >= 2


def test_retrying_stops_when_aborted_and_never_retries_a_bad_reply() -> None:
    abort = threading.Event()
    policy = ProviderRetryPolicy(max_attempts=1000, backoff_base_seconds=5, backoff_max_seconds=5)
    retrying = build_retrying(policy, deadline=time.monotonic() + 60, abort=abort)
    threading.Timer(0.2, abort.set).start()

    def malformed() -> None:
        raise MalformedReply("garbage")

    started = time.monotonic()
    with pytest.raises(RetryError):
        retrying(malformed)
    # Aborted in its first 5 s wait, not run on to its 60 s deadline (room for a loaded machine).
    assert time.monotonic() - started < 30

    calls: list[int] = []

    def bad() -> None:
        calls.append(1)
        raise BadReply("wrong size")

    with pytest.raises(BadReply):
        build_retrying(policy, deadline=time.monotonic() + 60, abort=threading.Event())(bad)
    assert calls == [1]


def reply(*vectors: object, **extra: object) -> bytes:
    data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
    return json.dumps({"object": "list", "data": data, **extra}).encode()


def b64(values: list[float]) -> str:
    return base64.b64encode(np.asarray(values, dtype="<f4").tobytes()).decode()


def test_decode_reply_reads_base64_and_floats_in_index_order() -> None:
    body = json.loads(reply(b64([1, 2]), [3.0, 4.0]))
    body["data"].reverse()
    matrix = decode_reply(json.dumps(body).encode(), 2)
    np.testing.assert_array_equal(matrix, [[1, 2], [3, 4]])
    assert matrix.dtype == np.float32


@pytest.mark.parametrize(
    ("content", "expected", "error"),
    [
        (b'{"data": [', 1, MalformedReply),
        (b'{"error": {"message": "oops"}}', 1, MalformedReply),
        (reply("not base64!"), 1, MalformedReply),
        (reply(b64([1, 2]) + "AA=="), 1, MalformedReply),
        (reply([1.0]), 2, BadReply),
        (reply([1.0, 2.0], [1.0]), 2, BadReply),
        (reply([1.0, float("nan")]), 1, BadReply),
    ],
)
def test_decode_reply_sorts_glitches_from_wrong_answers(
    content: bytes, expected: int, error: type[Exception]
) -> None:
    with pytest.raises(error):
        decode_reply(content, expected)
