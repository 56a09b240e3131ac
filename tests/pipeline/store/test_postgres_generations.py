"""The PostgreSQL store's generations (`docingest.pipeline.store.postgres_generations`): rows
written into an open generation without a graph, sealed generations given their HNSW index in
the background, a killed build redone, a rewrite replacing a point wherever it lives, and a
layout-1 table migrated into generation 0 with its data and graph, writers held back
while too many sealed generations wait for their graph, and builders and document writers
apart per schema."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import numpy as np
import psycopg
from psycopg import sql
from pydantic import SecretStr

from docingest.pipeline.settings import Settings
from docingest.pipeline.store import VectorStore
from docingest.pipeline.store.postgres import PostgresEngine
from docingest.pipeline.store.postgres_generations import build_key
from docingest.pipeline.store.postgres_rows import documents_scope
from tests.pipeline.store.test_store import CONFIG, DIMS, records
from tests.support.engines import postgres_url, schema_for

ROWS = 100  # the smallest generation the settings take


def settings_for(tmp_path: Path) -> Settings:
    return Settings(
        database_url=SecretStr(postgres_url()),
        database_schema=schema_for(tmp_path),
        data_dir=tmp_path,
        database_generation_rows=ROWS,
    )


def graphs(schema: str) -> dict[str, bool]:
    """Each chunk partition of `schema` → whether it has a valid HNSW index."""
    with psycopg.connect(postgres_url(), autocommit=True) as connection:
        rows = connection.execute(
            "SELECT c.relname, bool_or(am.amname = 'hnsw' AND x.indisvalid) "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "LEFT JOIN pg_index x ON x.indrelid = c.oid "
            "LEFT JOIN pg_class i ON i.oid = x.indexrelid LEFT JOIN pg_am am ON am.oid = i.relam "
            "WHERE n.nspname = %s AND c.relkind = 'r' AND c.relname LIKE 'chunks%%' "
            "GROUP BY c.relname",
            [schema],
        ).fetchall()
    return {str(name): bool(valid) for name, valid in rows}


def engine_of(store: VectorStore) -> PostgresEngine:
    assert isinstance(store.engine, PostgresEngine)
    return store.engine


def test_sealed_generations_get_their_graphs_and_searches_see_every_generation(
    tmp_path: Path,
) -> None:
    settings = settings_for(tmp_path)
    texts = [f"chunk {n}" for n in range(250)]
    chunks = records("d1", 1, texts)
    with VectorStore.open(settings) as store:
        store.create_index("docs", CONFIG)
        for start in range(0, len(chunks), 50):  # 2 generations sealed, a third open
            store.write_chunks("docs", chunks[start : start + 50])
        store.publish("docs", "d1", 1)
        engine_of(store).graphs.wait(timeout=120)
        built = graphs(settings.database_schema)
        assert sorted(built.items()) == [
            ("chunks_1_g0", True), ("chunks_1_g1", True), ("chunks_1_g2", False),
        ]  # fmt: skip
        assert store.count_points("docs", state="live") == 250
        vectors = np.stack([chunk.dense for chunk in chunks])
        for probe in (3, 120, 240):  # one in each generation: the nearest point is itself
            hits = store.query_dense("docs", vectors[probe], limit=5)
            expected = np.argsort(-(vectors @ vectors[probe]))[:5]
            assert [hit.chunk_index for hit in hits] == list(expected)
        # a rewrite of points in a sealed generation replaces them: never twice
        store.write_chunks("docs", [dataclasses.replace(c, text="again") for c in chunks[:10]])
        assert store.count_points("docs") == 250
        assert store.count_points("docs", state="staged") == 10


def test_a_build_killed_part_way_is_redone_by_the_next_writer(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    chunks = records("d1", 1, [f"chunk {n}" for n in range(150)])
    with VectorStore.open(settings) as store:
        store.create_index("docs", CONFIG)
        store.write_chunks("docs", chunks[:100])  # seals generation 0
        engine_of(store).graphs.wait(timeout=120)
    graph = sql.Identifier(settings.database_schema, "chunks_1_g0_dense")
    with psycopg.connect(postgres_url(), autocommit=True) as connection:
        # what a build killed between its phases leaves: an index marked invalid
        connection.execute(
            "UPDATE pg_index SET indisvalid = false WHERE indexrelid = %s::regclass",
            [graph.as_string(connection)],
        )
    assert graphs(settings.database_schema)["chunks_1_g0"] is False
    with VectorStore.open(settings) as store:  # a new process: its first write looks
        store.write_chunks("docs", chunks[100:])
        engine_of(store).graphs.wait(timeout=120)
        store.publish("docs", "d1", 1)
        assert graphs(settings.database_schema)["chunks_1_g0"] is True
        assert store.count_points("docs", state="live") == 150


def test_a_layout_1_table_becomes_generation_0_with_its_rows_and_graph(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    schema = settings.database_schema
    names = {"s": sql.Identifier(schema), "t": sql.Identifier(schema, "chunks_1")}
    with psycopg.connect(postgres_url(), autocommit=True) as connection:
        # release 1's layout, as its postgres_schema made it, with one index of one point
        connection.execute("CREATE EXTENSION IF NOT EXISTS vector")
        for statement in (
            "CREATE SCHEMA {s}",
            "CREATE TABLE {s}.schema_version (one boolean PRIMARY KEY DEFAULT TRUE "
            "CHECK (one), version integer NOT NULL)",
            "INSERT INTO {s}.schema_version (version) VALUES (1)",
            "CREATE TABLE {s}.indexes (name text PRIMARY KEY, table_number bigint GENERATED "
            "ALWAYS AS IDENTITY UNIQUE, config jsonb NOT NULL)",
            f"CREATE TABLE {{t}} (id uuid PRIMARY KEY, payload jsonb NOT NULL, "
            f"dense vector({DIMS}) NOT NULL, keyword sparsevec, terms integer[], weights real[])",
            "CREATE INDEX ON {t} USING hnsw (dense vector_cosine_ops)",
            "CREATE INDEX ON {t} USING gin (payload jsonb_path_ops)",
            "CREATE INDEX ON {t} USING gin (terms)",
        ):
            connection.execute(sql.SQL(statement).format(**names))
        connection.execute(
            sql.SQL("INSERT INTO {s}.indexes (name, config) VALUES ('docs', %s)").format(**names),
            [psycopg.types.json.Jsonb(CONFIG.model_dump(mode="json"))],
        )
        vector = "[" + ",".join(["0.5"] * DIMS) + "]"
        connection.execute(
            sql.SQL(
                "INSERT INTO {t} (id, payload, dense) VALUES (gen_random_uuid(), %s, %s::vector)"
            ).format(**names),
            [
                psycopg.types.json.Jsonb(
                    {"document_id": "old", "version": 1, "state": "live", "chunk_index": 0}
                ),
                vector,
            ],
        )
    with VectorStore.open(settings) as store:
        assert store.count_points("docs", document_id="old", state="live") == 1
        store.write_chunks("docs", records("new", 1, ["fresh"]))
        store.publish("docs", "new", 1)
        hits = store.query_dense("docs", np.full(DIMS, 0.5, dtype=np.float32), limit=2)
        assert {hit.document_id for hit in hits} == {"old", "new"}
    built = graphs(schema)
    assert built == {"chunks_1_g0": True, "chunks_1_g1": False}


def term_counts(schema: str) -> tuple[dict[int, int], dict[int, int], int]:
    """Table 1's kept frequencies (term → sum of its deltas), the same counted afresh from
    its rows, and the most delta rows any term has."""
    names = {"t": sql.Identifier(schema, "terms_1"), "c": sql.Identifier(schema, "chunks_1")}
    with psycopg.connect(postgres_url(), autocommit=True) as connection:
        kept = connection.execute(
            sql.SQL("SELECT term, sum(documents), count(*) FROM {t} GROUP BY term").format(**names)
        ).fetchall()
        fresh = connection.execute(
            sql.SQL(
                "SELECT term, count(*) FROM {c}, unnest(terms) AS term GROUP BY term "
                "UNION ALL SELECT -1, count(*) FROM {c} WHERE terms IS NOT NULL"
            ).format(**names)
        ).fetchall()
    kept_sums = {int(term): int(total) for term, total, _ in kept if int(total)}
    return kept_sums, {int(term): int(n) for term, n in fresh}, max(int(n) for *_, n in kept)


def test_term_frequencies_stay_exact_through_rewrites_deletes_and_folding(
    tmp_path: Path,
) -> None:
    settings = settings_for(tmp_path)
    schema = settings.database_schema
    words = ["alpha", "beta", "gamma", "delta", "omega"]
    texts = [" ".join(words[: 1 + n % 5]) + f" w{n}" for n in range(180)]
    with VectorStore.open(settings) as store:
        store.create_index("docs", CONFIG)
        for start in range(0, 180, 30):  # generation 0 sealed, 1 open
            store.write_chunks("docs", records(f"d{start}", 1, texts[start : start + 30]))
        for start in range(0, 180, 30):
            store.publish("docs", f"d{start}", 1)
        # The seal's build may have folded before the last writes: one more pass folds all.
        engine_of(store).graphs.kick(1, DIMS)
        engine_of(store).graphs.wait(timeout=120)
        kept, fresh, most = term_counts(schema)
        assert kept == fresh and fresh[-1] == 180
        assert most == 1  # the builder folded each term's deltas into one row
        # rewrites in a sealed generation with other words, and a whole document deleted
        store.write_chunks("docs", records("d0", 1, ["omega only"] * 30))
        store.write_chunks("docs", records("d30", 2, ["alpha again"] * 10))
        assert store.delete_document("docs", "d60")
        kept, fresh, _ = term_counts(schema)  # deltas appended (folded or not: a build runs)
        assert kept == fresh and fresh[-1] == 150 + 10
        # a rewrite sealed a generation: a delete beside its running build can deadlock
        # with `CREATE INDEX CONCURRENTLY` (known, left for its own change)
        engine_of(store).graphs.wait(timeout=120)
        store.delete_index("docs")
    with psycopg.connect(postgres_url(), autocommit=True) as connection:
        left = connection.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = %s AND tablename LIKE 'terms%%'",
            [schema],
        ).fetchone()
    assert left == (0,)


def test_writers_wait_while_the_bound_of_unbuilt_generations_is_reached(tmp_path: Path) -> None:
    settings = settings_for(tmp_path).model_copy(update={"database_unbuilt_generations": 1})
    chunks = records("d1", 1, [f"chunk {n}" for n in range(150)])
    with (
        VectorStore.open(settings) as store,
        psycopg.connect(postgres_url(), autocommit=True) as builder,
    ):
        store.create_index("docs", CONFIG)
        # what a builder busy elsewhere does: it holds the table's builder lock
        builder.execute("SELECT pg_advisory_lock(%s, 1)", [build_key(settings.database_schema)])
        store.write_chunks("docs", chunks[:100])  # seals generation 0, which gets no graph
        assert graphs(settings.database_schema)["chunks_1_g0"] is False
        writer = threading.Thread(target=store.write_chunks, args=("docs", chunks[100:]))
        writer.start()
        writer.join(timeout=3.0)
        assert writer.is_alive()  # waiting for the graph, its rows not written
        assert store.count_points("docs") == 100
        builder.execute("SELECT pg_advisory_unlock(%s, 1)", [build_key(settings.database_schema)])
        writer.join(timeout=120)  # the waiting writer kicks a builder, which builds it
        assert not writer.is_alive()
        assert graphs(settings.database_schema)["chunks_1_g0"] is True
        assert store.count_points("docs") == 150


def test_another_schemas_builder_neither_holds_back_nor_is_ended_by_this_one(
    tmp_path: Path,
) -> None:
    """Two deployments in one database: table numbers repeat in every schema, and advisory
    locks are the database's, so a builder's lock must name its schema."""
    settings = settings_for(tmp_path / "this")
    other = schema_for(tmp_path / "other")
    assert other != settings.database_schema
    with (
        VectorStore.open(settings) as store,
        psycopg.connect(postgres_url(), autocommit=True) as busy,
    ):
        store.create_index("docs", CONFIG)
        # the other deployment's builder of its table 1, at work throughout
        busy.execute("SELECT pg_advisory_lock(%s, 1)", [build_key(other)])
        store.write_chunks("docs", records("d1", 1, [f"chunk {n}" for n in range(150)]))
        engine_of(store).graphs.wait(timeout=120)
        assert graphs(settings.database_schema)["chunks_1_g0"] is True
        assert store.delete_index("docs")
        assert busy.execute("SELECT 1").fetchone() == (1,)  # its session not ended


def test_another_schemas_writer_of_a_namesake_document_does_not_hold_this_one_back(
    tmp_path: Path,
) -> None:
    """A document's write lock names its schema too: another deployment's table 1 writing
    its own "d1" leaves this deployment's "d1" free."""
    settings = settings_for(tmp_path / "this")
    other = schema_for(tmp_path / "other")
    lock = "SELECT pg_advisory_lock(hashtextextended(%s || ':' || %s, 0))"
    with (
        VectorStore.open(settings) as store,
        psycopg.connect(postgres_url(), autocommit=True) as busy,
    ):
        store.create_index("docs", CONFIG)
        busy.execute(lock, [documents_scope(other, 1), "d1"])
        written = threading.Event()

        def write() -> None:
            store.write_chunks("docs", records("d1", 1, ["one", "two"]))
            written.set()

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        assert written.wait(timeout=120)
        assert store.count_points("docs") == 2
        # the same key in this schema does hold a writer back: the lock is the one taken
        busy.execute(lock, [documents_scope(settings.database_schema, 1), "d1"])
        held = threading.Event()

        def rewrite() -> None:
            store.write_chunks("docs", records("d1", 2, ["three"]))
            held.set()

        second = threading.Thread(target=rewrite, daemon=True)
        second.start()
        assert not held.wait(timeout=2)
        busy.execute("SELECT pg_advisory_unlock_all()")
        assert held.wait(timeout=120)
        writer.join(timeout=120)
        second.join(timeout=120)
