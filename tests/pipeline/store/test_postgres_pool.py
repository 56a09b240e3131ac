"""The PostgreSQL store's pool while its server is down (`docingest.pipeline.store.postgres_pool`):
the engine says so once per call, and the pool's warning at each reconnection attempt is
dropped; its other warnings pass. A real private server of the test's own, stopped as a crash
would stop it."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from pydantic import SecretStr

from docingest.pipeline.errors import DependencyUnavailable
from docingest.pipeline.settings import Settings
from docingest.pipeline.store import VectorStore
from docingest.pipeline.store.postgres import PostgresEngine
from docingest.pipeline.store.postgres_pool import (
    POOL_LOGGER,
    RECONNECT_MESSAGE,
    RepeatedReconnects,
)
from tests.pipeline.store.test_store import CONFIG
from tests.support.engines import schema_for, stop_postgres, stoppable_postgres
from tests.support.waiting import wait_until


def failed_attempts(store: VectorStore) -> int:
    """The pool's failed connection attempts so far, after one more call that needs it."""
    with pytest.raises(DependencyUnavailable, match="is unreachable"):
        store.ping()
    engine = store.engine
    assert isinstance(engine, PostgresEngine)
    return int(engine._pool.get_stats().get("connections_errors", 0))


def test_a_server_down_is_told_by_the_engine_not_at_each_reconnection(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with stoppable_postgres() as server:
        settings = Settings(
            data_dir=tmp_path,
            database_url=SecretStr(server.get_uri()),
            database_schema=schema_for(tmp_path),
            database_pool_timeout_seconds=1,
        )
        with VectorStore.open(settings) as store:
            store.create_index("kept", CONFIG)
            caplog.set_level(logging.WARNING)
            stop_postgres(server)
            wait_until(
                lambda: failed_attempts(store) >= 3, timeout=120, what="three failed attempts"
            )
            pool_lines = [r.getMessage() for r in caplog.records if r.name == POOL_LOGGER]
            assert not [line for line in pool_lines if line.startswith(RECONNECT_MESSAGE)]


def test_the_pools_other_warnings_pass() -> None:
    def passes(message: str, *args: object) -> bool:
        record = logging.LogRecord(POOL_LOGGER, logging.WARNING, "pool.py", 1, message, args, None)
        return RepeatedReconnects().filter(record)

    assert not passes("error connecting in %r: %s", "docingest-store", "refused")
    assert passes("rolling back returned connection: %s", "<conn>")
    assert passes("reconnection attempt in pool %r failed after %s sec", "docingest-store", 300)
