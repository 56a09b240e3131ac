"""Rows of a PostgreSQL chunk table: points written by binary `COPY`, records read back.

A batch is one transaction: the documents' advisory locks, the points' ids deleted from every
generation (a rewrite of a point replaces it, wherever it is; the primary key is per
generation, so `ON CONFLICT` cannot see another generation's row), a binary `COPY` into the
open generation, the terms of the rows deleted and written counted (`postgres_terms`), and
the count of rows written into it. `COPY` took 3,703 rows/s against
1,429 for `executemany` of `INSERT` (BENCHMARKS.md, "PostgreSQL store").
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg
from pgvector import SparseVector as PgSparse
from psycopg import sql
from qdrant_client import models

from docingest.pipeline.store import postgres_terms
from docingest.pipeline.store.postgres_filter import stored
from docingest.pipeline.store.postgres_schema import SPARSE_DIMENSIONS, partition_table
from docingest.pipeline.store.postgres_search import selected
from docingest.pipeline.store.requests import DENSE, KEYWORD, Point

_COLUMNS = "id, generation, payload, dense, keyword, terms, weights"
_TYPES = ["uuid", "int4", "jsonb", "vector", "sparsevec", "int4[]", "float4[]"]
_LOCK_DOCUMENTS = (
    "SELECT pg_advisory_xact_lock(key) FROM (SELECT DISTINCT "
    "hashtextextended(%s || ':' || document, 0) AS key FROM unnest(%s::text[]) AS document "
    "ORDER BY key) AS keys"
)
"""Writers of one document (an import beside a job) never interleave a delete and a copy,
which could leave a point twice; taken in key order, so two batches never deadlock."""


def documents_scope(schema: str, number: int) -> str:
    """What a document's lock key is hashed under, with its id: the table's schema and
    number, since advisory locks are the database's and table numbers repeat in every
    schema (another deployment's writer of a namesake document would hold this one back)."""
    return f"{schema}.{number}"


def write_points(
    connection: psycopg.Connection,
    schema: str,
    number: int,
    generation: int,
    points: Sequence[Point],
) -> int:
    """Write `points` into generation `generation` of table `number`, replacing any earlier
    row of their ids, in one transaction; return the rows written into that generation
    so far (0 when it was sealed meanwhile)."""
    table = sql.Identifier(schema, f"chunks_{number}")
    terms = postgres_terms.terms_table(schema, number)
    documents = sorted({str(point.payload.get("document_id", "")) for point in points})
    ids = [uuid.UUID(point.id) for point in points]
    with connection.transaction():
        connection.execute(_LOCK_DOCUMENTS, [documents_scope(schema, number), documents])
        postgres_terms.delete_counted(connection, table, terms, sql.SQL("id = ANY(%s)"), [ids])
        copy = sql.SQL("COPY {} ({}) FROM STDIN WITH (FORMAT BINARY)").format(
            partition_table(schema, number, generation), sql.SQL(_COLUMNS)
        )
        with connection.cursor() as cursor, cursor.copy(copy) as rows:
            rows.set_types(_TYPES)
            for point, point_uuid in zip(points, ids, strict=True):
                rows.write_row(_row(point, point_uuid, generation))
        postgres_terms.add_written(connection, terms, (point.sparse.indices for point in points))
        written = connection.execute(
            sql.SQL(
                "UPDATE {} SET generation_rows = generation_rows + %s "
                "WHERE table_number = %s AND generation = %s RETURNING generation_rows"
            ).format(sql.Identifier(schema, "indexes")),
            [len(points), number, generation],
        ).fetchone()
    return int(written[0]) if written is not None else 0


def _row(point: Point, point_uuid: uuid.UUID, generation: int) -> tuple[Any, ...]:
    terms = point.sparse
    if terms.indices:
        folded: dict[int, float] = {}
        for term, value in zip(terms.indices, terms.values, strict=True):
            folded[term % SPARSE_DIMENSIONS] = folded.get(term % SPARSE_DIMENSIONS, 0.0) + value
        keyword: PgSparse | None = PgSparse(folded, SPARSE_DIMENSIONS)
        indices: list[int] | None = list(terms.indices)
        values: list[float] | None = list(terms.values)
    else:
        keyword = indices = values = None
    dense = np.asarray(point.dense, dtype=np.float32)
    return (point_uuid, generation, stored(point.payload), dense, keyword, indices, values)


def record(row: Sequence[Any], keys: Sequence[str] | None, vectors: Sequence[str]) -> models.Record:
    """A row (`id, payload, dense, terms, weights`) as qdrant-client's record."""
    vector: dict[str, Any] | None = None
    if vectors:
        vector = {}
        if DENSE in vectors:
            vector[DENSE] = row[2].to_list()
        if KEYWORD in vectors and row[3] is not None:
            vector[KEYWORD] = models.SparseVector(indices=list(row[3]), values=list(row[4]))
    return models.Record(id=str(row[0]), payload=selected(row[1], keys), vector=vector)
