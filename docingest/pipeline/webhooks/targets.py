"""What each receiver holds of one dispatcher's senders: the bulkhead between receivers.

A target is a receiver's origin (`scheme://host:port`, as the outbox's claim computes it from
the URL), so every webhook and callback pointing at one server shares its limits. A target
may have at most `per_target` attempts in flight; a slow one (an attempt running, or recently
ended, past `SLOW_SECONDS`) shares with the other slow ones at most `slow_share` senders, so
any number of receivers that hang leave the rest of the senders to the healthy ones
(RELIABILITY.md, "Webhooks"; BENCHMARKS.md, "Bulkheads").
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict

from docingest.pipeline.outbox import ClaimRoom

SLOW_SECONDS = 2.0
"""An attempt longer than this marks its target slow: receivers are expected to answer at once
and do the work later, so a healthy one is far below it."""
SLOW_MEMORY_SECONDS = 60.0
"""How long a target stays slow after a slow attempt, unless a quick delivery clears it."""


class TargetLoad:
    """Attempts in flight per target, and which targets are slow; thread-safe."""

    def __init__(self, *, per_target: int, slow_share: int) -> None:
        self._per_target = per_target
        self._slow_share = slow_share
        self._started: defaultdict[str, list[float]] = defaultdict(list)
        self._slow_until: dict[str, float] = {}
        self._lock = threading.Lock()

    def started(self, target: str) -> float:
        """Count an attempt to `target` as in flight; its start, for `ended`."""
        now = time.monotonic()
        with self._lock:
            self._started[target].append(now)
        return now

    def ended(self, target: str, start: float) -> None:
        """The attempt begun at `start` is over: a quick one clears the target's slowness, a
        slow one marks it for `SLOW_MEMORY_SECONDS`."""
        now = time.monotonic()
        with self._lock:
            starts = self._started[target]
            starts.remove(start)
            if not starts:
                del self._started[target]
            if now - start < SLOW_SECONDS:
                self._slow_until.pop(target, None)
            else:
                self._slow_until[target] = now + SLOW_MEMORY_SECONDS

    def room(self) -> ClaimRoom:
        """The limits for the next claim."""
        now = time.monotonic()
        with self._lock:
            for target, until in list(self._slow_until.items()):
                if until <= now:
                    del self._slow_until[target]
            slow = set(self._slow_until)
            slow.update(
                target
                for target, starts in self._started.items()
                if now - starts[0] >= SLOW_SECONDS
            )
            rooms = {
                target: max(0, self._per_target - len(starts))
                for target, starts in self._started.items()
            }
            slow_in_flight = sum(len(self._started.get(target, ())) for target in slow)
        return ClaimRoom(
            per_target=self._per_target,
            rooms=rooms,
            slow=sorted(slow),
            slow_room=max(0, self._slow_share - slow_in_flight),
        )
