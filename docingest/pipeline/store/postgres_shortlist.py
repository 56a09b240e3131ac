"""Dense search on the PostgreSQL engine: the graphs of built generations, and a
binary-quantized shortlist of the others.

A generation waits for its HNSW graph (the open one always, a sealed one until the builder
reaches it: during a long upload the builds fall behind, `postgres_generations`), and an exact
scan of it detoasts every row's vector (6 KB at 1,536 dimensions): the largest server-side
part of a slow search during ingestion (BENCHMARKS.md, "Searches during ingestion: the
tail"). So each row also holds `dense_bits`, pgvector's `binary_quantize(dense)` (one bit a
dimension, inline in the heap; `postgres_schema`), and the generations without a valid graph
are ranked by Hamming distance to the query's bits; the best `pool_size(limit)` of them, only,
are re-ranked by the exact cosine distance. One statement merges them with the walks of the
built generations' graphs, by exact distance: scores stay exact cosines.

The generations with a graph are read from the catalog in the statement that finds the
table; a generation sealed after it is in the shortlist's part (`generation <> ALL` the built
ones), so no row is ever missed, only ranked by its bits; a built one that a merge dropped
meanwhile fails the statement, which is run again (`postgres_search`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import psycopg
from psycopg import sql
from qdrant_client import models

from docingest.pipeline.errors import IndexNotFound
from docingest.pipeline.store import postgres_terms
from docingest.pipeline.store.postgres_filter import FilterCompiler, Params
from docingest.pipeline.store.postgres_schema import (
    HALFVEC_HNSW_DIMENSIONS,
    VECTOR_HNSW_DIMENSIONS,
    chunk_table,
    dense_distance,
    partition_table,
)

POOL_FLOOR = 2000
"""The shortlist's least size. It is also where the exact path is kept: generations without a
graph holding this many rows or fewer are all re-ranked exactly, so small indexes (the store's
congruence suite across engines) rank as an exact scan does. Recall of the bits' top 2,000 of
15,000 rows at 1,536 dimensions: 0.91-0.92 at 10 (BENCHMARKS.md, "Binary-quantized
shortlists")."""
POOL_FACTOR = 40
"""Shortlisted rows per result asked for, above `POOL_FLOOR`."""


def pool_size(limit: int) -> int:
    """How many rows of the generations without a graph are re-ranked exactly."""
    return max(limit * POOL_FACTOR, POOL_FLOOR)


@dataclass(frozen=True)
class SearchedTable:
    """An index's chunk table as a search sees it."""

    index: str
    schema: str
    number: int
    dimensions: int
    built: tuple[int, ...]
    """The generations whose HNSW graph is valid when the search began."""

    @property
    def table(self) -> sql.Identifier:
        return chunk_table(self.schema, self.number)

    @property
    def terms(self) -> sql.Identifier:
        return postgres_terms.terms_table(self.schema, self.number)


def searched_table(connection: psycopg.Connection, schema: str, index: str) -> SearchedTable:
    """`index`'s table, dimensions and built generations, in one statement; `IndexNotFound`."""
    row = connection.execute(
        sql.SQL(
            "SELECT table_number, (config -> 'embedding' ->> 'dimensions')::integer, "
            "ARRAY(SELECT substring(part.relname FROM '_g([0-9]+)$')::integer "
            "FROM pg_inherits JOIN pg_class part ON part.oid = inhrelid "
            "WHERE inhparent = (SELECT parent.oid FROM pg_class parent JOIN pg_namespace "
            "ON pg_namespace.oid = parent.relnamespace WHERE nspname = %s "
            "AND parent.relname = 'chunks_' || table_number) "
            "AND EXISTS (SELECT 1 FROM pg_index JOIN pg_class graph ON graph.oid = indexrelid "
            "JOIN pg_am ON pg_am.oid = graph.relam WHERE indrelid = part.oid "
            "AND amname = 'hnsw' AND indisvalid)) "
            "FROM {} WHERE name = %s"
        ).format(sql.Identifier(schema, "indexes")),
        [schema, index],
    ).fetchone()
    if row is None:
        raise IndexNotFound(f"Index '{index}' does not exist.")
    return SearchedTable(index, schema, int(row[0]), int(row[1] or 0), tuple(sorted(row[2])))


def dense_statement(
    searched: SearchedTable,
    vector: np.ndarray,
    selector: models.Filter | None,
    filters: FilterCompiler,
    *,
    limit: int,
) -> tuple[sql.Composed, Params]:
    """The statement of the `limit` points nearest `vector` among the filtered (`id, payload,
    distance`, the exact cosine distance, nearest first) and its parameters."""
    table, dimensions = searched.table, searched.dimensions
    if dimensions > HALFVEC_HNSW_DIMENSIONS:  # never a graph: the exact scan, as documented
        params: Params = [vector]
        where = filters.compile(selector, params)
        params.append(limit)
        statement = sql.SQL(
            "SELECT id, payload, dense <=> %s AS distance FROM {} WHERE {} "
            "ORDER BY distance LIMIT %s"
        ).format(table, where)
        return statement, params
    # Each built generation through its graph, named as a table: a condition on `generation`
    # would let the planner read the rows through the primary key's btree, (id, generation),
    # and sort them all, which it estimates cheaper than pgvector's walk (BENCHMARKS.md,
    # "Binary-quantized shortlists"). A half-precision graph orders by its own distance; the
    # column stays exact.
    walks: list[sql.Composable] = []
    graph_params: Params = []
    for generation in searched.built:
        graph_params.append(vector)
        where = filters.compile(selector, graph_params)
        order: sql.Composable = sql.SQL("distance")
        if dimensions > VECTOR_HNSW_DIMENSIONS:
            graph_params.append(vector)
            order = dense_distance(dimensions)
        graph_params.append(limit)
        walks.append(
            sql.SQL(
                "(SELECT id, payload, dense <=> %s AS distance FROM {part} WHERE {where} "
                "ORDER BY {order} LIMIT %s)"
            ).format(
                part=partition_table(searched.schema, searched.number, generation),
                where=where,
                order=order,
            )
        )
    # the others by their bits, then the shortlist by exact distance
    short_params: Params = [vector, list(searched.built)]
    short_where = filters.compile(selector, short_params)
    short_params.extend([vector, pool_size(limit), limit])
    shortlist = sql.SQL(
        "(SELECT id, payload, dense <=> %s AS distance FROM (SELECT id, payload, dense "
        "FROM {table} WHERE generation <> ALL(%s::integer[]) AND {where} "
        "ORDER BY dense_bits <~> binary_quantize(%s)::bit({n}) LIMIT %s) shortlist "
        "ORDER BY distance LIMIT %s)"
    ).format(table=table, where=short_where, n=sql.Literal(dimensions))
    statement = sql.SQL(
        "SELECT id, payload, distance FROM ({}) found ORDER BY distance LIMIT %s"
    ).format(sql.SQL(" UNION ALL ").join([*walks, shortlist]))
    return statement, [*graph_params, *short_params, limit]
