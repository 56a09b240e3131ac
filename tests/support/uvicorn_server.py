"""Run an ASGI app under real uvicorn on a free port, in a background thread, for tests."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn


@contextmanager
def serve_app(
    app: Any, *, host: str = "127.0.0.1", start_timeout: float = 120.0, **config: Any
) -> Iterator[str]:
    """Serve `app` with uvicorn until the block ends; yield its base URL (`http://host:port`).

    The socket is bound before uvicorn starts, so the port cannot be taken in between.
    `config` goes to `uvicorn.Config` (e.g. `lifespan="on"`, `timeout_graceful_shutdown=`).
    On exit the server stops gracefully (open requests finish, then the lifespan shuts down)
    and the thread is joined; a server that does not stop in time fails the test.
    """
    config.setdefault("log_level", "warning")
    config.setdefault("access_log", False)
    config.setdefault("timeout_graceful_shutdown", 5)
    server = uvicorn.Server(uvicorn.Config(app, **config))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    port = sock.getsockname()[1]
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name=f"uvicorn:{port}", daemon=True
    )
    thread.start()
    try:
        deadline = time.monotonic() + start_timeout
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("uvicorn stopped during start-up (see the log above)")
            if time.monotonic() > deadline:
                raise RuntimeError(f"uvicorn did not start within {start_timeout} s")
            time.sleep(0.01)
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=float(config["timeout_graceful_shutdown"]) + 5)
        sock.close()
        if thread.is_alive():
            server.force_exit = True
            thread.join(timeout=5)
            raise RuntimeError("uvicorn did not shut down in time")
