"""A staged document's write and publish through the PostgreSQL store, code against code.

Run: .venv/bin/python bench/bench_postgres_publish.py [--points 2000] [--dimensions 1536]
     [--preload 0] [--baseline DIR]

Each tree (`--baseline DIR` first, e.g. `git archive main | tar -x -C DIR`, then this one)
runs in a process of its own with its code first on the path, against the tests' private
PostgreSQL, in a fresh schema: `--preload` live points of other documents first, then
`--points` staged points of one document written (`write_chunks`, batches of 256), published
(`publish`: state and the document's late fields on every point) and retired
(`retire`, nothing to delete); seconds of each and points/s of the write.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

from _common import run_in_trees  # noqa: E402


def child(points: int, dimensions: int, preload: int) -> None:
    import numpy as np
    from pydantic import SecretStr

    from docingest.pipeline.embedders.base import EmbeddingConfig
    from docingest.pipeline.settings import Settings
    from docingest.pipeline.store import ChunkRecord, IndexConfig, VectorStore
    from tests.pipeline.store.test_store import records
    from tests.support.engines import postgres_url

    rng = np.random.default_rng(0)

    def chunks(document: str, count: int) -> list[ChunkRecord]:
        vectors = rng.standard_normal((count, dimensions)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        texts = [f"{document} chunk {n} lorem ipsum dolor sit amet" for n in range(count)]
        made = records(document, 1, texts)
        return [dataclasses.replace(c, dense=vectors[n]) for n, c in enumerate(made)]

    settings = Settings(
        database_url=SecretStr(postgres_url()),
        database_schema="p_" + uuid.uuid4().hex[:12],
        data_dir=Path("/tmp"),
    )
    config = IndexConfig(
        embedding=EmbeddingConfig(provider="openai", model="m", dimensions=dimensions)
    )
    with VectorStore.open(settings) as store:
        store.create_index("publish", config)
        for start in range(0, preload, 1000):
            store.write_live("publish", chunks(f"pre{start}", 1000), content={"pages": 1})
        staged = chunks("d1", points)
        started = time.perf_counter()
        store.write_chunks("publish", staged)
        written = time.perf_counter() - started
        started = time.perf_counter()
        store.publish("publish", "d1", 1, content={"pages": 1, "words": 10})
        published = time.perf_counter() - started
        started = time.perf_counter()
        store.retire("publish", "d1", keep_version=1)
        retired = time.perf_counter() - started
    print(
        f"{points:,} staged points written in {written:.2f} s = {points / written:,.0f}/s, "
        f"published in {published:.2f} s, retired in {retired:.2f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=2000)
    parser.add_argument("--dimensions", type=int, default=1536)
    parser.add_argument("--preload", type=int, default=0)
    parser.add_argument("--baseline", type=Path)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        sys.path.append(str(REPO))  # the tests' support, after the tree's own code
        child(args.points, args.dimensions, args.preload)
        return
    run_in_trees(
        __file__,
        [
            "--points",
            str(args.points),
            "--dimensions",
            str(args.dimensions),
            "--preload",
            str(args.preload),
        ],
        args.baseline,
    )


if __name__ == "__main__":
    main()
