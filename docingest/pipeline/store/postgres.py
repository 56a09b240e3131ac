"""The PostgreSQL engine: every index a table of a PostgreSQL server with pgvector, shared by
every API and worker process (`DOCINGEST_DATABASE_URL`).

The tables and their versioned layout: `docingest.pipeline.store.postgres_schema`. The store's
filters compile to SQL in `docingest.pipeline.store.postgres_filter`, with Qdrant's semantics,
so the store above (versions, fencing, the per-document cap, fusion) runs unchanged, and the
store's suite runs on this engine as on the two Qdrant ones (tests/pipeline/store/).

- Dense search: `ORDER BY dense <=> query` over the HNSW index (cosine), with pgvector's
  iterative scan (`hnsw.iterative_scan = strict_order`) so a filter that leaves out most of
  the nearest points still fills the page; score = 1 − cosine distance, as Qdrant's.
  Generations still without a graph are shortlisted by their vectors' bits and the shortlist
  ranked exactly (`docingest.pipeline.store.postgres_shortlist`).
- Keyword search: BM25 as on Qdrant, split the same way (`docingest.pipeline.sparse`): the
  chunk's stored weights are the term-frequency part, and the query's terms are weighted by
  their IDF here, computed as Qdrant's `idf` modifier does (ln(1 + (N − n + 0.5) / (n + 0.5)),
  N the points holding a keyword vector, n those holding the term, counted through the GIN
  index on `terms`); the score is the `sparsevec` inner product. Chunks sharing no term with
  the query are not candidates, as on Qdrant.
- Writes: a batch of points is one transaction (a live write is seen whole or not at all): a
  binary `COPY` into the table's open generation, whose HNSW graph is built in bulk once it
  is sealed (`docingest.pipeline.store.postgres_generations`, `postgres_rows`). A publish or
  metadata change is one `UPDATE` (jsonb `||`, Qdrant's set_payload), a retire one `DELETE`:
  each atomic for every reader, whichever process runs it.
- Connections: a `psycopg_pool` pool per process (`database_pool_size`), each connection
  checked before use so a restarted server costs one failed call, not a pool of dead ones.
  Any connection failure, a full pool or a statement timeout is `DependencyUnavailable`
  (a job retries), a missing table `IndexNotFound`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool, PoolTimeout
from qdrant_client import models
from qdrant_client.hybrid.fusion import reciprocal_rank_fusion

from docingest.pipeline import metrics
from docingest.pipeline.errors import DependencyUnavailable, IndexNotFound
from docingest.pipeline.settings import Settings
from docingest.pipeline.store import postgres_terms
from docingest.pipeline.store.engine import store_description
from docingest.pipeline.store.models import IndexConfig
from docingest.pipeline.store.postgres_filter import FilterCompiler, Params, stored
from docingest.pipeline.store.postgres_generations import (
    GraphBuilder,
    seal,
    stop_builders,
    unbuilt,
)
from docingest.pipeline.store.postgres_merges import drop_leftovers
from docingest.pipeline.store.postgres_pool import quiet_reconnects
from docingest.pipeline.store.postgres_rows import record, write_points
from docingest.pipeline.store.postgres_schema import (
    chunk_table,
    create_chunk_table,
    lock,
    prepare,
)
from docingest.pipeline.store.postgres_search import run_query
from docingest.pipeline.store.postgres_shortlist import SearchedTable, searched_table
from docingest.pipeline.store.requests import Point


class PostgresEngine:
    """The `Engine` over one PostgreSQL schema; safe to share by threads."""

    writes_live = True
    """A publish is an UPDATE, which writes every row anew (and its index entries); one live
    write of a small document costs half."""

    def __init__(self, pool: ConnectionPool, *, settings: Settings, builder: GraphBuilder) -> None:
        self._pool = pool
        self.graphs = builder
        self._looked: set[int] = set()  # tables whose unbuilt generations this process sought
        self._settings = settings
        self._schema = settings.database_schema
        self._filters = FilterCompiler(self._schema)
        self._indexes = sql.Identifier(self._schema, "indexes")
        self._ef_search = settings.database_hnsw_ef_search
        self._lock = threading.RLock()
        self.location = store_description(settings)

    @classmethod
    def open(cls, settings: Settings) -> PostgresEngine:
        """Connect, create or migrate the schema, and open the pool; `DependencyUnavailable`
        when the server cannot be reached or lacks pgvector."""
        assert settings.database_url is not None
        url = settings.database_url.get_secret_value()
        where = store_description(settings)
        timeout_ms = int(settings.database_statement_timeout_seconds * 1000)
        options = f"-c statement_timeout={timeout_ms} -c TimeZone=UTC"
        try:
            with psycopg.connect(
                url,
                autocommit=True,
                connect_timeout=max(1, int(settings.database_pool_timeout_seconds)),
                options=options,
            ) as connection:
                prepare(connection, settings.database_schema)
        except psycopg.OperationalError as exc:
            raise DependencyUnavailable(f"{where} is unreachable ({_first_line(exc)}).") from exc

        ef_search = settings.database_hnsw_ef_search

        def configure(connection: psycopg.Connection) -> None:
            register_vector(connection)
            connection.execute("SET hnsw.iterative_scan = strict_order")
            connection.execute(sql.SQL("SET hnsw.ef_search = {}").format(sql.Literal(ef_search)))

        quiet_reconnects()
        pool = ConnectionPool(
            url,
            min_size=1,
            max_size=settings.database_pool_size,
            timeout=settings.database_pool_timeout_seconds,
            kwargs={"autocommit": True, "options": options},
            configure=configure,
            check=ConnectionPool.check_connection,
            open=False,
            name="docingest-store",
        )
        pool.open(wait=False)
        builder = GraphBuilder(
            url,
            settings.database_schema,
            memory_mb=settings.database_build_memory_mb,
            base_rows=settings.database_generation_rows,
            workers=settings.database_build_workers,
        )
        return cls(pool, settings=settings, builder=builder)

    # --- connections --------------------------------------------------------------------

    @contextmanager
    def _connection(self, index: str | None = None) -> Iterator[psycopg.Connection]:
        """A pooled connection; the engine's failures as docingest's errors."""
        where = self.location
        started = time.perf_counter()
        try:
            with self._pool.connection() as connection:
                metrics.STORE_POOL_WAIT_SECONDS.observe(time.perf_counter() - started)
                yield connection
        except psycopg.errors.UndefinedTable as exc:  # dropped while we looked
            raise IndexNotFound(f"Index '{index}' does not exist.") from exc
        except psycopg.errors.QueryCanceled as exc:
            raise DependencyUnavailable(
                f"{where} cancelled a statement after "
                f"{self._settings.database_statement_timeout_seconds:g} s "
                "(DOCINGEST_DATABASE_STATEMENT_TIMEOUT_SECONDS); try again shortly."
            ) from exc
        except PoolTimeout as exc:
            raise DependencyUnavailable(self._pool_timeout_message()) from exc
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            raise DependencyUnavailable(f"{where} is unreachable ({_first_line(exc)}).") from exc

    def _pool_timeout_message(self) -> str:
        """Why no connection came within the pool's timeout: the server, or a full pool
        (one connection attempt tells which)."""
        settings = self._settings
        try:
            with psycopg.connect(
                settings.database_url.get_secret_value() if settings.database_url else "",
                connect_timeout=max(1, int(settings.database_pool_timeout_seconds)),
            ):
                pass
        except psycopg.Error as exc:
            return f"{self.location} is unreachable ({_first_line(exc)})."
        return (
            f"No free connection to {self.location} within "
            f"{settings.database_pool_timeout_seconds:g} s: every one of the "
            f"{settings.database_pool_size} in use (DOCINGEST_DATABASE_POOL_SIZE); try again "
            "shortly."
        )

    @contextmanager
    def _table(self, index: str) -> Iterator[tuple[psycopg.Connection, sql.Identifier]]:
        """A connection and the chunk table of `index`; `IndexNotFound` if there is none."""
        with self._searched_table(index) as (connection, number, _):
            yield connection, chunk_table(self._schema, number)

    @contextmanager
    def _searched_table(self, index: str) -> Iterator[tuple[psycopg.Connection, int, int]]:
        """A connection, the number of the chunk table of `index` and the dimensions of its
        vectors; `IndexNotFound` if there is none."""
        with self._connection(index) as connection:
            number, _, dimensions = self._table_of(connection, index)
            yield connection, number, dimensions

    def _table_of(self, connection: psycopg.Connection, index: str) -> tuple[int, int, int]:
        """The number of the chunk table of `index`, its open generation and its vectors'
        dimensions; `IndexNotFound` if there is none."""
        row = connection.execute(
            sql.SQL(
                "SELECT table_number, generation, "
                "(config -> 'embedding' ->> 'dimensions')::integer FROM {} WHERE name = %s"
            ).format(self._indexes),
            [index],
        ).fetchone()
        if row is None:
            raise IndexNotFound(f"Index '{index}' does not exist.")
        return int(row[0]), int(row[1]), int(row[2] or 0)

    def ping(self) -> None:
        with self._connection() as connection:
            connection.execute("SELECT 1")

    def close(self) -> None:
        self._pool.close()  # a graph build runs on in the server, or is redone by the next

    def locked(self) -> AbstractContextManager[Any]:
        # this process's threads; other processes are kept apart by the database itself
        # (one transaction and an advisory lock per creation or deletion)
        return self._lock

    # --- indexes ------------------------------------------------------------------------

    def list_indexes(self) -> list[str]:
        with self._connection() as connection:
            rows = connection.execute(
                sql.SQL("SELECT name FROM {} ORDER BY name").format(self._indexes)
            ).fetchall()
        return [str(row[0]) for row in rows]

    def create_index(self, index: str, config: IndexConfig) -> None:
        with self._connection(index) as connection, connection.transaction():
            lock(connection)
            exists = connection.execute(
                sql.SQL("SELECT 1 FROM {} WHERE name = %s").format(self._indexes), [index]
            ).fetchone()
            if exists is not None:
                raise FileExistsError(f"index '{index}' exists")
            row = connection.execute(
                sql.SQL(
                    "INSERT INTO {} (name, config) VALUES (%s, %s) RETURNING table_number"
                ).format(self._indexes),
                [index, Jsonb(config.model_dump(mode="json"))],
            ).fetchone()
            assert row is not None
            dimensions = config.embedding.dimensions or 0
            create_chunk_table(connection, self._schema, int(row[0]), dimensions)

    def replace_config(self, index: str, config: IndexConfig) -> None:
        with self._connection(index) as connection:
            updated = connection.execute(
                sql.SQL("UPDATE {} SET config = %s WHERE name = %s").format(self._indexes),
                [Jsonb(config.model_dump(mode="json")), index],
            ).rowcount
        if not updated:
            raise IndexNotFound(f"Index '{index}' does not exist.")

    def index_config(self, index: str) -> IndexConfig | None:
        with self._connection(index) as connection:
            row = connection.execute(
                sql.SQL("SELECT config FROM {} WHERE name = %s").format(self._indexes), [index]
            ).fetchone()
        if row is None:
            raise IndexNotFound(f"Index '{index}' does not exist.")
        return IndexConfig.model_validate(row[0])

    def index_exists(self, index: str) -> bool:
        with self._connection(index) as connection:
            row = connection.execute(
                sql.SQL("SELECT 1 FROM {} WHERE name = %s").format(self._indexes), [index]
            ).fetchone()
        return row is not None

    def delete_index(self, index: str) -> bool:
        with self._connection(index) as connection, connection.transaction():
            lock(connection)
            row = connection.execute(
                sql.SQL("DELETE FROM {} WHERE name = %s RETURNING table_number").format(
                    self._indexes
                ),
                [index],
            ).fetchone()
            if row is None:
                return False
            number = int(row[0])
            stop_builders(connection, self._schema, number)
            drop_leftovers(connection, self._schema, number)  # a merge's unattached copy
            connection.execute(
                sql.SQL("DROP TABLE IF EXISTS {}, {}").format(
                    chunk_table(self._schema, number),
                    postgres_terms.terms_table(self._schema, number),
                )
            )
        return True

    def payload_indexes(self, index: str) -> set[str] | None:
        return None  # the GIN index on the whole payload serves every key

    def create_payload_index(self, index: str, path: str, schema: models.PayloadSchemaType) -> None:
        return None

    # --- points -------------------------------------------------------------------------

    def upsert(self, index: str, points: Sequence[Point]) -> None:
        if not points:
            return
        if bound := self._settings.database_unbuilt_generations:
            self._wait_for_graphs(index, bound)
        with self._connection(index) as connection:
            number, generation, dimensions = self._table_of(connection, index)
            written = write_points(connection, self._schema, number, generation, points)
            limit = self._settings.database_generation_rows
            sealed = written >= limit and seal(
                connection, self._schema, number, rows=limit, generation=generation
            )
        if sealed or number not in self._looked:
            self._looked.add(number)
            self.graphs.kick(number, dimensions)

    def _wait_for_graphs(self, index: str, bound: int) -> None:
        """Wait while `bound` sealed generations of `index` lack their graph (a pooled
        connection for each look, none held between)."""

        def look() -> tuple[int, int, int]:
            with self._connection(index) as connection:
                number, _, dimensions = self._table_of(connection, index)
                return unbuilt(connection, self._schema, number), number, dimensions

        self.graphs.wait_behind(look, bound=bound)

    def set_payload(self, index: str, payload: dict[str, Any], selector: models.Filter) -> None:
        params: Params = [stored(payload)]
        where = self._filters.compile(selector, params)
        with self._table(index) as (connection, table):
            connection.execute(
                sql.SQL("UPDATE {} SET payload = payload || %s WHERE {}").format(table, where),
                params,
            )

    def count(self, index: str, selector: models.Filter) -> int:
        params: Params = []
        where = self._filters.compile(selector, params)
        with self._table(index) as (connection, table):
            row = connection.execute(
                sql.SQL("SELECT count(*) FROM {} WHERE {}").format(table, where), params
            ).fetchone()
        return int(row[0]) if row is not None else 0

    def delete(self, index: str, selector: models.Filter) -> None:
        params: Params = []
        where = self._filters.compile(selector, params)
        with self._searched_table(index) as (connection, number, _):
            postgres_terms.delete_counted(
                connection,
                chunk_table(self._schema, number),
                postgres_terms.terms_table(self._schema, number),
                where,
                params,
            )

    def scroll(
        self,
        index: str,
        selector: models.Filter,
        *,
        limit: int,
        offset: models.ExtendedPointId | None,
        payload: Sequence[str] | None,
        vectors: Sequence[str] | None,
        order_by: str | None = None,
    ) -> tuple[list[models.Record], models.ExtendedPointId | None]:
        wanted = list(vectors or [])
        params: Params = []
        where = self._filters.compile(selector, params)
        columns = sql.SQL("id, payload, dense, terms, weights" if wanted else "id, payload")
        if order_by is not None:
            params.extend([order_by, order_by, limit])
            tail = sql.SQL("AND payload -> %s IS NOT NULL ORDER BY payload -> %s, id LIMIT %s")
        else:
            if offset is not None:
                where = sql.SQL("{} AND id >= %s").format(where)
                params.append(str(offset))
            params.append(limit + 1)
            tail = sql.SQL("ORDER BY id LIMIT %s")
        with self._table(index) as (connection, table):
            statement = sql.SQL("SELECT {} FROM {} WHERE {} {}").format(columns, table, where, tail)
            rows = connection.execute(statement, params).fetchall()
        following = None
        if order_by is None and len(rows) > limit:
            following = str(rows[limit][0])
            rows = rows[:limit]
        return [record(row, payload, wanted) for row in rows], following

    def query_batch(
        self, index: str, requests: Sequence[models.QueryRequest]
    ) -> list[list[models.ScoredPoint]]:
        with self._connection(index) as connection:
            searched = searched_table(connection, self._schema, index)
            return [self._run(connection, searched, request) for request in requests]

    def _run(
        self, connection: psycopg.Connection, searched: SearchedTable, request: models.QueryRequest
    ) -> list[models.ScoredPoint]:
        return run_query(connection, searched, request, self._filters, ef_search=self._ef_search)

    def query_fused(
        self,
        index: str,
        *,
        prefetch: Sequence[models.Prefetch],
        query: models.FusionQuery | models.RrfQuery,
        limit: int,
        with_payload: Sequence[str],
    ) -> list[models.ScoredPoint]:
        """Qdrant's RRF over the prefetches, by qdrant-client's own implementation of it."""
        if isinstance(query, models.RrfQuery):
            k = query.rrf.k
        elif query.fusion == models.Fusion.RRF:
            k = None
        else:
            raise TypeError(f"no Postgres translation for the fusion {query!r}")
        requests = [
            models.QueryRequest(
                query=stage.query,
                using=stage.using,
                limit=stage.limit,
                filter=stage.filter,
                with_payload=list(with_payload),
            )
            for stage in prefetch
        ]
        with self._connection(index) as connection:
            searched = searched_table(connection, self._schema, index)
            lists = [self._run(connection, searched, request) for request in requests]
        return reciprocal_rank_fusion(lists, limit=limit, ranking_constant_k=k)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
