"""The exact scan of a generation without a graph, against its binary-quantized shortlist.

Run: .venv/bin/python bench/bench_postgres_bits.py [--rows 15000] [--dimensions 1536]
     [--queries 30] [--limit 50] [--pools 200 500 1000 2000]

On the tests' private PostgreSQL with pgvector, a table shaped as a store's generation
(`payload` with a 1,000-character text, `dense` TOASTed, the `state` column, and `dense_bits`,
pgvector's `binary_quantize(dense)` stored inline), filled by binary `COPY` with unit vectors
of two kinds: `random` (Gaussian noise, the fake embedder's, the quantization's worst case)
and `clustered` (200 centres plus noise, as real embeddings cluster); queries of the same
kind. Reports per kind: the heap's pages with and without the bit column, the median time of
the exact top `--limit` (`ORDER BY dense <=> q`), and for each pool size the shortlist's
(`ORDER BY dense_bits <~> binary_quantize(q) LIMIT pool`, re-ranked by `dense <=> q`) median
time and its recall@`--limit` and recall@10 against the exact ranking. With `--graphs`, the
build time of an HNSW graph over `dense` (the store's) and over `dense_bits`
(`bit_hamming_ops`), and the recall@10 of each walk (the second re-ranked exactly).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg.types.json import Jsonb

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from _common import find_corpus, machine  # noqa: E402
from _service_tools import code_version  # noqa: E402

from tests.support.embedding_server import word_vectors  # noqa: E402
from tests.support.engines import postgres_url  # noqa: E402

TEXTS = sorted((find_corpus() / "txt").glob("*.txt"))
TEXT = ("lorem ipsum dolor sit amet " * 40)[:1000]
BATCH = 256
EXACT = "SELECT id FROM {t} WHERE state = 'live' ORDER BY dense <=> %s LIMIT %s"
SHORTLIST = (
    "SELECT id FROM (SELECT id, dense FROM {t} WHERE state = 'live' "
    "ORDER BY dense_bits <~> binary_quantize(%s)::bit({n}) LIMIT %s) pool "
    "ORDER BY dense <=> %s LIMIT %s"
)


def vectors(
    kind: str, count: int, dimensions: int, rng: np.random.Generator, *, words: int = 80
) -> np.ndarray:
    if kind == "words":  # 80-word passages of the sample corpus's texts; queries 6 of their words
        corpus = " ".join(path.read_text(errors="ignore") for path in TEXTS).split()
        starts = rng.integers(0, len(corpus) - words, count)
        texts = [" ".join(corpus[start : start + words]) for start in starts]
        data = word_vectors(texts, dimensions)
    elif kind == "random":
        data = rng.standard_normal((count, dimensions)).astype(np.float32)
    else:  # clustered
        centres = rng.standard_normal((200, dimensions)).astype(np.float32)
        picked = centres[rng.integers(0, 200, count)]
        data = picked + 0.8 * rng.standard_normal((count, dimensions)).astype(np.float32)
    return data / np.linalg.norm(data, axis=1, keepdims=True)


def table(connection: psycopg.Connection, dimensions: int, *, bits: bool) -> str:
    name = "bits_" + uuid.uuid4().hex[:8]
    column = (
        f", dense_bits bit({dimensions}) GENERATED ALWAYS AS "
        f"(binary_quantize(dense)::bit({dimensions})) STORED"
        if bits
        else ""
    )
    connection.execute(
        f"CREATE TABLE {name} (id uuid PRIMARY KEY, payload jsonb NOT NULL, "
        f"dense vector({dimensions}) NOT NULL, "
        f"state text GENERATED ALWAYS AS (payload ->> 'state') STORED{column})"
    )
    if bits:
        connection.execute(f"ALTER TABLE {name} ALTER COLUMN dense_bits SET STORAGE PLAIN")
    return name


def fill(connection: psycopg.Connection, name: str, data: np.ndarray) -> float:
    started = time.perf_counter()
    for start in range(0, len(data), BATCH):
        with connection.transaction(), connection.cursor() as cursor:
            with cursor.copy(f"COPY {name} (id, payload, dense) FROM STDIN (FORMAT BINARY)") as c:
                c.set_types(["uuid", "jsonb", "vector"])
                for n, vector in enumerate(data[start : start + BATCH], start):
                    payload = {"document_id": f"d{n // 300}", "state": "live", "text": TEXT}
                    c.write_row((uuid.uuid4(), Jsonb(payload), vector))
    return len(data) / (time.perf_counter() - started)


def heap_pages(connection: psycopg.Connection, name: str) -> int:
    row = connection.execute(f"SELECT pg_relation_size('{name}') / 8192").fetchone()
    return int(row[0]) if row else 0


def timed(connection: psycopg.Connection, statement: str, params: Sequence[Any]) -> tuple:
    started = time.perf_counter()
    rows = connection.execute(statement, params).fetchall()
    return time.perf_counter() - started, [row[0] for row in rows]


def graphs(
    connection: psycopg.Connection,
    name: str,
    dims: int,
    queries: np.ndarray,
    truth: list[list[Any]],
    *,
    limit: int,
) -> None:
    """Build the generation's graph over `dense` (the store's) and over `dense_bits`
    (`bit_hamming_ops`), each timed (1 GB, one parallel worker, as the builder), and search
    each: the first as the store does, the second for a pool of 1,000 re-ranked exactly."""
    connection.execute("SET maintenance_work_mem = '1GB'")
    connection.execute("SET max_parallel_maintenance_workers = 1")
    walks = {
        "dense vector_cosine_ops": (
            EXACT.format(t=name),
            lambda query: (query, limit),
            "SET hnsw.ef_search = 100",
        ),
        "dense_bits bit_hamming_ops": (
            SHORTLIST.format(t=name, n=dims),
            lambda query: (query, 1000, query, limit),
            "SET hnsw.ef_search = 1000",
        ),
    }
    for column, (statement, params, setting) in walks.items():
        started = time.perf_counter()
        connection.execute(f"CREATE INDEX {name}_graph ON {name} USING hnsw ({column})")
        seconds = time.perf_counter() - started
        connection.execute(f"ANALYZE {name}")
        connection.execute(setting)
        connection.execute("SET enable_seqscan = off")
        spent, recall10 = [], []
        for query, ids in zip(queries, truth, strict=True):
            timed(connection, statement, params(query))
            took, found = timed(connection, statement, params(query))
            spent.append(1000 * took)
            recall10.append(len(set(found[:10]) & set(ids[:10])) / 10)
        connection.execute("RESET enable_seqscan")
        connection.execute(f"DROP INDEX {name}_graph")
        print(
            f"  graph over {column}: built in {seconds:.1f} s, search median "
            f"{np.median(spent):.1f} ms, recall@10 {np.mean(recall10):.3f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=15_000)
    parser.add_argument("--dimensions", type=int, default=1536)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--limit", type=int, default=50)
    parser.add_argument("--pools", type=int, nargs="+", default=[200, 500, 1000, 2000])
    parser.add_argument("--kinds", nargs="+", default=["random", "clustered", "words"])
    parser.add_argument("--graphs", action="store_true", help="also HNSW over dense and bits")
    args = parser.parse_args()
    print(f"bench_postgres_bits: {machine()}; code {code_version()}")
    print(f"load average at start: {os.getloadavg()}")
    rng = np.random.default_rng(0)
    dims, limit = args.dimensions, args.limit
    with psycopg.connect(postgres_url(), autocommit=True) as connection:
        connection.execute("CREATE EXTENSION IF NOT EXISTS vector")
        register_vector(connection)
        for kind in args.kinds:
            data = vectors(kind, args.rows, dims, rng)
            queries = vectors(kind, args.queries, dims, rng, words=6)
            plain = table(connection, dims, bits=False)
            plain_rate = fill(connection, plain, data)
            name = table(connection, dims, bits=True)
            bits_rate = fill(connection, name, data)
            for each in (plain, name):
                connection.execute(f"VACUUM ANALYZE {each}")
            pages = [heap_pages(connection, each) for each in (plain, name)]
            print(
                f"{kind}, {args.rows:,} rows: COPY {plain_rate:,.0f} rows/s without bits, "
                f"{bits_rate:,.0f} with; heap {pages[0]:,} pages without, {pages[1]:,} with"
            )
            exact_ms, truth = [], []
            for query in queries:
                timed(connection, EXACT.format(t=name), (query, limit))  # warm
                seconds, ids = timed(connection, EXACT.format(t=name), (query, limit))
                exact_ms.append(1000 * seconds)
                truth.append(ids)
            print(f"  exact top {limit}: median {np.median(exact_ms):.1f} ms")
            for pool in args.pools:
                spent, recall, recall10 = [], [], []
                statement = SHORTLIST.format(t=name, n=dims)
                for query, ids in zip(queries, truth, strict=True):
                    timed(connection, statement, (query, pool, query, limit))
                    seconds, found = timed(connection, statement, (query, pool, query, limit))
                    spent.append(1000 * seconds)
                    recall.append(len(set(found) & set(ids)) / len(ids))
                    recall10.append(len(set(found[:10]) & set(ids[:10])) / 10)
                print(
                    f"  pool {pool:>5}: median {np.median(spent):.1f} ms, recall@{limit} "
                    f"{np.mean(recall):.3f} (min {min(recall):.2f}), recall@10 "
                    f"{np.mean(recall10):.3f}"
                )
            if args.graphs:
                graphs(connection, name, dims, queries, truth, limit=limit)
            for each in (plain, name):
                connection.execute(f"DROP TABLE {each}")
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
