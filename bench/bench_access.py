"""Access control's cost: hybrid search with a caller's access condition against the same
search without one, and a PATCH of one access list against today's metadata PATCH.

Run: .venv/bin/python bench/bench_access.py [--engine edge|qdrant-client] [--size 100000]
     [--queries 100] [--principals 1000] [--groups 20] [--patch-chunks 1000]

Search: a fresh store (Edge in a temporary directory, or qdrant-client's local mode) is filled
with the synthetic chunks of bench_search_latency.py (random unit 384-d vectors, ~150-word Zipf
texts, 20 chunks per document), each document given an access list of 2 of `--principals`
groups (`group:g0000` ...), 1 in 50 none, as ingestion writes them (`bench_store.fill`). Each
query (hybrid, top_k 10, excerpts on, query embedding excluded) runs twice in turn: as an
admin (no condition: the search as it was before access lists) and as a caller holding
`--groups` groups (the condition AND-ed into the store query). Both orders alternate, so a
query's first run warming the cache favours neither. p50 and p99 of each, and their ratio.

PATCH (needs Redis at 127.0.0.1:6379 DB 15 for the fence and lock): one document of
`--patch-chunks` chunks, its access list replaced (`patch_document(access=...)`) and its
metadata replaced (`patch_document(metadata=...)`, today's PATCH), alternated, median of 5.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _common import machine  # noqa: E402
from bench_search_latency import (  # noqa: E402
    DIMS,
    INDEX,
    PremadeEmbedder,
    make_vocabulary,
    percentile,
    unit_rows,
)
from bench_store import fill, settle  # noqa: E402

from docingest.pipeline.documents import patch_document  # noqa: E402
from docingest.pipeline.embedders.base import EmbeddingConfig  # noqa: E402
from docingest.pipeline.search import SearchRequest, resolve_target, search  # noqa: E402
from docingest.pipeline.services import Services  # noqa: E402
from docingest.pipeline.settings import Settings  # noqa: E402
from docingest.pipeline.sparse import encode_document  # noqa: E402
from docingest.pipeline.store import (  # noqa: E402
    ADMIN,
    ChunkRecord,
    DocumentFields,
    IndexConfig,
    Reader,
    VectorStore,
)

CONFIG = IndexConfig(embedding=EmbeddingConfig(model="bench-random", dimensions=DIMS))


def access_of(document: int, principals: int) -> list[str] | None:
    """Two groups per document, spread over `principals` (1 document in 50 without a list)."""
    if document % 50 == 49:
        return None
    first, second = (document * 7919) % principals, (document * 104729 + 13) % principals
    return sorted({f"group:g{first:04d}", f"group:g{second:04d}"})


def with_access(record: ChunkRecord, principals: int) -> ChunkRecord:
    document = int(record.document_id.removeprefix("doc-"))
    fields = dataclasses.replace(record.document, access=access_of(document, principals))
    return dataclasses.replace(record, document=fields)


def timed_search(
    store: VectorStore,
    embedder: PremadeEmbedder,
    text: str,
    reader: Reader,
    selector: dict[str, Any] | None = None,
) -> tuple[float, int]:
    """Milliseconds of one hybrid top-10 search as `reader`, with the request filter
    `selector` (query embedding excluded)."""
    request = SearchRequest(query=text, top_k=10, mode="hybrid", filter=selector)
    started = time.perf_counter()
    target = resolve_target(store, INDEX, embedder_for=lambda _config: embedder)
    response = search(store, target, request, reader=reader)
    return (time.perf_counter() - started) * 1000, len(response.results)


def bench_search(args: argparse.Namespace) -> None:
    rng = np.random.default_rng(args.seed)
    vocabulary = make_vocabulary(rng)
    import bench_store

    original = bench_store.make_records
    bench_store.make_records = lambda *a, **k: [
        with_access(r, args.principals) for r in original(*a, **k)
    ]
    reused = bench_store.reused_records
    bench_store.reused_records = lambda *a, **k: [
        with_access(r, args.principals) for r in reused(*a, **k)
    ]
    with tempfile.TemporaryDirectory() as data_dir:
        url = ":memory:" if args.engine == "qdrant-client" else None
        store = VectorStore.open(Settings(data_dir=Path(data_dir), qdrant_url=url))
        store.create_index(INDEX, CONFIG)
        started = time.perf_counter()
        fill(store, args.size, rng, vocabulary)
        settle(store)
        print(f"filled {args.size} chunks in {time.perf_counter() - started:.0f} s", flush=True)
        embedder = PremadeEmbedder()
        mid = vocabulary[200:5000]
        texts = [" ".join(rng.choice(mid, size=3)) for _ in range(args.queries)]
        for text, vector in zip(texts, unit_rows(rng, args.queries), strict=True):
            embedder.vectors[text] = vector
        held = [f"group:g{n:04d}" for n in rng.choice(args.principals, args.groups, False)]
        caller = Reader.of(held)
        visible = sum(
            1
            for d in range(args.size // 20)
            if (a := access_of(d, args.principals)) is None or set(a) & set(held)
        )
        seen = [
            f"doc-{d}"
            for d in range(args.size // 20)
            if (a := access_of(d, args.principals)) is None or set(a) & set(held)
        ]
        print(f"caller sees {visible} of {args.size // 20} documents", flush=True)
        # the same documents named by an ordinary request filter, as an admin: what the
        # engine's filter costs at this selectivity, access control aside
        same: dict[str, Any] | None = {"document_id": {"in": seen}} if len(seen) <= 1000 else None
        timings: dict[str, list[float]] = {"without": [], "with": [], "filter": []}
        shown = {"without": 0, "with": 0, "filter": 0}
        for number, text in enumerate([texts[0], *texts]):
            order = [("without", ADMIN, None), ("with", caller, None), ("filter", ADMIN, same)]
            turn = number % len(order)
            for label, reader, selector in order[turn:] + order[:turn]:
                elapsed, results = timed_search(store, embedder, text, reader, selector)
                if number:  # the first is a warm-up
                    timings[label].append(elapsed)
                    shown[label] += results
        store.close()
    rows = {label: (percentile(v, 50), percentile(v, 99)) for label, v in timings.items()}
    base50, base99 = rows["without"]
    print(f"\nload average at end: {os.getloadavg()[0]:.1f}\n")
    print(f"| hybrid top_k 10, {args.engine}, {args.size:,} chunks | p50 ms | p99 ms "
          "| p50 ratio | p99 ratio | results |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|")
    names = {
        "without": "admin, no condition",
        "with": f"caller in {args.groups} groups",
        "filter": "admin, request filter naming the same documents",
    }
    for label in ("without", "with", "filter"):
        p50, p99 = rows[label]
        name = names[label]
        print(f"| {name} | {p50:.1f} | {p99:.1f} | {p50 / base50:.2f} | {p99 / base99:.2f} "
              f"| {shown[label] / len(timings[label]):.1f} |")  # fmt: skip


def chunk(document_id: str, index: int, chunks: int, rng: np.random.Generator) -> ChunkRecord:
    text = f"Section {index} of {document_id}: harbour tariffs and shipping schedules."
    vector = rng.normal(size=DIMS).astype(np.float32)
    fields = DocumentFields(
        filename=f"{document_id}.txt", format="text", content_sha256=None, pages=None,
        words=10 * chunks, chunk_count=chunks, metadata={"team": "old"},
        ingested_at="2026-01-01T00:00:00Z", access=["group:old"],
    )  # fmt: skip
    return ChunkRecord(
        document_id=document_id, version=1, chunk_index=index, text=text,
        text_hash=uuid.uuid4().hex, start=0, end=len(text), page_start=None, page_end=None,
        headings=[], dense=vector / np.linalg.norm(vector), sparse=encode_document(text),
        document=fields,
    )  # fmt: skip


def bench_patch(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as data_dir:
        settings = Settings(
            data_dir=Path(data_dir),
            redis_url="redis://127.0.0.1:6379/15",
            redis_key_prefix=f"bench-{uuid.uuid4().hex[:8]}:",
            qdrant_url=":memory:" if args.engine == "qdrant-client" else None,
        )
        services = Services(settings, owns_store=True)
        try:
            store = services.store
            store.create_index("patch", CONFIG)
            rng = np.random.default_rng(2)
            chunks = args.patch_chunks
            version = services.next_version("patch", "big")
            store.write_chunks("patch", [chunk("big", n, chunks, rng) for n in range(chunks)])
            store.publish("patch", "big", version)
            samples: dict[str, list[float]] = {"access": [], "metadata": []}
            for turn in range(10):
                kind = ("access", "metadata")[turn % 2]
                started = time.perf_counter()
                if kind == "access":
                    patch_document(services, "patch", "big", access=[f"group:g{turn}"])
                else:
                    patch_document(services, "patch", "big", metadata={"team": f"t{turn}"})
                samples[kind].append(time.perf_counter() - started)
            assert store.count_points("patch", "big") == chunks
        finally:
            services.close()
    access, metadata = (statistics.median(samples[k]) for k in ("access", "metadata"))
    print(f"\n| PATCH of one document of {chunks:,} chunks, {args.engine} | median s | |")
    print("|---|---:|---:|")
    print(
        f"| access list (`patch_document(access=...)`) | {access:.2f} | {access / metadata:.2f}× |"
    )
    print(f"| metadata (today's PATCH) | {metadata:.2f} | 1× |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=["edge", "qdrant-client"], default="edge")
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--principals", type=int, default=1000)
    parser.add_argument("--groups", type=int, default=20)
    parser.add_argument("--patch-chunks", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--skip-search", action="store_true")
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.1f}; {machine()}", flush=True)
    if not args.skip_search:
        bench_search(args)
    if args.patch_chunks:
        bench_patch(args)


if __name__ == "__main__":
    main()
