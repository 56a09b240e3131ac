"""Waiting in tests: the one polling loop."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    condition: Callable[[], T | None],
    *,
    timeout: float = 30.0,
    what: str = "the condition",
    poll: float = 0.02,
) -> T:
    """Call `condition` until it returns something truthy, and return that; raise
    `TimeoutError` naming `what` if it has not within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not hold within {timeout:.0f} s")
        time.sleep(poll)
