"""Search on the PostgreSQL engine: one dense or keyword query over an index's chunk table
(`docingest.pipeline.store.postgres`, whose docstring says how each scores as Qdrant does)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg
from pgvector import SparseVector as PgSparse
from psycopg import sql
from qdrant_client import models

from docingest.pipeline.store import postgres_terms
from docingest.pipeline.store.postgres_filter import FilterCompiler, Params
from docingest.pipeline.store.postgres_schema import SPARSE_DIMENSIONS
from docingest.pipeline.store.postgres_shortlist import (
    SearchedTable,
    dense_statement,
    searched_table,
)
from docingest.pipeline.store.requests import DENSE, KEYWORD

MAX_EF_SEARCH = 1000
"""pgvector's largest `hnsw.ef_search`."""


def run_query(
    connection: psycopg.Connection,
    searched: SearchedTable,
    request: models.QueryRequest,
    filters: FilterCompiler,
    *,
    ef_search: int,
) -> list[models.ScoredPoint]:
    """The points nearest one dense or keyword query among the filtered, best first (scores
    higher-is-better, as Qdrant's)."""
    if request.prefetch is not None or request.offset:
        raise TypeError("no Postgres translation for prefetch or offset in a batch query")
    limit = request.limit or 10
    # The third column is a distance, ordered by its name so that it is computed once a row
    # (written twice, an exact scan detoasted and compared each vector twice: 1.6× the time)
    to_score = _negated
    if request.using == KEYWORD:
        if not isinstance(request.query, models.SparseVector):
            raise TypeError(f"no Postgres translation for the query {request.query!r}")
        weighted = idf_weighted(connection, searched.terms, request.query)
        if weighted is None:
            return []
        params: Params = [weighted, list(request.query.indices)]
        where = filters.compile(request.filter, params)
        params.append(limit)
        statement = sql.SQL(
            "SELECT id, payload, keyword <#> %s AS distance FROM {} "
            "WHERE terms && %s::integer[] AND {} ORDER BY distance, id LIMIT %s"
        ).format(searched.table, where)
        rows = connection.execute(statement, params).fetchall()  # no transaction of its own
    elif request.using == DENSE and isinstance(request.query, list):
        vector = np.asarray(request.query, dtype=np.float32)
        try:
            rows = _dense_rows(connection, searched, vector, request.filter, filters, limit=limit,
                               ef_search=ef_search)  # fmt: skip
        except psycopg.errors.UndefinedTable:  # a merge dropped a generation since the lookup
            searched = searched_table(connection, searched.schema, searched.index)
            rows = _dense_rows(connection, searched, vector, request.filter, filters, limit=limit,
                               ef_search=ef_search)  # fmt: skip
        to_score = _cosine
    else:
        raise TypeError(f"no Postgres translation for the query {request!r}")
    keys = request.with_payload if isinstance(request.with_payload, list) else None
    scored = [(row, to_score(float(row[2]))) for row in rows]
    threshold = request.score_threshold
    return [
        models.ScoredPoint(id=str(row[0]), version=0, score=score, payload=selected(row[1], keys))
        for row, score in scored
        if threshold is None or score >= threshold
    ]


def _dense_rows(
    connection: psycopg.Connection,
    searched: SearchedTable,
    vector: np.ndarray,
    selector: models.Filter | None,
    filters: FilterCompiler,
    *,
    limit: int,
    ef_search: int,
) -> list[Any]:
    statement, params = dense_statement(searched, vector, selector, filters, limit=limit)
    # The transaction, its settings and the query in one round trip (a pipeline): after each
    # round trip the thread waits for the GIL again, behind the worker's Python in `serve`
    # (5 round trips for a hybrid search instead of 10; BENCHMARKS.md, "Searches during
    # ingestion: the tail").
    with connection.pipeline(), connection.transaction():
        # Each built generation has its graph. pgvector's estimate has a graph of 10,000
        # rows visit most of them, and the planner does not count the TOAST reads of an
        # exact scan, so it sorted every generation (410 ms against 90 at 15,000 rows;
        # BENCHMARKS.md, "PostgreSQL store"). Without a sequential scan, it walks the
        # graphs, and the index of a selective filter stays a choice; the generations
        # without a graph are scanned for the shortlist all the same (`postgres_shortlist`).
        connection.execute("SET LOCAL enable_seqscan = off")
        if limit > ef_search:  # HNSW keeps at least `limit`
            wider = sql.Literal(min(limit, MAX_EF_SEARCH))
            connection.execute(sql.SQL("SET LOCAL hnsw.ef_search = {}").format(wider))
        cursor = connection.execute(statement, params)
    return cursor.fetchall()


def _negated(distance: float) -> float:
    return -distance


def _cosine(distance: float) -> float:
    """Qdrant's cosine score of pgvector's cosine distance."""
    return 1 - distance


def idf_weighted(
    connection: psycopg.Connection, terms: sql.Identifier, query: models.SparseVector
) -> PgSparse | None:
    """The query's keyword vector with each weight times its term's IDF (Qdrant's formula,
    over the frequencies `postgres_terms` keeps); None for an index without keyword vectors."""
    points, frequencies = postgres_terms.frequencies(connection, terms, list(query.indices))
    if not points:
        return None
    weights: dict[int, float] = {}
    for term, value, df in zip(query.indices, query.values, frequencies, strict=True):
        idf = math.log((points - df + 0.5) / (df + 0.5) + 1)
        folded = term % SPARSE_DIMENSIONS
        weights[folded] = weights.get(folded, 0.0) + value * idf
    return PgSparse(weights, SPARSE_DIMENSIONS)


def selected(payload: dict[str, Any], keys: Sequence[str] | None) -> dict[str, Any]:
    """`payload` with `keys` only (all of it for None)."""
    if keys is None:
        return payload
    return {key: payload[key] for key in keys if key in payload}
