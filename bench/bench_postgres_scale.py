"""Idle search latency of the PostgreSQL store at scale, dense and keyword apart, code against code.

Run: .venv/bin/python bench/bench_postgres_scale.py [--rows 100000] [--dimensions 1536]
     [--baseline DIR]

Each tree (`--baseline DIR` first, e.g. `git archive <commit> | tar -x -C DIR`, then this one)
runs in a process of its own with its code first on the path, against the tests' private
PostgreSQL, in a fresh schema: `--rows` chunks of documents of 500 written through the store
(`write_chunks` in batches of 64, then `publish`), each chunk 80 words drawn from the sample
corpus's Markdown vocabulary with Zipf frequencies, its vector the words' feature hash
(`tests.support.embedding_server.word_vectors`); then, once every graph build (and merge) has
ended, 30 queries of 6 such words, each timed as a dense search, a keyword search and both in
one round trip (`query_both`), top 50 live chunks: the median and 90th percentile of each.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

from _common import run_in_trees  # noqa: E402

CORPUS = REPO.parent / "shared" / "corpus" / "markdown"


def child(rows: int, dimensions: int) -> None:
    import numpy as np
    from pydantic import SecretStr

    from docingest.pipeline.embedders.base import EmbeddingConfig
    from docingest.pipeline.settings import Settings
    from docingest.pipeline.sparse import encode_query
    from docingest.pipeline.store import IndexConfig, VectorStore
    from tests.pipeline.store.test_store import records
    from tests.support.embedding_server import word_vectors
    from tests.support.engines import postgres_url

    text = " ".join(path.read_text(errors="ignore").lower() for path in CORPUS.glob("*"))
    vocabulary = np.array(sorted(set(re.findall(r"[a-z]{3,}", text))))
    weights = 1.0 / np.arange(1, len(vocabulary) + 1)
    weights /= weights.sum()
    rng = np.random.default_rng(0)
    settings = Settings(
        database_url=SecretStr(postgres_url()),
        database_schema="s_" + uuid.uuid4().hex[:12],
        data_dir=Path("/tmp"),
    )
    config = IndexConfig(
        embedding=EmbeddingConfig(provider="openai", model="m", dimensions=dimensions)
    )
    started = time.perf_counter()
    with VectorStore.open(settings) as store:
        store.create_index("scale", config)
        for document in range(rows // 500):
            texts = [" ".join(rng.choice(vocabulary, 80, p=weights)) for _ in range(500)]
            vectors = word_vectors(texts, dimensions)
            made = records(f"d{document}", 1, texts)
            made = [dataclasses.replace(c, dense=vectors[n]) for n, c in enumerate(made)]
            for start in range(0, len(made), 64):
                store.write_chunks("scale", made[start : start + 64])
            store.publish("scale", f"d{document}", 1)
        written = time.perf_counter() - started
        store.engine.graphs.wait()  # type: ignore[attr-defined]
        settled = time.perf_counter() - started
        queries = [" ".join(rng.choice(vocabulary, 6, p=weights)) for _ in range(30)]

        def timed(search: Callable[[str], object]) -> str:
            search(queries[0])
            seconds = []
            for query in queries:
                begin = time.perf_counter()
                search(query)
                seconds.append((time.perf_counter() - begin) * 1000)
            return f"p50 {statistics.median(seconds):.0f} ms, p90 {sorted(seconds)[26]:.0f} ms"

        dense = timed(
            lambda q: store.query_dense("scale", word_vectors([q], dimensions)[0], limit=50)
        )
        keyword = timed(lambda q: store.query_sparse("scale", encode_query(q), limit=50))
        both = timed(
            lambda q: store.query_both(
                "scale", vector=word_vectors([q], dimensions)[0], terms=encode_query(q), limit=50
            )
        )
    print(
        f"{rows:,} chunks written in {written:.0f} s, graphs settled at {settled:.0f} s; "
        f"dense {dense}; keyword {keyword}; both {both}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--dimensions", type=int, default=1536)
    parser.add_argument("--baseline", type=Path)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        sys.path.append(str(REPO))  # the tests' support, after the tree's own code
        child(args.rows, args.dimensions)
        return
    run_in_trees(
        __file__, ["--rows", str(args.rows), "--dimensions", str(args.dimensions)], args.baseline
    )


if __name__ == "__main__":
    main()
