"""The PostgreSQL store's generation merges racing the writers: while the graph builder
copies, builds and swaps generations, one document is rewritten over and over (its rows
leaving the merge's sources each time) and searches run. No search sees a point twice or
misses one of the documents left alone, and afterwards every point is stored once, with
term counts equal to a fresh count."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import numpy as np

from docingest.pipeline.store import VectorStore
from tests.pipeline.store.test_postgres_generations import (
    engine_of,
    graphs,
    settings_for,
    term_counts,
)
from tests.pipeline.store.test_postgres_merges import rows_and_ids
from tests.pipeline.store.test_store import CONFIG, records

REWRITES = 12  # each seals about one generation of 100 rows: several builds and merges


def test_rewrites_and_searches_during_merges_see_every_point_once(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)  # a generation sealed each 100 rows
    stable = {f"d{n}": records(f"d{n}", 1, [f"d{n} text {i}" for i in range(50)]) for n in range(6)}
    moving = records("m", 1, [f"moving {i}" for i in range(50)])
    with VectorStore.open(settings) as store:
        store.create_index("docs", CONFIG)
        for document, chunks in stable.items():
            store.write_chunks("docs", chunks)
            store.publish("docs", document, 1)
        store.write_chunks("docs", moving)
        store.publish("docs", "m", 1)
        engine_of(store).graphs.wait(timeout=120)
        done = threading.Event()
        failures: list[str] = []

        def rewrite() -> None:
            try:
                for round_ in range(REWRITES):
                    again = [
                        dataclasses.replace(c, text=f"round {round_} {c.text}") for c in moving
                    ]
                    store.write_chunks("docs", again)
                    store.publish("docs", "m", 1)
            except Exception as exc:  # reported by the test below
                failures.append(repr(exc))
            finally:
                done.set()

        writer = threading.Thread(target=rewrite)
        writer.start()
        probe = stable["d3"][7].dense
        searches = 0
        while not done.is_set() or searches == 0:
            # "m" is live or, between its rewrite and its publish, staged: never twice
            assert store.count_points("docs", state="live") in (300, 350)
            assert store.count_points("docs", document_id="d3", state="live") == 50
            hits = store.query_dense("docs", probe, limit=60)
            ids = [(hit.document_id, hit.chunk_index) for hit in hits]
            assert len(ids) == len(set(ids)) == 60
            assert ids[0] == ("d3", 7)
            searches += 1
        writer.join()
        assert failures == []
        engine_of(store).graphs.wait(timeout=300)
        assert rows_and_ids(settings.database_schema) == (350, 350)
        assert len(graphs(settings.database_schema)) < 950 // 100  # merged, not nine sealed
        assert store.count_points("docs", state="live") == 350
        kept, fresh, _ = term_counts(settings.database_schema)
        assert kept == fresh
        vectors = np.stack([chunk.dense for chunk in moving])
        hits = store.query_dense("docs", vectors[5], limit=1)
        assert (hits[0].document_id, hits[0].chunk_index) == ("m", 5)
