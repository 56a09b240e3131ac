"""Merges of the PostgreSQL store's sealed generations (`postgres_merges`): generations of one
size merged into one by the graph builder, rows deleted, rewritten or published during a
merge reconciled at its swap, and a merge stopped before its swap leaving every row once."""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path

import numpy as np
import psycopg
from psycopg import sql

from docingest.pipeline.sparse import encode_query
from docingest.pipeline.store import ChunkRecord, VectorStore
from docingest.pipeline.store.postgres_generations import build_key
from docingest.pipeline.store.postgres_merges import FACTOR, copy, swap
from tests.pipeline.store.test_postgres_generations import (
    engine_of,
    graphs,
    settings_for,
    term_counts,
)
from tests.pipeline.store.test_store import CONFIG, DIMS, records
from tests.support.engines import postgres_url


def written(store: VectorStore, documents: int) -> list[ChunkRecord]:
    """`documents` documents of 50 chunks each, written (one batch a document) and published."""
    chunks = []
    for n in range(documents):
        texts = [f"doc{n} chunk {i} {'alpha' if i % 2 else 'beta'}" for i in range(50)]
        batch = records(f"d{n}", 1, texts)
        store.write_chunks("docs", batch)
        store.publish("docs", f"d{n}", 1)
        chunks.extend(batch)
    return chunks


def rows_and_ids(schema: str) -> tuple[int, int]:
    with psycopg.connect(postgres_url(), autocommit=True) as connection:
        row = connection.execute(
            sql.SQL("SELECT count(*), count(DISTINCT id) FROM {}").format(
                sql.Identifier(schema, "chunks_1")
            )
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def nearest_are_themselves(store: VectorStore, chunks: list[ChunkRecord]) -> None:
    vectors = np.stack([chunk.dense for chunk in chunks])
    for probe in range(0, len(chunks), 37):
        hits = store.query_dense("docs", vectors[probe], limit=3)
        assert (hits[0].document_id, hits[0].chunk_index) == (
            chunks[probe].document_id,
            chunks[probe].chunk_index,
        )


def test_the_builder_merges_generations_of_one_size_into_one(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)  # a generation sealed each 100 rows
    with VectorStore.open(settings) as store:
        store.create_index("docs", CONFIG)
        chunks = written(store, 2 * FACTOR + 1)  # FACTOR sealed, then open
        engine_of(store).graphs.wait(timeout=120)
        assert graphs(settings.database_schema) == {"chunks_1_g0": True, "chunks_1_g4": False}
        assert rows_and_ids(settings.database_schema) == (450, 450)
        assert store.count_points("docs", state="live") == 450
        nearest_are_themselves(store, chunks)
        hits = store.query_sparse("docs", encode_query("alpha"), limit=500)
        assert len(hits) == 225


def test_rows_changed_during_a_merge_are_reconciled_at_its_swap(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    schema = settings.database_schema
    with VectorStore.open(settings) as store:
        store.create_index("docs", CONFIG)
        chunks = written(store, 2 * (FACTOR - 1) + 1)  # FACTOR - 1 sealed: no merge of its own
        engine_of(store).graphs.wait(timeout=120)
        builder = psycopg.connect(postgres_url(), autocommit=True)
        # this test is the builder of table 1 now: the store's builder stays out of the way
        builder.execute("SELECT pg_advisory_lock(%s, 1)", [build_key(settings.database_schema)])
        copy(builder, schema, 1, [0, 1, 2], DIMS)
        # meanwhile: a document deleted, points rewritten out of a source, a new version
        # staged over a source's rows and published (its old rows retired)
        assert store.delete_document("docs", "d2")
        store.write_chunks("docs", [dataclasses.replace(c, text="moved") for c in chunks[:10]])
        store.publish("docs", "d0", 1)
        renewed = records("d4", 2, [f"renewed {i}" for i in range(50)])
        store.write_chunks("docs", renewed)
        store.publish("docs", "d4", 2)
        store.retire("docs", "d4", keep_version=2)
        assert swap(builder, schema, 1, [0, 1, 2])
        builder.close()
        assert graphs(schema) == {
            "chunks_1_g0": True, "chunks_1_g3": False, "chunks_1_g4": False,
        }  # fmt: skip
        assert rows_and_ids(schema) == (300, 300)
        assert store.count_points("docs", state="live") == 300
        assert store.count_points("docs", document_id="d2") == 0
        assert store.count_points("docs", document_id="d4", version=2, state="live") == 50
        kept, fresh, _ = term_counts(schema)
        assert kept == fresh
        survivors = [c for c in chunks if c.document_id not in {"d2", "d4"}] + renewed
        nearest_are_themselves(store, survivors)


def test_a_merge_stopped_before_its_swap_leaves_every_row_once(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    schema = settings.database_schema
    with VectorStore.open(settings) as store:
        store.create_index("docs", CONFIG)
        chunks = written(store, 2 * (FACTOR - 1) + 1)
        engine_of(store).graphs.wait(timeout=120)
    with psycopg.connect(postgres_url(), autocommit=True) as connection:
        copy(connection, schema, 1, [0, 1, 2], DIMS)  # then the process died, or:
        with psycopg.connect(postgres_url()) as searcher:  # a search outlasts the swap's wait
            searcher.execute(sql.SQL("SELECT 1 FROM {} LIMIT 1").format(
                sql.Identifier(schema, "chunks_1")))  # fmt: skip
            assert not swap(connection, schema, 1, [0, 1, 2])
    assert rows_and_ids(schema) == (350, 350)  # the copy is no partition
    with VectorStore.open(settings) as store:  # a new process: its first write looks again
        assert store.count_points("docs", state="live") == 350
        nearest_are_themselves(store, chunks)
        more = records("d9", 1, [f"more {i}" for i in range(50)])
        store.write_chunks("docs", more)  # seals generation 3: now FACTOR sealed
        engine_of(store).graphs.wait(timeout=120)
        store.publish("docs", "d9", 1)
        assert graphs(schema) == {"chunks_1_g0": True, "chunks_1_g4": False}
        assert rows_and_ids(schema) == (400, 400)
        nearest_are_themselves(store, chunks + more)


def test_an_index_deleted_while_its_graph_builds_is_dropped_whole(tmp_path: Path) -> None:
    """A delete during a `CREATE INDEX CONCURRENTLY` (which waits for the deleting transaction
    while that waits for its table) would deadlock: the delete ends the build first, and drops
    a merge's unattached copy with the table."""
    settings = settings_for(tmp_path)
    schema = settings.database_schema
    with VectorStore.open(settings) as store:
        store.create_index("docs", CONFIG)
        written(store, 2 * (FACTOR - 1) + 1)
        engine_of(store).graphs.wait(timeout=120)
        builder = psycopg.connect(postgres_url(), autocommit=True)
        builder.execute("SELECT pg_advisory_lock(%s, 1)", [build_key(settings.database_schema)])
        copy(builder, schema, 1, [0, 1, 2], DIMS)  # a merge stopped before its swap
        # an old snapshot holds the builder's next build in its wait for older snapshots
        reader = psycopg.connect(postgres_url())
        reader.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        reader.execute(
            sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(schema, "chunks_1"))
        )
        ended: list[BaseException] = []

        def build() -> None:
            try:
                builder.execute(
                    sql.SQL("CREATE INDEX CONCURRENTLY {} ON {} (document_id)").format(
                        sql.Identifier("held_build"), sql.Identifier(schema, "chunks_1_g0")
                    )
                )
            except psycopg.Error as exc:
                ended.append(exc)

        building = threading.Thread(target=build)
        building.start()
        with psycopg.connect(postgres_url(), autocommit=True) as watcher:
            deadline = time.monotonic() + 60
            while not watcher.execute(
                "SELECT 1 FROM pg_stat_progress_create_index WHERE pid = %s",
                [builder.info.backend_pid],
            ).fetchone():
                assert time.monotonic() < deadline, "the build never started"
                time.sleep(0.05)
        deleted: list[bool] = []
        deleting = threading.Thread(target=lambda: deleted.append(store.delete_index("docs")))
        deleting.start()
        building.join(timeout=60)  # ended by the delete, before it drops anything
        reader.rollback()  # the delete waited only for this reader's lock on the table
        deleting.join(timeout=60)
        reader.close()
        assert not building.is_alive() and ended, "the build was not ended"
        assert deleted == [True]
        with psycopg.connect(postgres_url(), autocommit=True) as connection:
            left = connection.execute(
                "SELECT relname FROM pg_class JOIN pg_namespace ON pg_namespace.oid = relnamespace "
                "WHERE nspname = %s AND relname ~ '^(chunks|terms)_1'",
                [schema],
            ).fetchall()
        assert left == []
        assert store.list_indexes() == []
