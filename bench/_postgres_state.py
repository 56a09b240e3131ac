"""What a benchmark reads of a PostgreSQL store's state from the server itself: the rows of
each generation of an index's table, and the graph builds and builders at work. Each look
opens one connection (`connect`) from the store's settings; on Edge there is none."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import psycopg
from psycopg import sql

from docingest.pipeline.store.postgres_generations import build_key


@contextmanager
def connect(store: Mapping[str, str]) -> Iterator[psycopg.Connection | None]:
    """A connection to the server of `store`'s settings (None for a store that is not one)."""
    url = store.get("DOCINGEST_DATABASE_URL")
    if not url:
        yield None
        return
    with psycopg.connect(url) as connection:
        yield connection


def generations(store: Mapping[str, str]) -> str:
    """The rows of each generation (partition) of the index's table on PostgreSQL, once
    settled: what an idle search walks ("" for Edge)."""
    with connect(store) as connection:
        if connection is None:
            return ""
        schema = store["DOCINGEST_DATABASE_SCHEMA"]
        parts = connection.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "JOIN pg_class p ON p.oid = i.inhparent JOIN pg_namespace n ON n.oid = p.relnamespace "
            "WHERE n.nspname = %s AND c.relkind = 'r' ORDER BY c.relname",
            [schema],
        ).fetchall()
        rows = [
            connection.execute(
                sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(schema, name))
            ).fetchone()
            for (name,) in parts
        ]
    return "generations of " + " + ".join(f"{int(row[0]) if row else 0:,}" for row in rows)


def graph_builds(store: Mapping[str, str]) -> int:
    """Index builds under way on the PostgreSQL server of `store`, and graph builders at work
    (each holds its session lock through its builds, term folding and merges; 0 for Edge)."""
    with connect(store) as connection:
        if connection is None:
            return 0
        # The baseline tree's builders may take the key used before it was one per schema.
        keys = [build_key(store["DOCINGEST_DATABASE_SCHEMA"]) & 0xFFFFFFFF, 0x67726166]
        row = connection.execute(
            "SELECT (SELECT count(*) FROM pg_stat_progress_create_index) + (SELECT count(*) "
            "FROM pg_locks WHERE locktype = 'advisory' AND classid::bigint = ANY(%s) "
            "AND objsubid = 2 AND granted)",
            [keys],
        ).fetchone()
    return int(row[0]) if row else 0
