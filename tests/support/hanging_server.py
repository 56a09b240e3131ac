"""A TCP server that accepts every connection and never answers: a peer that hangs (a
re-ranker, an embedding endpoint), for the bulkhead tests and bench/bench_bulkheads.py."""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Self


class HangingServer:
    """Accepts and holds connections until `close()`; `held` counts those open now."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=512)
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, name="hanging-server", daemon=True).start()

    @property
    def held(self) -> int:
        """Connections accepted and not yet closed by the client."""
        with self._lock:
            return len(self._open)

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                connection, _ = self._listener.accept()
                with self._lock:
                    self._open.append(connection)
                threading.Thread(target=self._read, args=(connection,), daemon=True).start()

    def _read(self, connection: socket.socket) -> None:
        """Read whatever comes, answer nothing; forget the connection at the client's EOF."""
        with contextlib.suppress(OSError):
            while connection.recv(65536):
                pass
        with self._lock:
            if connection in self._open:
                self._open.remove(connection)
        connection.close()

    def close(self) -> None:
        self._listener.close()
        with self._lock:
            for connection in self._open:  # shutdown wakes the reader; close alone may not
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_RDWR)
                connection.close()
            self._open.clear()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
