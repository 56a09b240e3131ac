"""Dense search over PostgreSQL generations without a graph (`postgres_shortlist`): the rows'
bits shortlist them, the shortlist is ranked by exact cosine, and a layout-3 schema gains the
bits on start."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql
from pydantic import SecretStr

from docingest.pipeline.embedders.base import EmbeddingConfig
from docingest.pipeline.settings import Settings
from docingest.pipeline.store import IndexConfig, VectorStore
from docingest.pipeline.store.filters import SearchFilter
from docingest.pipeline.store.postgres import PostgresEngine
from docingest.pipeline.store.postgres_filter import FilterCompiler
from docingest.pipeline.store.postgres_schema import SCHEMA_VERSION
from docingest.pipeline.store.postgres_search import run_query
from docingest.pipeline.store.postgres_shortlist import POOL_FLOOR, pool_size, searched_table
from docingest.pipeline.store.requests import candidate_request
from tests.pipeline.store.test_postgres_generations import graphs
from tests.pipeline.store.test_store import CONFIG as STORE_CONFIG
from tests.pipeline.store.test_store import records
from tests.support.engines import postgres_url, schema_for

DIMS = 64
CONFIG = IndexConfig(
    embedding=EmbeddingConfig(provider="local", model="test-model", dimensions=DIMS)
)
CLUSTERS, PER_CLUSTER = 30, 100  # 3,000 rows: more than the shortlist holds


def settings_for(tmp_path: Path, *, generation_rows: int) -> Settings:
    return Settings(
        database_url=SecretStr(postgres_url()),
        database_schema=schema_for(tmp_path),
        data_dir=tmp_path,
        database_generation_rows=generation_rows,
    )


def clustered(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Unit cluster centres, and `PER_CLUSTER` unit vectors near each (cluster-major)."""
    centres = rng.standard_normal((CLUSTERS, DIMS)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    near = np.repeat(centres, PER_CLUSTER, axis=0)
    near += 0.15 * rng.standard_normal(near.shape).astype(np.float32) / np.sqrt(DIMS)
    return centres, near / np.linalg.norm(near, axis=1, keepdims=True)


def load(store: VectorStore, vectors: np.ndarray) -> None:
    """A document per cluster (`d<cluster>`), its chunks carrying the cluster's vectors."""
    store.create_index("docs", CONFIG)
    for cluster in range(CLUSTERS):
        rows = vectors[cluster * PER_CLUSTER : (cluster + 1) * PER_CLUSTER]
        texts = [f"cluster {cluster} chunk {n}" for n in range(PER_CLUSTER)]
        chunks = [
            dataclasses.replace(chunk, dense=vector)
            for chunk, vector in zip(records(f"d{cluster}", 1, texts), rows, strict=True)
        ]
        store.write_chunks("docs", chunks)
        store.publish("docs", f"d{cluster}", 1)


def test_a_search_over_an_unbuilt_generation_returns_the_exact_top_and_true_cosines(
    tmp_path: Path,
) -> None:
    rng = np.random.default_rng(7)
    centres, vectors = clustered(rng)
    settings = settings_for(tmp_path, generation_rows=100_000)  # one open generation
    limit = 20
    assert len(vectors) > pool_size(limit)  # so the bits choose which rows are ranked
    with VectorStore.open(settings) as store:
        load(store, vectors)
        assert graphs(settings.database_schema) == {"chunks_1_g0": False}
        for cluster in (0, 11, 29):
            query = centres[cluster] + 0.05 * rng.standard_normal(DIMS).astype(np.float32)
            hits = store.query_dense("docs", query, limit=limit)
            cosines = vectors @ query / np.linalg.norm(query)
            exact = np.argsort(-cosines)[:limit]
            found = [int(hit.document_id[1:]) * PER_CLUSTER + hit.chunk_index for hit in hits]
            assert found == list(exact)
            # scores are the exact cosines, higher first, never a Hamming distance
            assert np.allclose([hit.score for hit in hits], cosines[exact], atol=1e-5)
        # a filter is applied before the shortlist: another cluster's points, ranked exactly
        query = centres[3]
        hits = store.query_dense(
            "docs", query, limit=5, filter=SearchFilter.parse({"document_id": "d8"})
        )
        cosines = vectors[8 * PER_CLUSTER : 9 * PER_CLUSTER] @ query
        assert [hit.chunk_index for hit in hits] == list(np.argsort(-cosines)[:5])


def test_the_shortlist_holds_every_row_of_a_small_index() -> None:
    assert pool_size(1) == POOL_FLOOR  # an index this small is ranked as an exact scan
    assert pool_size(200) == 200 * 40


def test_a_layout_3_schema_gains_the_bits_of_every_generation(tmp_path: Path) -> None:
    rng = np.random.default_rng(11)
    centres, vectors = clustered(rng)
    settings = settings_for(tmp_path, generation_rows=1_000)
    schema = settings.database_schema
    names = {"s": sql.Identifier(schema), "t": sql.Identifier(schema, "chunks_1")}
    with VectorStore.open(settings) as store:
        load(store, vectors)  # three sealed generations and an open one
        engine = store.engine
        assert isinstance(engine, PostgresEngine)
        engine.graphs.wait(timeout=120)
    with psycopg.connect(postgres_url(), autocommit=True) as connection:
        # layout 3: the same tables without the bits (dropped from the parent and every
        # generation), and its version
        connection.execute(sql.SQL("ALTER TABLE {t} DROP COLUMN dense_bits").format(**names))
        connection.execute(sql.SQL("UPDATE {s}.schema_version SET version = 3").format(**names))
    with VectorStore.open(settings) as store:
        query = centres[5]
        hits = store.query_dense("docs", query, limit=10)
        cosines = vectors @ query
        found = [int(hit.document_id[1:]) * PER_CLUSTER + hit.chunk_index for hit in hits]
        assert found == list(np.argsort(-cosines)[:10])
    with psycopg.connect(postgres_url(), autocommit=True) as connection:
        version = connection.execute(
            sql.SQL("SELECT version FROM {s}.schema_version").format(**names)
        ).fetchone()
        assert version == (SCHEMA_VERSION,) == (4,)
        columns = connection.execute(
            "SELECT c.relname, a.attstorage, a.attgenerated FROM pg_attribute a "
            "JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname LIKE 'chunks_1%%' AND c.relkind IN ('r', 'p') "
            "AND a.attname = 'dense_bits' AND NOT a.attisdropped ORDER BY c.relname",
            [schema],
        ).fetchall()
        assert columns == [(name, "p", "s") for name in ("chunks_1", *sorted(graphs(schema)))]
        wrong = connection.execute(
            sql.SQL(
                "SELECT count(*) FROM {t} WHERE dense_bits IS DISTINCT FROM "
                "binary_quantize(dense)::bit({n})"
            ).format(n=sql.Literal(DIMS), **names)
        ).fetchone()
        assert wrong == (0,)


def test_a_search_whose_built_generation_was_merged_away_looks_again(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, generation_rows=100)
    schema = settings.database_schema
    chunks = records("d1", 1, [f"chunk {n}" for n in range(150)])
    with VectorStore.open(settings) as store:
        store.create_index("docs", STORE_CONFIG)
        store.write_chunks("docs", chunks)  # generation 0 sealed, 1 open
        store.publish("docs", "d1", 1)
        engine = store.engine
        assert isinstance(engine, PostgresEngine)
        engine.graphs.wait(timeout=120)
        query = chunks[7].dense
        expected = [hit.chunk_index for hit in store.query_dense("docs", query, limit=5)]
        with psycopg.connect(postgres_url(), autocommit=True) as connection:
            register_vector(connection)
            looked = searched_table(connection, schema, "docs")
            assert looked.built == (0,)
            # what a search sees when a merge swapped generations after its lookup: a
            # built generation that no longer exists
            stale = dataclasses.replace(looked, built=(0, 5))
            request = candidate_request(query, limit=5, search_filter=None)
            hits = run_query(connection, stale, request, FilterCompiler(schema), ef_search=100)
        assert [hit.payload["chunk_index"] for hit in hits if hit.payload] == expected
        assert expected[0] == 7
