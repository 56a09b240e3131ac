"""Connections to receivers kept open between deliveries (HTTP keep-alive), so a receiver
that takes many deliveries is not sent a new TCP connection, and over HTTPS a new TLS
handshake, for each (BENCHMARKS.md, "Webhooks").

A connection is kept under the address it was opened to, with the URL's host, scheme and
port: it is reused only for a delivery whose URL was just checked and resolved to that same
address, so keeping it never bypasses the check (`docingest.pipeline.webhooks.urls`). Hand-written
over `http.client` for that reason: the pools of urllib3 and httpx are keyed by host name, and
would resolve the name again.
"""

from __future__ import annotations

import http.client
import threading
import time
from collections import deque

from docingest.pipeline.webhooks.urls import Target

IDLE_SECONDS = 4.0
"""How long an unused connection is kept: below the shortest idle timeout common servers
use (Node.js's 5 s), so a kept connection is rarely one the receiver is closing."""

Key = tuple[str, str, int, str]
"""(scheme, address, port, host name)."""


def key_for(target: Target) -> Key:
    return (target.scheme, target.addresses[0], target.port, target.host)


class Connections:
    """Idle connections by `Key`, at most `most` in all (the oldest is closed first)."""

    def __init__(self, most: int) -> None:
        self._most = most
        self._idle: deque[tuple[Key, http.client.HTTPConnection, float]] = deque()
        self._lock = threading.Lock()

    def take(self, key: Key) -> http.client.HTTPConnection | None:
        """The most recently used idle connection for `key`, if one is still fresh."""
        now = time.monotonic()
        with self._lock:
            stale = self._drop_stale(now)
            found = None
            for position in range(len(self._idle) - 1, -1, -1):
                if self._idle[position][0] == key:
                    found = self._idle[position][1]
                    del self._idle[position]
                    break
        for connection in stale:
            connection.close()
        return found

    def give_back(self, key: Key, connection: http.client.HTTPConnection) -> None:
        now = time.monotonic()
        with self._lock:
            self._idle.append((key, connection, now))
            closing = self._drop_stale(now)
            while len(self._idle) > self._most:
                closing.append(self._idle.popleft()[1])
        for old in closing:
            old.close()

    def close(self) -> None:
        with self._lock:
            closing = [connection for _, connection, _ in self._idle]
            self._idle.clear()
        for connection in closing:
            connection.close()

    def _drop_stale(self, now: float) -> list[http.client.HTTPConnection]:
        stale = []
        while self._idle and now - self._idle[0][2] > IDLE_SECONDS:
            stale.append(self._idle.popleft()[1])
        return stale
