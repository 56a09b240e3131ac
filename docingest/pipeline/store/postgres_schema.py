"""The PostgreSQL store's tables, and the version of their layout.

In the schema `DOCINGEST_DATABASE_SCHEMA` (default `docingest`):

- `schema_version`: one row, the layout's version (`SCHEMA_VERSION`). A process finding an
  older one migrates it (`MIGRATIONS`, each step in the transaction that records it); a newer
  one, written by a later release, is refused with `StoreSchemaTooNew` rather than misread.
- `indexes`: one row per index: its name, its config (`IndexConfig` as JSON) and the number
  of its chunk table. Names live only here, as bound values: a table's name is
  `chunks_<number>`, so no index name is ever part of SQL, and any name fits PostgreSQL's
  63-byte identifiers.
- `chunks_<number>`: an index's points: `id` (the point id), `payload` (jsonb, the same payload
  the Qdrant engines keep), `dense` (`vector(n)`, an HNSW index with cosine distance),
  `terms`/`weights` (the keyword vector as stored: term ids and BM25 weights, `terms` with a GIN
  index to find the chunks holding a query's terms and to count them for IDF), and `keyword`
  (the same vector as pgvector's `sparsevec`, which the keyword score is the inner product
  of). A GIN index (`jsonb_path_ops`) on `payload` serves every equality filter.
- `rfc3339(jsonb)`: a string as a UTC timestamp when it is an RFC 3339 datetime as Qdrant
  parses them (`docingest.pipeline.store.schema.parse_datetime`), else NULL: datetime filters.

Everything is created under one advisory lock, so processes starting together do not race.
"""

from __future__ import annotations

from collections.abc import Callable

import psycopg
from psycopg import sql

from docingest.pipeline.errors import DependencyUnavailable

SCHEMA_VERSION = 1
SPARSE_DIMENSIONS = 1_000_000_000
"""pgvector's most dimensions of a `sparsevec`. Term ids are 31-bit hashes
(`docingest.pipeline.sparse`), so the `keyword` column holds them modulo this (two ids that
fold onto one and occur in the same chunk add up, as a hash collision would); `terms` keeps
them exact, which is what searches match on and exports carry."""
_LOCK_KEY = 0x646F63696E67  # "docing": the advisory lock of schema and index changes


class StoreSchemaTooNew(DependencyUnavailable):
    """The database holds a layout of a later release than this one."""

    code = "store_schema_too_new"


MIGRATIONS: dict[int, Callable[[psycopg.Connection, str], None]] = {}
"""Version n → the step that brings layout n to n + 1 (none yet: version 1 is the first)."""


def lock(connection: psycopg.Connection) -> None:
    """Take the advisory lock of schema and index changes until the transaction ends."""
    connection.execute("SELECT pg_advisory_xact_lock(%s)", [_LOCK_KEY])


def prepare(connection: psycopg.Connection, schema: str) -> None:
    """Create pgvector, the schema and its tables if missing; migrate an older layout; refuse
    a newer one. Runs in one transaction on `connection` (autocommit off or on)."""
    names = {"schema": sql.Identifier(schema)}
    with connection.transaction():
        lock(connection)
        try:
            connection.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.errors.FeatureNotSupported as exc:  # pragma: no cover - server setup
            raise DependencyUnavailable(
                "The PostgreSQL server has no pgvector extension (0.7 or later); install it "
                f"(the pgvector/pgvector image has it): {exc}"
            ) from exc
        except psycopg.errors.UndefinedFile as exc:
            raise DependencyUnavailable(
                "The PostgreSQL server has no pgvector extension (0.7 or later); install it "
                f"(the pgvector/pgvector image has it): {exc}"
            ) from exc
        connection.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {schema}").format(**names))
        connection.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {schema}.schema_version ("
                "one boolean PRIMARY KEY DEFAULT TRUE CHECK (one), version integer NOT NULL)"
            ).format(**names)
        )
        row = connection.execute(
            sql.SQL("SELECT version FROM {schema}.schema_version").format(**names)
        ).fetchone()
        if row is None:
            _create(connection, schema)
            connection.execute(
                sql.SQL("INSERT INTO {schema}.schema_version (version) VALUES (%s)").format(
                    **names
                ),
                [SCHEMA_VERSION],
            )
            return
        version = int(row[0])
        if version > SCHEMA_VERSION:
            raise StoreSchemaTooNew(
                f"The PostgreSQL schema {schema!r} was written by a later docingest release "
                f"(layout version {version}; this release reads up to {SCHEMA_VERSION}). Run "
                "that release, or set DOCINGEST_DATABASE_SCHEMA to another schema."
            )
        while version < SCHEMA_VERSION:
            MIGRATIONS[version](connection, schema)
            version += 1
            connection.execute(
                sql.SQL("UPDATE {schema}.schema_version SET version = %s").format(**names),
                [version],
            )


def _create(connection: psycopg.Connection, schema: str) -> None:
    names = {"schema": sql.Identifier(schema)}
    connection.execute(
        sql.SQL(
            "CREATE TABLE {schema}.indexes ("
            "name text PRIMARY KEY, "
            "table_number bigint GENERATED ALWAYS AS IDENTITY UNIQUE, "
            "config jsonb NOT NULL)"
        ).format(**names)
    )
    # Qdrant reads a datetime without an offset as UTC, and cuts a fraction to microseconds.
    body = sql.SQL(  # not format()ted: its braces are the regex's
        "(value jsonb) RETURNS timestamptz "
        "LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET TimeZone = 'UTC' AS $$ "
        "DECLARE text_value text; "
        "BEGIN "
        "IF jsonb_typeof(value) <> 'string' THEN RETURN NULL; END IF; "
        "text_value := value #>> '{}'; "
        r"IF text_value !~ '^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?"
        r"([Zz]|[+-]\d{2}:\d{2})?)?$' THEN RETURN NULL; END IF; "
        r"RETURN regexp_replace(text_value, '(\.\d{6})\d+', '\1')::timestamptz; "
        "EXCEPTION WHEN others THEN RETURN NULL; "
        "END $$"
    )
    function = sql.Identifier(schema, "rfc3339")
    connection.execute(sql.SQL("CREATE FUNCTION ") + function + body)


VECTOR_HNSW_DIMENSIONS = 2000
"""The most dimensions pgvector's HNSW index takes on `vector`; up to `HALFVEC_HNSW_DIMENSIONS`
the graph is built over half-precision copies (`dense::halfvec(n)`, as Edge builds its graph
over int8 copies), and scores stay exact cosines of the stored float32 vectors."""
HALFVEC_HNSW_DIMENSIONS = 4000


def dense_distance(dimensions: int) -> sql.Composable:
    """The ORDER BY expression (one `%s`: the query vector) that the index's HNSW graph serves."""
    if VECTOR_HNSW_DIMENSIONS < dimensions <= HALFVEC_HNSW_DIMENSIONS:
        return sql.SQL("dense::halfvec({n}) <=> %s::halfvec({n})").format(n=sql.Literal(dimensions))
    return sql.SQL("dense <=> %s")


def chunk_table(schema: str, number: int) -> sql.Identifier:
    return sql.Identifier(schema, f"chunks_{number}")


def create_chunk_table(
    connection: psycopg.Connection, schema: str, number: int, dimensions: int
) -> None:
    """Create index `number`'s chunk table and its indexes (in the caller's transaction)."""
    table = chunk_table(schema, number)
    connection.execute(
        sql.SQL(
            "CREATE TABLE {table} (id uuid PRIMARY KEY, payload jsonb NOT NULL, "
            "dense vector({dimensions}) NOT NULL, keyword sparsevec, terms integer[], "
            "weights real[])"
        ).format(table=table, dimensions=sql.Literal(dimensions))
    )
    if dimensions <= VECTOR_HNSW_DIMENSIONS:
        graph = sql.SQL("CREATE INDEX ON {table} USING hnsw (dense vector_cosine_ops)")
    elif dimensions <= HALFVEC_HNSW_DIMENSIONS:
        graph = sql.SQL(
            "CREATE INDEX ON {table} USING hnsw ((dense::halfvec({n})) halfvec_cosine_ops)"
        )
    else:
        graph = None  # searched by an exact scan
    if graph is not None:
        connection.execute(graph.format(table=table, n=sql.Literal(dimensions)))
    for index in (
        "CREATE INDEX ON {table} USING gin (payload jsonb_path_ops)",
        "CREATE INDEX ON {table} USING gin (terms)",
    ):
        connection.execute(sql.SQL(index).format(table=table))
