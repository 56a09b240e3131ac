"""A real HTTP receiver of webhook deliveries for tests and benchmarks (stdlib `http.server` on
a thread per request), recording every delivery it is sent and answering as told: accept,
refuse (500), refuse some first attempts, hang without answering, or redirect. It can be
stopped and started again on the same port, as a receiver that goes down and comes back.
"""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.support.waiting import wait_until


class _QuietServer(ThreadingHTTPServer):
    """A sender that hangs up (a dispatcher killed mid-delivery, or timing out) is expected
    here, not an error worth a traceback."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass


@dataclass(frozen=True)
class Received:
    """One request the receiver got, and what it answered (None: it never did)."""

    path: str
    headers: dict[str, str]
    body: bytes
    status: int | None

    @property
    def payload(self) -> dict[str, Any]:
        value: dict[str, Any] = json.loads(self.body)
        return value

    @property
    def delivery_id(self) -> str:
        return self.headers.get("x-docingest-delivery", "")


class WebhookReceiver:
    """`mode`: `ok` (200), `fail` (500), `hang` (never answers until `release()`),
    `redirect` (302 to `redirect_to`), `flaky` (500 on the first attempt of every third
    delivery it receives, the very first included, then 200: counted, not drawn, so a test
    always meets a refusal)."""

    def __init__(
        self,
        mode: str = "ok",
        *,
        redirect_to: str = "http://127.0.0.1:9/",
        log_to: Path | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.mode = mode
        self.tls = tls
        """A server context: HTTPS, with the certificate it holds."""
        self.log_to = log_to
        self.redirect_to = redirect_to
        self._received: list[Received] = []
        self._open: set[socket.socket] = set()
        self.connections_opened = 0
        """TCP connections accepted, over every start."""
        self._lock = threading.Lock()
        self._release = threading.Event()
        self._first_attempts = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    # --- running ------------------------------------------------------------------------

    def start(self) -> WebhookReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keeps connections open, as receivers do
            disable_nagle_algorithm = True  # as they do too: else each answer waits ~40 ms

            def setup(self) -> None:
                super().setup()
                with receiver._lock:
                    receiver._open.add(self.connection)
                    receiver.connections_opened += 1

            def finish(self) -> None:
                with receiver._lock:
                    receiver._open.discard(self.connection)
                super().finish()

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length)
                receiver._answer(self, body)

            def log_message(self, *_: Any) -> None:
                pass

        server = _QuietServer(("127.0.0.1", self.port), Handler)
        if self.tls is not None:
            server.socket = self.tls.wrap_socket(server.socket, server_side=True)
        server.daemon_threads = True
        self.port = server.server_address[1]
        self._server = server
        self._release.clear()
        self._thread = threading.Thread(target=server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop answering (connections are refused until `start()` again, on the same port)."""
        self._release.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        with self._lock:  # and hang up on the connections kept open, as a stopped server does
            for connection in self._open:
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_RDWR)
            self._open.clear()

    def release(self) -> None:
        """Let hanging requests go (they get a 500)."""
        self._release.set()

    @property
    def url(self) -> str:
        scheme = "https" if self.tls is not None else "http"
        return f"{scheme}://127.0.0.1:{self.port}/hook"

    # --- what it got --------------------------------------------------------------------

    @property
    def received(self) -> list[Received]:
        with self._lock:
            return list(self._received)

    def accepted(self) -> list[Received]:
        """The deliveries it answered with a 2xx, in the order it got them."""
        return [r for r in self.received if r.status is not None and 200 <= r.status < 300]

    def wait_for(self, count: int, *, timeout: float = 120.0) -> list[Received]:
        """Wait until `count` distinct deliveries were accepted; return the accepted ones."""

        def enough() -> list[Received] | None:
            accepted = self.accepted()
            return accepted if len({r.delivery_id for r in accepted}) >= count else None

        return wait_until(enough, timeout=timeout, what=f"{count} deliveries accepted", poll=0.1)

    # --- answering ----------------------------------------------------------------------

    def _status_for(self, headers: dict[str, str]) -> int | None:
        if self.mode == "fail":
            return 500
        if self.mode == "hang":
            return None
        if self.mode == "redirect":
            return 302
        if self.mode == "flaky":
            if headers.get("x-docingest-attempt") != "1":
                return 200
            with self._lock:
                self._first_attempts += 1
                unlucky = self._first_attempts % 3 == 1
            return 500 if unlucky else 200
        return 200

    def _answer(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        headers = {key.lower(): value for key, value in handler.headers.items()}
        status = self._status_for(headers)
        if status is None:
            with self._lock:
                self._received.append(Received(handler.path, headers, body, None))
            self._release.wait()
            status = 500
        else:
            with self._lock:
                self._received.append(Received(handler.path, headers, body, status))
                if self.log_to is not None:
                    record = {"headers": headers, "body": body.decode(), "status": status}
                    with self.log_to.open("a") as log:
                        log.write(json.dumps(record) + "\n")
        handler.send_response(status)
        if status == 302:
            handler.send_header("Location", self.redirect_to)
        handler.send_header("Content-Length", "2")
        handler.end_headers()
        handler.wfile.write(b"ok" if status < 300 else b"no")


@contextmanager
def receiving(mode: str = "ok", **options: Any) -> Iterator[WebhookReceiver]:
    """A started receiver for the duration of the block."""
    receiver = WebhookReceiver(mode, **options).start()
    try:
        yield receiver
    finally:
        receiver.stop()


def read_log(path: Path) -> list[Received]:
    """What a receiver run with `log_to` (or as a program) answered, from its log."""
    if not path.exists():
        return []
    received = []
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:  # a line being written
            continue
        received.append(Received("", record["headers"], record["body"].encode(), record["status"]))
    return received


if __name__ == "__main__":  # a receiver in a process of its own (bench/bench_webhooks.py)
    # mode, log file, and optionally a certificate and key to serve HTTPS with
    tls = None
    if len(sys.argv) > 3:
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(sys.argv[3], sys.argv[4])
    receiver = WebhookReceiver(sys.argv[1], log_to=Path(sys.argv[2]), tls=tls).start()
    sys.stdout.write(f"{receiver.port}\n")
    sys.stdout.flush()
    while True:
        time.sleep(3600)
