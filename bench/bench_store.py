"""The store's engines side by side: Qdrant Edge (the embedded default) and the previous
embedded engine, qdrant-client's local mode on disk.

Run: .venv/bin/python bench/bench_store.py [--sizes 10000 100000 1000000]
     [--engines edge local-mode] [--local-mode-max 100000] [--queries 50] [--write]

For each engine and size a fresh store in a temporary directory is filled with the synthetic
chunks of bench_search_latency.py (random unit 384-d vectors, ~150-word Zipf texts as keyword
vectors, 20 chunks per document, user metadata), through `VectorStore.write_chunks` as
ingestion does. Measured: write points/s (chunk encoding excluded), optimization (Edge: the
background runs during writing plus the final run), publish and retire of one 20-chunk
document, search p50/p95 through `docingest.pipeline.search.search` per mode (query embedding
excluded), peak RSS of this process, disk, and restart time (close, reopen, first search answered).
Edge also: the resident memory split into anonymous (heap) and file-backed (mapped segment
files, which the kernel can drop and re-read), the segment count, the WAL's size, and the
dense retriever's recall@10 against an exact search of the same filter (HNSW over int8 copies,
rescored, against a full scan of the float32 vectors). With `--http`, the RSS of the `serve`
process after its searches.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import resource
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import qdrant_edge as edge

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_search_latency import (  # noqa: E402
    CHUNKS_PER_DOCUMENT,
    DIMS,
    INDEX,
    PremadeEmbedder,
    make_records,
    make_vocabulary,
    percentile,
    unit_rows,
)
from qdrant_client import QdrantClient  # noqa: E402

from docingest.pipeline import metrics  # noqa: E402
from docingest.pipeline.embedders.base import EmbeddingConfig  # noqa: E402
from docingest.pipeline.search import SearchRequest, SearchResponse, resolve_target, search  # noqa: E402
from docingest.pipeline.settings import Settings  # noqa: E402
from docingest.pipeline.store import ChunkRecord, IndexConfig, VectorStore  # noqa: E402
from docingest.pipeline.store import edge_convert as convert  # noqa: E402
from docingest.pipeline.store.client import ClientEngine  # noqa: E402
from docingest.pipeline.store.edge import EdgeEngine  # noqa: E402
from docingest.pipeline.store.requests import fields_filter  # noqa: E402
from tests.support.docingest_service import free_port  # noqa: E402

BEGIN = "<!-- bench_store.py: begin -->"
END = "<!-- bench_store.py: end -->"
WRITE_SLICE = 5000
FRESH_TEXTS = 100_000
"""Chunks with texts of their own; later ones reuse the first `TEXT_POOL` texts."""
TEXT_POOL = 20_000
MODES: list[tuple[str, dict[str, Any]]] = [
    ("vector", {"mode": "vector"}),
    ("keyword", {"mode": "keyword"}),
    ("hybrid", {"mode": "hybrid"}),
    ("hybrid + filter", {"mode": "hybrid", "filter": {"dept": "legal"}}),
    ("hybrid + cap 1/doc", {"mode": "hybrid", "max_chunks_per_document": 1}),
]


CONFIG = IndexConfig(
    embedding=EmbeddingConfig(provider="local", model="all-MiniLM-L6-v2", dimensions=DIMS)
)  # random vectors, but the model `serve` embeds queries with in the HTTP measurement


def open_store(engine: str, data_dir: Path) -> VectorStore:
    settings = Settings(data_dir=data_dir)
    if engine == "edge":
        return VectorStore(EdgeEngine.open(settings))
    client = QdrantClient(path=str(data_dir / "qdrant"), force_disable_check_same_thread=True)
    return VectorStore(ClientEngine(client, location="local mode", settings=settings, local=True))


def tune_local_mode(store: VectorStore) -> None:
    """Give local mode the SQLite WAL journal the previous release set (else each write waits
    for an fsync and the comparison is unfair to it)."""
    engine = store.engine
    if not isinstance(engine, ClientEngine):
        return
    local = getattr(engine.client, "_client", None)
    for collection in getattr(local, "collections", {}).values():
        database = getattr(getattr(collection, "storage", None), "storage", None)
        if isinstance(database, sqlite3.Connection):
            database.execute("PRAGMA journal_mode=WAL")
            database.execute("PRAGMA synchronous=NORMAL")


def memory_status(pid: int | str = "self") -> dict[str, float]:
    """VmRSS, RssAnon and RssFile of a process, in MB (from /proc)."""
    wanted = ("VmRSS", "VmHWM", "RssAnon", "RssFile")
    status = Path(f"/proc/{pid}/status").read_text(encoding="ascii").splitlines()
    fields = dict(line.split(":", 1) for line in status if line.split(":", 1)[0] in wanted)
    return {key: int(value.split()[0]) / 1024 for key, value in fields.items()}


def directory_mb(path: Path) -> int:
    disk = subprocess.run(["du", "-sm", str(path)], capture_output=True, text=True)
    return int(disk.stdout.split()[0]) if disk.returncode == 0 else 0


def shard_facts(store: VectorStore, rng: np.random.Generator, queries: int) -> dict[str, Any]:
    """Edge only: segments, and the dense retriever's recall@10 against an exact search (raw
    Edge calls on the engine's shard: measurement only, so the private borrow is fine here)."""
    engine = store.engine
    if not isinstance(engine, EdgeEngine):
        return {}
    live = edge.Filter(must=[edge.FieldCondition(key="state", match=edge.MatchValue("live"))])

    def top(shard: edge.EdgeShard, query: list[float], *, exact: bool) -> set[str]:
        request = edge.QueryRequest(
            limit=10,
            query=edge.Query.Nearest(query, using="dense"),
            filter=live,
            params=edge.SearchParams(exact=True) if exact else convert.DENSE_SEARCH,
        )
        return {str(point.id) for point in shard.query(request)}

    found = 0
    with engine._borrow(INDEX) as shard:
        segments = shard.info().segments_count
        for vector in unit_rows(rng, queries):
            query = vector.tolist()
            found += len(top(shard, query, exact=False) & top(shard, query, exact=True))
    return {"segments": segments, "recall_at_10": found / (10 * queries)}


def optimize_seconds() -> float:
    return sum(
        sample.value
        for family in metrics.STORE_OPTIMIZE_SECONDS.collect()
        for sample in family.samples
        if sample.name.endswith("_sum")
    )


def settle(store: VectorStore) -> tuple[float, float]:
    """Run the optimizer on what is still pending (Edge); return its wall and CPU seconds
    (CPU time of the whole process, all of Edge's indexing threads: on a busy machine the
    wall time mostly measures the wait for a core)."""
    engine = store.engine
    if not isinstance(engine, EdgeEngine):
        return 0.0, 0.0
    cpu = time.process_time()
    wall = engine.optimizer.run_once(INDEX)  # clears what the background thread has due
    return wall, time.process_time() - cpu


def reused_records(
    pool: list[ChunkRecord], rng: np.random.Generator, start: int, count: int
) -> list[ChunkRecord]:
    """`count` chunks from `start` on, with new vectors and documents but the texts (and
    keyword vectors) of earlier chunks: making each new text costs ~0.7 ms of CPU, which is
    what kept a million-chunk run from finishing beside other work."""
    vectors = unit_rows(rng, count)
    return [
        dataclasses.replace(
            pool[(start + row) % len(pool)],
            document_id=f"doc-{(start + row) // CHUNKS_PER_DOCUMENT}",
            chunk_index=(start + row) % CHUNKS_PER_DOCUMENT,
            dense=vectors[row],
        )
        for row in range(count)
    ]


def fill(store: VectorStore, size: int, rng: np.random.Generator, vocabulary: list[str]) -> float:
    """Write `size` chunks and make them live; return the seconds spent writing. Chunks past
    `FRESH_TEXTS` reuse the texts of the first `TEXT_POOL` (each text then appears once per
    `TEXT_POOL` chunks: the keyword index holds as many postings, with repeated terms)."""
    writing = 0.0
    pool: list[ChunkRecord] = []
    for start in range(0, size, WRITE_SLICE):
        count = min(WRITE_SLICE, size - start)
        if start < FRESH_TEXTS:
            records = make_records(rng, vocabulary, start, count)
            pool.extend(records[: max(0, TEXT_POOL - len(pool))])
        else:
            records = reused_records(pool, rng, start, count)
        started = time.perf_counter()
        store.write_chunks(INDEX, records)
        # publish what was just written, as ingestion publishes each document after writing
        # it: a payload change to points already in an indexed segment copies them back into
        # the appendable one (one bulk publish at the end re-indexed all 100,000)
        store.engine.set_payload(INDEX, {"state": "live"}, fields_filter(state="staged"))
        writing += time.perf_counter() - started
    return writing


def search_once(
    store: VectorStore, embedder: PremadeEmbedder, request: SearchRequest
) -> SearchResponse:
    """One search as the API runs it: resolve the index (its config read), then search."""
    target = resolve_target(store, INDEX, embedder_for=lambda _config: embedder)
    return search(store, target, request)


def time_search(
    store: VectorStore, embedder: PremadeEmbedder, texts: list[str], budget: float
) -> dict[str, tuple[int, float, float]]:
    latencies = {}
    for label, fields in MODES:
        request = SearchRequest.model_validate({"query": texts[0], **fields})
        search_once(store, embedder, request)  # warm-up
        timings: list[float] = []
        deadline = time.perf_counter() + budget
        for text in texts:
            if len(timings) >= 3 and time.perf_counter() > deadline:
                break
            request = SearchRequest.model_validate({"query": text, "top_k": 10, **fields})
            started = time.perf_counter()
            response = search_once(store, embedder, request)
            timings.append((time.perf_counter() - started) * 1000)
            assert response.results, "a search found nothing"
        latencies[label] = (len(timings), percentile(timings, 50), percentile(timings, 95))
        print(f"    {label:<20} p50 {latencies[label][1]:8.1f} ms", flush=True)
    return latencies


def one_document(store: VectorStore, rng: np.random.Generator, vocabulary: list[str]) -> tuple:
    """Publish then retire a new 20-chunk version of doc-0; return both times in ms."""
    records = [
        record.__class__(**{**{f: getattr(record, f) for f in record.__slots__}, "version": 2})
        for record in make_records(rng, vocabulary, 0, 20)
    ]
    store.write_chunks(INDEX, records)
    started = time.perf_counter()
    store.publish(INDEX, "doc-0", 2)
    publish_ms = (time.perf_counter() - started) * 1000
    started = time.perf_counter()
    retired = store.retire(INDEX, "doc-0", keep_version=2)
    retire_ms = (time.perf_counter() - started) * 1000
    assert retired == 20, retired
    return publish_ms, retire_ms


def run(
    engine: str, size: int, queries: int, budget: float, seed: int, http: bool
) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    vocabulary = make_vocabulary(rng)
    embedder = PremadeEmbedder(provider="local", model="all-MiniLM-L6-v2")
    mid = vocabulary[200:5000]
    texts = [" ".join(rng.choice(mid, size=3)) for _ in range(queries)]
    for text, vector in zip(texts, unit_rows(rng, queries), strict=True):
        embedder.vectors[text] = vector
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        data_dir = Path(tmp)
        store = open_store(engine, data_dir)
        store.create_index(INDEX, CONFIG)
        tune_local_mode(store)
        before = optimize_seconds()
        writing = fill(store, size, rng, vocabulary)
        during = optimize_seconds() - before
        final, final_cpu = settle(store)
        print(f"  {engine} {size:,}: {size / writing:,.0f} points/s", flush=True)
        settled_memory = memory_status()
        facts = shard_facts(store, rng, min(queries, 20))
        print(f"    {facts} {settled_memory}", flush=True)
        publish_ms, retire_ms = one_document(store, rng, vocabulary)
        latencies = time_search(store, embedder, texts, budget)
        store.close()
        started = time.perf_counter()
        store = open_store(engine, data_dir)
        search_once(store, embedder, SearchRequest(query=texts[1], mode="hybrid"))
        restart = time.perf_counter() - started
        store.close()
        wal_mb = sum(directory_mb(wal) for wal in data_dir.glob("edge/*/shard/wal"))
        over_http = time_http(data_dir, texts) if http and engine == "edge" else {}
        disk_mb = directory_mb(data_dir)
    return {
        "engine": engine,
        "size": size,
        "points_per_s": size / writing,
        "optimize_during_s": during,
        "optimize_final_s": final,
        "optimize_final_cpu_s": final_cpu,
        "publish_ms": publish_ms,
        "retire_ms": retire_ms,
        "latencies": latencies,
        "restart_s": restart,
        "disk_mb": disk_mb,
        "wal_mb": wal_mb,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "settled_memory_mb": settled_memory,
        **facts,
        "http": over_http,
    }


def time_http(data_dir: Path, texts: list[str]) -> dict[str, Any]:
    """Search p50/p95 in ms through a real `docingest serve` on the filled store, each query's
    embedding already in the query cache (one untimed request per query first); and the
    memory of the `serve` process after them."""
    port = free_port()
    prefix = f"bench-{uuid.uuid4().hex[:8]}:"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("DOCINGEST_")},
        "DOCINGEST_DATA_DIR": str(data_dir),
        "DOCINGEST_PORT": str(port),
        "DOCINGEST_REDIS_URL": "redis://127.0.0.1:6379/15",
        "DOCINGEST_REDIS_KEY_PREFIX": prefix,
    }
    docingest = Path(sys.executable).with_name("docingest")
    server = subprocess.Popen([str(docingest), "serve"], env=env, stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1/indexes/{INDEX}/search"
    results: dict[str, Any] = {}
    try:
        with httpx.Client(timeout=120) as client:
            deadline = time.monotonic() + 180
            while True:
                try:
                    if client.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("serve did not start")
                time.sleep(0.5)
            for label, fields in MODES:
                for text in texts[:10]:  # embed and cache the queries
                    client.post(url, json={"query": text, **fields}).raise_for_status()
                timings = []
                for text in texts[:10] * 3:
                    started = time.perf_counter()
                    client.post(url, json={"query": text, "top_k": 10, **fields}).raise_for_status()
                    timings.append((time.perf_counter() - started) * 1000)
                results[label] = (percentile(timings, 50), percentile(timings, 95))
                print(f"    HTTP {label:<15} p50 {results[label][0]:8.1f} ms", flush=True)
        results["serve_memory_mb"] = memory_status(server.pid)
        print(f"    serve memory {results['serve_memory_mb']}", flush=True)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--engines", nargs="+", default=["edge", "local-mode"])
    parser.add_argument("--local-mode-max", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--budget", type=float, default=20.0)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--http", action="store_true", help="also search through docingest serve")
    args = parser.parse_args()
    import warnings

    warnings.filterwarnings("ignore", message="Local mode is not recommended")
    for size in args.sizes:
        for engine in args.engines:
            if engine == "local-mode" and size > args.local_mode_max:
                continue
            print(f"{engine} at {size:,} chunks (load {os.getloadavg()[0]:.1f})", flush=True)
            print(run(engine, size, args.queries, args.budget, args.seed, args.http), flush=True)


if __name__ == "__main__":
    main()
