"""Merges of a PostgreSQL chunk table's sealed generations, so that there are few of them.

A dense search walks each sealed generation's HNSW graph and merges the results: at 100,000
chunks in 20 generations of 5,000 that was most of an idle search (BENCHMARKS.md,
"Generations: the graph built in bulk"). So the graph builder (`postgres_generations`), after
its builds, merges generations of similar size, `FACTOR` at a time, which keeps their number
logarithmic in the table's size (a tiered merge, as log-structured stores compact):

1. `copy`: the sources' rows, under one snapshot, into a table of its own (`chunks_<n>_m<k>`,
   k the lowest source, every row given generation k), not attached, so no search sees it,
   and each row's id and version (`xmin`) beside it; then its key, indexes and HNSW graph,
   built off the write path like a sealed generation's.
2. `swap`, one transaction: the parent locked (searches and writers wait for it, so none
   sees both or neither), the copy reconciled with what the sources hold now (a row
   deleted, rewritten, published or written since the copy has another version or none: its
   copy is dropped and its source row, if any, copied again), the sources dropped, and the
   copy renamed to generation k and attached.

A crash before the swap's commit leaves the sources in place and an unattached copy, which
the next merge drops first; the swap itself is atomic. Term counts (`postgres_terms`) do not
change: the rows are the same.
"""

from __future__ import annotations

import logging
import math
import time

import psycopg
from psycopg import sql

from docingest.pipeline.store.postgres_schema import (
    SECONDARY_INDEXES,
    chunk_table,
    graph_name,
    graph_statement,
    partition_table,
)

log = logging.getLogger(__name__)

FACTOR = 4
"""How many generations of one size merge into one: at 5,000 rows a generation, 100,000 rows
are kept in at most about 3 × log4(20) + 1 generations rather than 20."""
_COLUMNS_SQL = sql.SQL("id, payload, dense, keyword, terms, weights")  # not generation, generated
_SWAP_LOCK_TIMEOUT = "500ms"  # searches queue behind the waiting swap: give way soon, try again
_SWAP_ATTEMPTS = 5


def merge_all(
    connection: psycopg.Connection, schema: str, number: int, dimensions: int, *, base_rows: int
) -> None:
    """Merge table `number`'s sealed, built generations until no `FACTOR` of them are of one
    size (on the builder's autocommit connection, under its lock)."""
    drop_leftovers(connection, schema, number)
    while sources := choose(connection, schema, number, base_rows=base_rows):
        started = time.monotonic()
        copy(connection, schema, number, sources, dimensions)
        for _ in range(_SWAP_ATTEMPTS):
            if swap(connection, schema, number, sources):
                break
            time.sleep(1.0)
        else:
            return  # the table stayed busy: the next round of the builder starts again
        log.info(
            "merged generations %s of chunks_%s in %.1f s",
            sources,
            number,
            time.monotonic() - started,
        )


def sealed_generations(
    connection: psycopg.Connection, schema: str, number: int
) -> dict[int, tuple[float, bool]]:
    """Each attached generation below the open one → (its estimated rows, whether its HNSW
    graph is valid)."""
    row = connection.execute(
        sql.SQL("SELECT generation FROM {} WHERE table_number = %s").format(
            sql.Identifier(schema, "indexes")
        ),
        [number],
    ).fetchone()
    if row is None:
        return {}
    found = connection.execute(
        "SELECT substring(part.relname FROM '_g([0-9]+)$')::integer, part.reltuples, "
        "EXISTS (SELECT 1 FROM pg_index JOIN pg_class graph ON graph.oid = indexrelid "
        "JOIN pg_am ON pg_am.oid = graph.relam WHERE indrelid = part.oid "
        "AND amname = 'hnsw' AND indisvalid) "
        "FROM pg_inherits JOIN pg_class part ON part.oid = inhrelid "
        "WHERE inhparent = %s::regclass",
        [chunk_table(schema, number).as_string(connection)],
    ).fetchall()
    return {
        int(generation): (max(float(rows), 0.0), bool(built))
        for generation, rows, built in found
        if int(generation) < int(row[0])
    }


def choose(
    connection: psycopg.Connection, schema: str, number: int, *, base_rows: int
) -> list[int]:
    """The oldest `FACTOR` generations of the smallest size that has as many, all built;
    none while a sealed generation still lacks its graph."""
    sealed = sealed_generations(connection, schema, number)
    if not all(built for _, built in sealed.values()):
        return []
    levels: dict[int, list[int]] = {}
    for generation in sorted(sealed):
        size = max(sealed[generation][0], 1.0) / base_rows
        level = max(0, round(math.log(size, FACTOR))) if size > 1 else 0
        levels.setdefault(level, []).append(generation)
    for level in sorted(levels):
        if len(levels[level]) >= FACTOR:
            return levels[level][:FACTOR]
    return []


def _seen_table(schema: str, number: int, lowest: int) -> sql.Identifier:
    """The copied rows' ids and versions (`xmin`), which the swap compares the sources with."""
    return sql.Identifier(schema, f"chunks_{number}_m{lowest}_rows")


def drop_leftovers(connection: psycopg.Connection, schema: str, number: int) -> None:
    """Drop the copies of merges that a crash stopped before their swap."""
    rows = connection.execute(
        "SELECT relname FROM pg_class JOIN pg_namespace ON pg_namespace.oid = relnamespace "
        "WHERE nspname = %s AND relkind = 'r' AND relname ~ %s",
        [schema, f"^chunks_{number}_m[0-9]+(_rows)?$"],
    ).fetchall()
    for (name,) in rows:
        connection.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(schema, str(name))))


def copy(
    connection: psycopg.Connection,
    schema: str,
    number: int,
    sources: list[int],
    dimensions: int,
) -> None:
    """Fill the unattached copy of `sources` and build its indexes and graph."""
    lowest = sources[0]
    parent = chunk_table(schema, number)
    target = partition_table(schema, number, lowest, merged=True)
    connection.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(target))
    connection.execute(
        sql.SQL(
            "CREATE TABLE {target} (LIKE {parent} INCLUDING DEFAULTS INCLUDING GENERATED "
            "INCLUDING STORAGE, CHECK (generation = {lowest}))"  # the attach then scans nothing
        ).format(target=target, parent=parent, lowest=sql.Literal(lowest))
    )
    seen = _seen_table(schema, number, lowest)
    with connection.transaction():  # one snapshot: the rows copied and their versions
        connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        connection.execute(
            sql.SQL(
                "INSERT INTO {target} (generation, {columns}) SELECT {lowest}, {columns} "
                "FROM {parent} WHERE generation = ANY(%s)"
            ).format(
                target=target, parent=parent, lowest=sql.Literal(lowest), columns=_COLUMNS_SQL
            ),
            [sources],
        )
        connection.execute(
            sql.SQL(
                "CREATE TABLE {seen} AS SELECT id, xmin::text::bigint AS version FROM {parent} "
                "WHERE generation = ANY(%s)"
            ).format(seen=seen, parent=parent),
            [sources],
        )
    connection.execute(sql.SQL("ANALYZE {}").format(seen))
    connection.execute(sql.SQL("ALTER TABLE {} ADD PRIMARY KEY (id, generation)").format(target))
    for index in SECONDARY_INDEXES:  # the parent's, which the attach then adopts
        connection.execute(sql.SQL(index).format(table=target))
    statement = graph_statement(schema, number, lowest, dimensions, merged=True)
    if statement is not None:
        connection.execute(statement)
    connection.execute(sql.SQL("ANALYZE {}").format(target))


def swap(connection: psycopg.Connection, schema: str, number: int, sources: list[int]) -> bool:
    """Put the copy in the sources' place, in one transaction; False when the table stayed
    locked past `_SWAP_LOCK_TIMEOUT` (nothing changed then)."""
    lowest = sources[0]
    parent = chunk_table(schema, number)
    target = partition_table(schema, number, lowest, merged=True)
    seen = _seen_table(schema, number, lowest)
    names = {"parent": parent, "target": target, "seen": seen, "columns": _COLUMNS_SQL}
    try:
        with connection.transaction():
            connection.execute(
                sql.SQL("SET LOCAL lock_timeout = {}").format(sql.Literal(_SWAP_LOCK_TIMEOUT))
            )
            connection.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(parent))
            # A row updated, deleted or written since the copy has another version (xmin)
            # than the copy recorded, or none: compared on narrow columns, not payloads
            # (2.7 s against about 0.1 s at 80,000 rows; BENCHMARKS.md, "Generations: the
            # graph built in bulk"), as the table is locked meanwhile.
            changed = [
                row[0]
                for row in connection.execute(
                    sql.SQL(
                        "SELECT id FROM {parent} source WHERE generation = ANY(%s) AND NOT "
                        "EXISTS (SELECT 1 FROM {seen} seen WHERE seen.id = source.id AND "
                        "seen.version = source.xmin::text::bigint) UNION ALL SELECT id FROM "
                        "{seen} seen WHERE NOT EXISTS (SELECT 1 FROM {parent} source WHERE "
                        "source.generation = ANY(%s) AND source.id = seen.id)"
                    ).format(**names),
                    [sources, sources],
                ).fetchall()
            ]
            if changed:
                connection.execute(
                    sql.SQL("DELETE FROM {} WHERE id = ANY(%s)").format(target), [changed]
                )
                connection.execute(
                    sql.SQL(
                        "INSERT INTO {target} (generation, {columns}) SELECT {lowest}, "
                        "{columns} FROM {parent} WHERE generation = ANY(%s) AND id = ANY(%s)"
                    ).format(lowest=sql.Literal(lowest), **names),
                    [sources, changed],
                )
            connection.execute(sql.SQL("DROP TABLE {}").format(seen))
            for generation in sources:
                connection.execute(
                    sql.SQL("DROP TABLE {}").format(partition_table(schema, number, generation))
                )
            connection.execute(
                sql.SQL("ALTER TABLE {} RENAME TO {}").format(
                    target, sql.Identifier(f"chunks_{number}_g{lowest}")
                )
            )
            connection.execute(
                sql.SQL("ALTER INDEX IF EXISTS {} RENAME TO {}").format(
                    sql.Identifier(schema, graph_name(number, lowest, merged=True)),
                    sql.Identifier(graph_name(number, lowest)),
                )
            )
            connection.execute(
                sql.SQL("ALTER TABLE {} ATTACH PARTITION {} FOR VALUES IN ({})").format(
                    parent, partition_table(schema, number, lowest), sql.Literal(lowest)
                )
            )
    except psycopg.errors.LockNotAvailable:
        log.info("chunks_%s stayed busy; its merge waits for the next round", number)
        return False
    return True
