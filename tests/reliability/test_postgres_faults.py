"""The PostgreSQL store when things go wrong: the server down at start and mid-run (calls fail
as `dependency_unavailable`, which a job retries, `/readyz` says why, and the same process
carries on once the server is back), a pool with no free connection, a statement past its
timeout, hostile payload keys (quotes, SQL, NUL) and NUL characters in values.

Each fault runs on a server of its own (stopping the shared one would fail other tests)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
import pytest
from psycopg import sql
from pydantic import SecretStr
from qdrant_client import models

from docingest.pipeline.errors import DependencyUnavailable, TransientError
from docingest.pipeline.services import Services
from docingest.pipeline.settings import Settings
from docingest.pipeline.store import SearchFilter, VectorStore
from docingest.pipeline.store.filters import metadata_path
from docingest.pipeline.store.postgres import PostgresEngine
from docingest.pipeline.store.postgres_schema import SCHEMA_VERSION, StoreSchemaTooNew
from docingest.pipeline.store.requests import fields_filter, point_of
from docingest.workers.app import create_celery_app
from tests.pipeline.store.test_store import CONFIG, records, stored
from tests.support.api_app import api_client
from tests.support.embedding_server import FakeEmbeddingServer
from tests.support.engines import postgres_url, schema_for, stop_postgres, stoppable_postgres
from tests.support.redis_db import TestRedis
from tests.support.settings import service_settings
from tests.support.waiting import wait_until

if TYPE_CHECKING:
    from pgserver import PostgresServer


@pytest.fixture
def own_server() -> Iterator[PostgresServer]:
    with stoppable_postgres() as server:
        yield server


def settings_for(url: str, tmp_path: Path, **more: Any) -> Settings:
    return Settings(
        database_url=SecretStr(url),
        database_schema=schema_for(tmp_path),
        data_dir=tmp_path,
        **more,
    )


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # nothing listens once the socket is closed


def test_an_unreachable_server_is_dependency_unavailable_and_readyz_says_why(
    tmp_path: Path, redis_db: TestRedis, embedding_server: FakeEmbeddingServer
) -> None:
    url = f"postgresql://docingest:secret@127.0.0.1:{closed_port()}/docingest"
    with pytest.raises(DependencyUnavailable, match="is unreachable") as raised:
        VectorStore.open(settings_for(url, tmp_path, database_pool_timeout_seconds=2))
    assert "secret" not in raised.value.message
    assert isinstance(raised.value, TransientError)  # a job meeting it waits and retries

    settings = service_settings(
        tmp_path, redis_db.prefix, embedding_server, qdrant_url=None, database_url=url,
        database_schema=schema_for(tmp_path), database_pool_timeout_seconds=2,
    )  # fmt: skip
    services = Services(settings, owns_store=False)
    assert services.owns_store  # a shared store: every process opens it
    try:
        with api_client(settings, services=services, celery=create_celery_app(settings)) as http:
            response = http.get("/readyz")
    finally:
        services.close()
    assert response.status_code == 503, response.text
    body = response.json()
    assert body["checks"]["postgres"].startswith("unavailable: PostgreSQL at "), body
    assert "is unreachable" in body["checks"]["postgres"]
    assert "secret" not in response.text and body["store"].startswith("PostgreSQL at ")


def test_a_server_down_mid_run_fails_calls_and_the_process_carries_on_after(
    own_server: PostgresServer, tmp_path: Path
) -> None:
    settings = settings_for(own_server.get_uri(), tmp_path, database_pool_timeout_seconds=3)
    with VectorStore.open(settings) as store:
        store.create_index("docs", CONFIG)
        stored(store, "docs", "d1", 1, ["one", "two"])
        stop_postgres(own_server)
        with pytest.raises(DependencyUnavailable, match="is unreachable"):
            store.count_points("docs")
        with pytest.raises(DependencyUnavailable):
            store.write_chunks("docs", records("d2", 1, ["three"]))
        own_server.ensure_postgres_running()
        # the pool's dead connections are found out and replaced, not handed out; it
        # reconnects after a backoff, so the first calls may still fail
        assert wait_until(lambda: answers(store), timeout=120, what="the pool back", poll=0.5) == 2
        stored(store, "docs", "d2", 1, ["three"])
        assert [d.document_id for d in store.list_documents("docs")] == ["d1", "d2"]


def test_a_pool_without_a_free_connection_is_dependency_unavailable(tmp_path: Path) -> None:
    settings = settings_for(
        postgres_url(), tmp_path, database_pool_size=1, database_pool_timeout_seconds=0.5
    )
    with VectorStore.open(settings) as store:
        store.create_index("docs", CONFIG)
        engine = store.engine
        assert isinstance(engine, PostgresEngine)
        with engine._pool.connection():  # the only connection, held elsewhere
            with pytest.raises(DependencyUnavailable, match="every one of the 1 in use"):
                store.count_points("docs")
        assert store.count_points("docs") == 0  # free again


def test_a_statement_past_its_timeout_is_dependency_unavailable(tmp_path: Path) -> None:
    settings = settings_for(postgres_url(), tmp_path, database_statement_timeout_seconds=0.3)
    with VectorStore.open(settings) as store:
        store.create_index("docs", CONFIG)
        stored(store, "docs", "d1", 1, ["one"])
        with psycopg.connect(postgres_url()) as blocker:  # a transaction holding the table
            number = blocker.execute(
                sql.SQL("SELECT table_number FROM {} WHERE name = 'docs'").format(
                    sql.Identifier(settings.database_schema, "indexes")
                )
            ).fetchone()
            assert number is not None
            table = sql.Identifier(settings.database_schema, f"chunks_{number[0]}")
            blocker.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(table))
            with pytest.raises(DependencyUnavailable, match="cancelled a statement"):
                store.count_points("docs")
        assert store.count_points("docs") == 1


def answers(store: VectorStore) -> int | None:
    try:
        return store.count_points("docs")
    except DependencyUnavailable:
        return None


HOSTILE_KEYS = ["it's", 'say "hi"', "x'); DROP TABLE docingest.indexes; --", "nul\x00key"]


def test_hostile_payload_keys_and_nul_characters_are_data_never_sql(tmp_path: Path) -> None:
    """What an import file or a future field may carry, below the API's checks: keys with
    quotes, SQL and NUL, and NUL in values. They stay bound values; NUL is dropped (PostgreSQL
    cannot store it) alike from stored values and from filters, which then still match."""
    with VectorStore.open(settings_for(postgres_url(), tmp_path)) as store:
        store.create_index("docs", CONFIG)
        metadata: dict[str, object] = {
            key: f"value of {n}\x00!" for n, key in enumerate(HOSTILE_KEYS)
        }
        chunks = records("d1", 1, ["text with a \x00 NUL"], metadata=metadata)
        store.write_points("docs", [point_of("docs", chunk) for chunk in chunks])
        store.publish("docs", "d1", 1)
        document = store.get_document("docs", "d1")
        assert document.metadata == {
            key.replace("\x00", ""): f"value of {n}!" for n, key in enumerate(HOSTILE_KEYS)
        }
        for n, key in enumerate(HOSTILE_KEYS):
            match = models.FieldCondition(
                key=metadata_path(key), match=models.MatchValue(value=f"value of {n}\x00!")
            )
            assert store.engine.count("docs", models.Filter(must=[match])) == 1, key
        assert store.engine.count("docs", fields_filter(state="live")) == 1
        wanted = SearchFilter.parse({"$not": {"document_id": "d2"}})
        assert [d.document_id for d in store.list_documents("docs", filter=wanted)] == ["d1"]
        assert [i.name for i in store.list_indexes()] == ["docs"]  # the registry is intact


def test_a_schema_written_by_a_later_release_is_refused_and_left_alone(tmp_path: Path) -> None:
    settings = settings_for(postgres_url(), tmp_path)
    with VectorStore.open(settings) as store:
        store.create_index("docs", CONFIG)
    version = sql.Identifier(settings.database_schema, "schema_version")
    with psycopg.connect(postgres_url(), autocommit=True) as connection:
        connection.execute(
            sql.SQL("UPDATE {} SET version = %s").format(version), [SCHEMA_VERSION + 1]
        )
    with pytest.raises(StoreSchemaTooNew, match="written by a later docingest release") as raised:
        VectorStore.open(settings)
    assert raised.value.code == "store_schema_too_new"
    with psycopg.connect(postgres_url(), autocommit=True) as connection:
        row = connection.execute(sql.SQL("SELECT version FROM {}").format(version)).fetchone()
        assert row == (SCHEMA_VERSION + 1,)  # not rewritten
        connection.execute(sql.SQL("UPDATE {} SET version = %s").format(version), [SCHEMA_VERSION])
    with VectorStore.open(settings) as store:  # this release's layout opens as before
        assert [index.name for index in store.list_indexes()] == ["docs"]
