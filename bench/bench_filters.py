"""Hybrid search latency with v1.2 filters at 100,000 chunks, in the embedded store (Edge).

Run: .venv/bin/python bench/bench_filters.py [--size 100000] [--queries 50] [--budget 20]

A fresh Edge store is filled with the synthetic chunks of bench_search_latency.py (random unit
384-d vectors, ~150-word Zipf texts, 20 chunks per document) written and published slice by
slice as ingestion does (`bench_store.fill`), each document given `dept` (4 values), `year`
(2000-2024), `published` (a datetime) and `ingested_at`, in an index whose `metadata_schema`
declares `dept`, `year` and `published` (so each has its payload index; `ingested_at` has its
core one). After the optimizer has indexed everything, hybrid top_k 10 (query embedding
excluded, as in bench_store.py) runs with no filter, the v1 equality filter and the v1.2
forms, in one run, so the ratios to the unfiltered and equality searches are like for like.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _common import machine  # noqa: E402
from bench_search_latency import (  # noqa: E402
    CHUNKS_PER_DOCUMENT,
    DIMS,
    INDEX,
    PremadeEmbedder,
    make_vocabulary,
    percentile,
    unit_rows,
)
from bench_store import fill, settle  # noqa: E402

from pipeline.embedders.base import EmbeddingConfig  # noqa: E402
from pipeline.search import SearchRequest, resolve_target, search  # noqa: E402
from pipeline.settings import Settings  # noqa: E402
from pipeline.store import ChunkRecord, IndexConfig, VectorStore  # noqa: E402

SCHEMA: dict[str, Any] = {"dept": "keyword", "year": "integer", "published": "datetime"}
EPOCH = datetime(2020, 1, 1, tzinfo=UTC)
FILTERS: list[tuple[str, dict[str, Any] | None]] = [
    ("no filter", None),
    ("equality (v1): dept = legal", {"dept": "legal"}),
    ("range: 2010 <= year < 2015", {"year": {"gte": 2010, "lt": 2015}}),
    ("datetime range: published in 2021", {"published": {"gte": "2021-01-01", "lt": "2022-01-01"}}),
    ("ingested_at >= a day", {"ingested_at": {"gte": "2026-03-01T00:00:00Z"}}),
    ("range + equality", {"year": {"gte": 2010}, "dept": {"in": ["legal", "hr"]}}),
    ("$or of two ranges", {"$or": [{"year": {"lt": 2003}}, {"published": {"gte": "2023-01-01"}}]}),
    ("range holding 0 and 1: year >= 0", {"year": {"gte": 0}}),
    ("$not equality", {"$not": {"dept": "legal"}}),
]  # fmt: skip


def with_metadata(record: ChunkRecord) -> ChunkRecord:
    """Give a synthetic chunk its document's year, publication and ingestion times."""
    document = int(record.document_id.removeprefix("doc-"))
    published = EPOCH + timedelta(hours=7 * document)  # 5,000 documents span 4 years
    metadata = {
        **record.document.metadata,
        "year": 2000 + document % 25,
        "published": published.isoformat().replace("+00:00", "Z"),
    }
    ingested = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=30 * document)
    fields = dataclasses.replace(
        record.document,
        metadata=metadata,
        ingested_at=ingested.isoformat().replace("+00:00", "Z"),
    )
    return dataclasses.replace(record, document=fields)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--budget", type=float, default=20.0, help="seconds per filter, at most")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.1f}; {machine()}", flush=True)
    rng = np.random.default_rng(args.seed)
    vocabulary = make_vocabulary(rng)
    import bench_store

    original = bench_store.make_records
    bench_store.make_records = lambda *a, **k: [with_metadata(r) for r in original(*a, **k)]
    with tempfile.TemporaryDirectory() as data_dir:
        store = VectorStore.open(Settings(data_dir=Path(data_dir)))
        config = IndexConfig(
            embedding=EmbeddingConfig(model="bench-random", dimensions=DIMS),
            metadata_schema=SCHEMA,
        )
        store.create_index(INDEX, config)
        started = time.perf_counter()
        fill(store, args.size, rng, vocabulary)
        wall, _cpu = settle(store)
        print(f"filled {args.size} chunks in {time.perf_counter() - started:.0f} s", flush=True)
        embedder = PremadeEmbedder()
        mid = vocabulary[200:5000]
        texts = [" ".join(rng.choice(mid, size=3)) for _ in range(args.queries)]
        for text, vector in zip(texts, unit_rows(rng, args.queries), strict=True):
            embedder.vectors[text] = vector
        rows = []
        for label, selector in FILTERS:
            timings: list[float] = []
            found = 0
            deadline = time.perf_counter() + args.budget
            for number, text in enumerate([texts[0], *texts]):
                request = SearchRequest.model_validate(
                    {"query": text, "top_k": 10, "mode": "hybrid", "filter": selector}
                )
                t0 = time.perf_counter()
                target = resolve_target(store, INDEX, embedder_for=lambda _config: embedder)
                response = search(store, target, request)
                if number:  # the first is a warm-up
                    timings.append((time.perf_counter() - t0) * 1000)
                    found += len(response.results)
                if len(timings) >= 10 and time.perf_counter() > deadline:
                    break
            rows.append((label, percentile(timings, 50), percentile(timings, 95), found))
            print(f"  {label:<40} p50 {rows[-1][1]:6.1f} ms  p95 {rows[-1][2]:6.1f} ms", flush=True)
        store.close()
    base = rows[0][1]
    equality = rows[1][1]
    print(f"\nload average at end: {os.getloadavg()[0]:.1f}\n")
    print("| hybrid, top_k 10 | p50 ms | p95 ms | p50 / no filter | p50 / equality |")
    print("|---|---:|---:|---:|---:|")
    for label, p50, p95, _found in rows:
        print(f"| {label} | {p50:.1f} | {p95:.1f} | {p50 / base:.2f} | {p50 / equality:.2f} |")
    print(f"\nsize {args.size}, {len(texts)} queries per filter, CHUNKS_PER_DOCUMENT "
          f"{CHUNKS_PER_DOCUMENT}; optimizer's last run {wall:.1f} s")  # fmt: skip


if __name__ == "__main__":
    main()
