"""Per-term document frequencies of a PostgreSQL chunk table, kept beside it for keyword IDF.

Qdrant's IDF needs, per query term, how many points hold it, and how many points have a
keyword vector. Counted on each query, that read every row holding a common term (a
bitmap scan of the GIN index and its heap pages) and every row for the total: most of an idle
keyword search at 100,000 chunks (BENCHMARKS.md, "Generations: the graph built in bulk").

So `terms_<n>` holds deltas `(term, documents)`: each transaction that writes or deletes rows
of `chunks_<n>` appends, in that same transaction, +1 or -1 per distinct term of each row, and
the same under `TOTAL` for each row with a keyword vector. A term's frequency is the sum of
its rows, exact in any snapshot (the deltas commit with the rows they count). Appending takes
no row lock, so writers do not queue on common terms, as an `UPDATE` of one counter per term
would have them do. The graph builder folds a term's rows into one after each seal
(`compact`), so a term has about one row per batch written since the last seal.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import psycopg
from psycopg import sql

TOTAL = -1
"""The row counting the points with a keyword vector: term ids are 31-bit non-negative
hashes (`docingest.pipeline.sparse.term_index`), so no term is negative."""


def terms_table(schema: str, number: int) -> sql.Identifier:
    return sql.Identifier(schema, f"terms_{number}")


def create(connection: psycopg.Connection, schema: str, number: int) -> None:
    """Create table `number`'s term table and count the rows it already has (in the caller's
    transaction; a migrated layout's tables have rows)."""
    table = terms_table(schema, number)
    connection.execute(
        sql.SQL("CREATE TABLE {} (term integer NOT NULL, documents bigint NOT NULL)").format(table)
    )
    connection.execute(sql.SQL("CREATE INDEX ON {} (term) INCLUDE (documents)").format(table))
    chunks = sql.Identifier(schema, f"chunks_{number}")
    connection.execute(
        sql.SQL("INSERT INTO {} (term, documents) {}").format(
            table, _counted(sql.SQL("SELECT terms FROM {}").format(chunks), sign=1)
        )
    )


def _counted(rows: sql.Composable, *, sign: int) -> sql.Composed:
    """A SELECT of `(term, ±count)` over `rows` (a statement yielding `terms`), each row's
    distinct terms counted once, as a GIN containment counts them."""
    return sql.SQL(
        "SELECT term, {sign} * count(*) FROM ({rows}) AS counted, "
        "LATERAL (SELECT DISTINCT unnest(counted.terms)) AS distinct_terms(term) GROUP BY term "
        "UNION ALL SELECT {total}, {sign} * count(*) FROM ({rows}) AS counted "
        "WHERE terms IS NOT NULL HAVING count(*) > 0"
    ).format(sign=sql.Literal(sign), rows=rows, total=sql.Literal(TOTAL))


def delete_counted(
    connection: psycopg.Connection,
    chunks: sql.Identifier,
    terms: sql.Identifier,
    where: sql.Composable,
    params: Sequence[object],
) -> None:
    """`DELETE FROM chunks WHERE where`, taking the deleted rows' terms off the counts in
    `terms` (their term table) in the same statement."""
    statement = sql.SQL(
        "WITH gone AS (DELETE FROM {chunks} WHERE {where} RETURNING terms) "
        "INSERT INTO {table} (term, documents) {counted}"
    ).format(
        chunks=chunks,
        where=where,
        table=terms,
        counted=_counted(sql.SQL("SELECT terms FROM gone"), sign=-1),
    )
    connection.execute(statement, list(params))


def add_written(
    connection: psycopg.Connection, terms: sql.Identifier, written: Iterable[Sequence[int]]
) -> None:
    """Count in the term table `terms` the terms of rows just written (each row's ids)."""
    counts: Counter[int] = Counter()
    for ids in written:
        if ids:
            counts.update(set(ids))
            counts[TOTAL] += 1
    if not counts:
        return
    connection.execute(
        sql.SQL(
            "INSERT INTO {} (term, documents) SELECT * FROM unnest(%s::integer[], %s::bigint[])"
        ).format(terms),
        [list(counts), list(counts.values())],
    )


def frequencies(
    connection: psycopg.Connection, table: sql.Identifier, terms: Sequence[int]
) -> tuple[int, list[int]]:
    """From the term table `table`: the points with a keyword vector, and how many hold each
    of `terms`."""
    rows = connection.execute(
        sql.SQL(
            "SELECT term, sum(documents) FROM {} WHERE term = ANY(%s::integer[]) GROUP BY term"
        ).format(table),
        [[TOTAL, *terms]],
    ).fetchall()
    found = {int(term): int(count) for term, count in rows}
    return found.get(TOTAL, 0), [found.get(term, 0) for term in terms]


def compact(connection: psycopg.Connection, schema: str, number: int) -> None:
    """Fold each term's rows into one (dropping terms no row holds any more). Safe beside
    writers and another compaction: it takes only the rows its snapshot sees, and a row
    another compaction deleted first is neither deleted nor summed again."""
    table = terms_table(schema, number)
    connection.execute(
        sql.SQL(
            "WITH folded AS (SELECT term FROM {table} GROUP BY term HAVING count(*) > 1 "
            "OR sum(documents) = 0), "
            "gone AS (DELETE FROM {table} WHERE term IN (SELECT term FROM folded) "
            "RETURNING term, documents) "
            "INSERT INTO {table} (term, documents) SELECT term, sum(documents) FROM gone "
            "GROUP BY term HAVING sum(documents) <> 0"
        ).format(table=table)
    )
