"""Charge the CPU time of chosen functions to named categories, in whichever thread they run.

`CpuLedger.watch(category, owner, name)` replaces `owner.name` (a module's function, or a
class's method) with a wrapper that measures the calling thread's CPU time
(`time.thread_time`) from entry to exit. Time is exclusive: a watched call inside another
watched call is charged to its own category and subtracted from the outer one, so the
categories add up to at most the process's CPU time; the rest is everything unwatched.
Wrappers stay until `restore()`. For benchmarks only: it patches live modules.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any


class CpuLedger:
    """CPU seconds per category, from watched functions in every thread."""

    def __init__(self) -> None:
        self.seconds: defaultdict[str, float] = defaultdict(float)
        self.calls: defaultdict[str, int] = defaultdict(int)
        self._lock = threading.Lock()
        self._local = threading.local()
        self._patched: list[tuple[Any, str, Any]] = []

    def watch(self, category: str, owner: Any, name: str) -> None:
        """Charge calls of `owner.name` to `category` from now on."""
        original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
        if isinstance(original, staticmethod | classmethod):
            raise TypeError(f"{owner}.{name}: static and class methods are not supported")
        self._patched.append((owner, name, original))
        setattr(owner, name, self._wrap(category, original))

    def restore(self) -> None:
        """Put every watched function back."""
        while self._patched:
            owner, name, original = self._patched.pop()
            setattr(owner, name, original)

    def reset(self) -> dict[str, float]:
        """Return the seconds so far by category and start again from zero."""
        with self._lock:
            seconds = dict(self.seconds)
            self.seconds.clear()
            self.calls.clear()
        return seconds

    def _wrap(self, category: str, function: Callable[..., Any]) -> Callable[..., Any]:
        ledger = self

        @functools.wraps(function)
        def watched(*args: Any, **kwargs: Any) -> Any:
            stack: list[list[float]] = ledger._stack()
            frame = [time.thread_time(), 0.0]  # [started, CPU of watched calls inside]
            stack.append(frame)
            try:
                return function(*args, **kwargs)
            finally:
                stack.pop()
                total = time.thread_time() - frame[0]
                if stack:
                    stack[-1][1] += total
                with ledger._lock:
                    ledger.seconds[category] += total - frame[1]
                    ledger.calls[category] += 1

        return watched

    def _stack(self) -> list[list[float]]:
        stack: list[list[float]] | None = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack
