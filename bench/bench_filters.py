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
Each query is timed three ways (`VARIANTS`): the store's query alone, search without
excerpts, and search as the API runs it.
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

from docingest.pipeline.embedders.base import EmbeddingConfig  # noqa: E402
from docingest.pipeline.search import SearchRequest, resolve_target, search  # noqa: E402
from docingest.pipeline.search.candidates import candidate_limit  # noqa: E402
from docingest.pipeline.settings import Settings  # noqa: E402
from docingest.pipeline.sparse import encode_query  # noqa: E402
from docingest.pipeline.store import ChunkRecord, IndexConfig, SearchFilter, VectorStore  # noqa: E402

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


VARIANTS = ("store", "no excerpts", "search")
"""What is timed for each query: the store's query alone (`VectorStore.query_both` with the
parsed filter: both candidate lists, payloads included), `search` with `"excerpt": false`,
and `search` as the API runs it by default (excerpts and highlights)."""


def time_variant(
    store: VectorStore,
    embedder: PremadeEmbedder,
    variant: str,
    text: str,
    selector: dict[str, Any] | None,
) -> float:
    """Milliseconds of one hybrid top-10 query as `variant` says (query embedding excluded)."""
    body: dict[str, Any] = {"query": text, "top_k": 10, "mode": "hybrid", "filter": selector}
    if variant == "no excerpts":
        body["excerpt"] = False
    request = SearchRequest.model_validate(body)
    started = time.perf_counter()
    target = resolve_target(store, INDEX, embedder_for=lambda _config: embedder)
    if variant == "store":
        store.query_both(
            INDEX,
            vector=embedder.embed_query(text),
            terms=encode_query(text),
            limit=candidate_limit(request.top_k),
            filter=SearchFilter.parse(request.filter, schema=target.metadata_schema),
        )
    else:
        search(store, target, request)
    return (time.perf_counter() - started) * 1000


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
            timings: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
            deadline = time.perf_counter() + args.budget
            for number, text in enumerate([texts[0], *texts]):
                turn = number % len(VARIANTS)  # each variant runs first as often: a first
                for variant in VARIANTS[turn:] + VARIANTS[:turn]:  # query warms the others' caches
                    elapsed = time_variant(store, embedder, variant, text, selector)
                    if number:  # the first is a warm-up
                        timings[variant].append(elapsed)
                if len(timings["search"]) >= 10 and time.perf_counter() > deadline:
                    break
            p50 = {variant: percentile(timings[variant], 50) for variant in VARIANTS}
            rows.append((label, p50, percentile(timings["search"], 95)))
            print(f"  {label:<40} " + "  ".join(f"{v} p50 {p50[v]:6.1f} ms" for v in VARIANTS),
                  flush=True)  # fmt: skip
        store.close()
    base = rows[0][1]["search"]
    equality = rows[1][1]["search"]
    print(f"\nload average at end: {os.getloadavg()[0]:.1f}\n")
    print("| hybrid, top_k 10 | store query p50 ms | without excerpts p50 ms | search p50 ms "
          "| search p95 ms | search p50 / no filter | search p50 / equality |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, p50, p95 in rows:
        ratios = f"{p50['search'] / base:.2f} | {p50['search'] / equality:.2f}"
        print(f"| {label} | {p50['store']:.1f} | {p50['no excerpts']:.1f} | {p50['search']:.1f} "
              f"| {p95:.1f} | {ratios} |")  # fmt: skip
    print(f"\nsize {args.size}, {len(texts)} queries per filter, CHUNKS_PER_DOCUMENT "
          f"{CHUNKS_PER_DOCUMENT}; optimizer's last run {wall:.1f} s")  # fmt: skip


if __name__ == "__main__":
    main()
