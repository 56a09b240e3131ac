"""Search latency of `docingest.pipeline.search.search` per mode, in qdrant-client local mode.

Run: .venv/bin/python bench/bench_search_latency.py [--sizes 10000 100000] [--queries 50]
     [--write]

For each size a fresh local store (a directory, as the embedded default uses) is filled with
synthetic chunks: random unit 384-dimensional vectors, and ~150-word texts drawn from a
Zipf-distributed vocabulary of 30,000 made-up words (word frequencies like real text, so the
keyword vectors have realistic lengths and IDF spread), 20 chunks per document, each with user
metadata. Writing goes through `VectorStore.write_chunks` and is timed; one `publish` is timed
too, then the rest is made live in one call.

Latency is measured around `resolve_target()` and `search()` (reading the index's config,
filter parsing, both Qdrant queries, fusion, version consistency and result building), as the
API runs them for each request, but not the query embedding: queries carry pre-made random
unit vectors, looked up by text, and 3-word keyword queries of mid-frequency words. top_k=10.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from docingest.pipeline.embedders.base import EmbeddingConfig, ProgressCallback  # noqa: E402
from docingest.pipeline.search import SearchRequest, resolve_target, search  # noqa: E402
from docingest.pipeline.settings import Settings  # noqa: E402
from docingest.pipeline.sparse import encode_document  # noqa: E402
from docingest.pipeline.store import ChunkRecord, DocumentFields, IndexConfig, VectorStore  # noqa: E402
from docingest.pipeline.store.requests import fields_filter  # noqa: E402

DIMS = 384
VOCABULARY = 30_000
WORDS_PER_CHUNK = 150
CHUNKS_PER_DOCUMENT = 20
INDEX = "bench"
MIN_QUERIES = 3
BEGIN = "<!-- bench_search_latency.py: begin -->"
END = "<!-- bench_search_latency.py: end -->"
MODES: list[tuple[str, dict[str, Any]]] = [
    ("vector", {"mode": "vector"}),
    ("keyword", {"mode": "keyword"}),
    ("hybrid", {"mode": "hybrid"}),
    ("hybrid + filter", {"mode": "hybrid", "filter": {"dept": "legal"}}),
]


@dataclass
class PremadeEmbedder:
    """Returns the vector made for each query text beforehand: no model time is measured."""

    vectors: dict[str, np.ndarray] = field(default_factory=dict)
    provider: str = "local"
    model: str = "bench-random"
    dimensions: int = DIMS
    max_batch: int = 1

    def embed_query(self, text: str) -> np.ndarray:
        return self.vectors[text]

    def embed_documents(
        self, texts: Sequence[str], on_progress: ProgressCallback | None = None
    ) -> np.ndarray:
        raise NotImplementedError("the bench embeds no documents")


def unit_rows(rng: np.random.Generator, count: int) -> np.ndarray:
    rows = rng.standard_normal((count, DIMS), dtype=np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def make_vocabulary(rng: np.random.Generator) -> list[str]:
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words: set[str] = set()
    while len(words) < VOCABULARY:
        words.add("".join(rng.choice(letters, size=int(rng.integers(4, 10)))))
    return sorted(
        words, key=lambda word: hashlib.md5(word.encode(), usedforsecurity=False).digest()
    )


def zipf_probabilities() -> np.ndarray:
    weights = 1.0 / np.arange(1, VOCABULARY + 1) ** 1.07
    return weights / weights.sum()


def make_records(
    rng: np.random.Generator, vocabulary: list[str], start: int, count: int
) -> list[ChunkRecord]:
    words = np.array(vocabulary)
    picks = rng.choice(VOCABULARY, size=(count, WORDS_PER_CHUNK), p=zipf_probabilities())
    vectors = unit_rows(rng, count)
    records = []
    for row in range(count):
        number = start + row
        text = " ".join(words[picks[row]])
        document = number // CHUNKS_PER_DOCUMENT
        fields = DocumentFields(
            filename=f"doc-{document}.pdf",
            format="pdf",
            content_sha256=None,
            pages=10,
            words=WORDS_PER_CHUNK * CHUNKS_PER_DOCUMENT,
            chunk_count=CHUNKS_PER_DOCUMENT,
            metadata={"dept": ["legal", "ops", "sales", "hr"][document % 4], "tags": ["x"]},
        )
        records.append(
            ChunkRecord(
                document_id=f"doc-{document}",
                version=1,
                chunk_index=number % CHUNKS_PER_DOCUMENT,
                text=text,
                text_hash=hashlib.sha256(text.encode()).hexdigest(),
                start=0,
                end=len(text),
                page_start=1,
                page_end=1,
                headings=["Heading"],
                dense=vectors[row],
                sparse=encode_document(text),
                document=fields,
            )
        )
    return records


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.array(values), q))


def run_size(size: int, queries: int, budget: float, seed: int) -> dict[str, object]:
    rng = np.random.default_rng(seed)
    vocabulary = make_vocabulary(rng)
    with tempfile.TemporaryDirectory() as data_dir:
        store = VectorStore.open(Settings(data_dir=Path(data_dir)))
        config = IndexConfig(embedding=EmbeddingConfig(model="bench-random", dimensions=DIMS))
        store.create_index(INDEX, config)
        started = time.perf_counter()
        encode_seconds = 0.0
        for start in range(0, size, 5000):
            t0 = time.perf_counter()
            records = make_records(rng, vocabulary, start, min(5000, size - start))
            encode_seconds += time.perf_counter() - t0
            store.write_chunks(INDEX, records)
        write_seconds = time.perf_counter() - started - encode_seconds
        t0 = time.perf_counter()
        store.publish(INDEX, "doc-0", 1)
        publish_one = time.perf_counter() - t0
        t0 = time.perf_counter()
        # everything live at once (bench only)
        store.engine.set_payload(INDEX, {"state": "live"}, fields_filter(state="staged"))
        publish_all = time.perf_counter() - t0

        embedder = PremadeEmbedder()
        mid = vocabulary[200:5000]
        texts = [" ".join(rng.choice(mid, size=3)) for _ in range(queries)]
        for text, vector in zip(texts, unit_rows(rng, queries), strict=True):
            embedder.vectors[text] = vector
        latencies: dict[str, tuple[int, float, float, float]] = {}
        for label, fields in MODES:
            # one warm-up query, then queries until `queries` ran or the budget is spent
            search(
                store,
                resolve_target(store, INDEX, embedder_for=lambda _config: embedder),
                SearchRequest.model_validate({"query": texts[0], **fields}),
            )
            timings: list[float] = []
            budget_end = time.perf_counter() + budget
            for text in texts:
                if len(timings) >= MIN_QUERIES and time.perf_counter() > budget_end:
                    break
                request = SearchRequest.model_validate({"query": text, "top_k": 10, **fields})
                t0 = time.perf_counter()
                target = resolve_target(store, INDEX, embedder_for=lambda _config: embedder)
                response = search(store, target, request)
                timings.append((time.perf_counter() - t0) * 1000)
                assert response.results, "a search found nothing"
            latencies[label] = (
                len(timings),
                percentile(timings, 50),
                percentile(timings, 95),
                statistics.fmean(timings),
            )
            n, p50, p95, _ = latencies[label]
            print(
                f"  {size:>7} {label:<16} n={n:<3} p50 {p50:8.1f} ms  p95 {p95:8.1f} ms", flush=True
            )
        store.close()
    return {
        "size": size,
        "write_s": write_seconds,
        "publish_one_ms": publish_one * 1000,
        "publish_all_s": publish_all,
        "latencies": latencies,
    }


def report(results: list[dict[str, object]], queries: int, command: str) -> str:
    cpu = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        names = [line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
                 if line.startswith("model name")]  # fmt: skip
        cpu = names[0] if names else cpu
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    lines = [
        f"Measured {datetime.now(UTC):%Y-%m-%d} on {os.cpu_count()} vCPU ({cpu}), "
        f"{memory:.0f} GB RAM, Python "
        f"{platform.python_version()}, qdrant-client local mode (a directory, WAL journal). "
        f"Command: `{command}`. Up to {queries} queries per mode (fewer where the time "
        "budget ran out; p95 of a handful of queries is close to their maximum), top_k=10, "
        "query embedding excluded (pre-made random unit vectors; 3-word keyword queries).",
        "",
        "| chunks | mode | queries | p50 ms | p95 ms | mean ms |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for result in results:
        latencies = result["latencies"]
        assert isinstance(latencies, dict)
        for label, (n, p50, p95, mean) in latencies.items():
            lines.append(
                f"| {result['size']:,} | {label} | {n} | {p50:.0f} | {p95:.0f} | {mean:.0f} |"
            )
    lines += [
        "",
        "| chunks | write_chunks total | publish of one 20-chunk document | bulk publish |",
        "|---:|---:|---:|---:|",
    ]
    for result in results:
        lines.append(
            f"| {result['size']:,} | {result['write_s']:.1f} s | {result['publish_one_ms']:.0f} ms "
            f"| {result['publish_all_s']:.1f} s |"
        )
    return "\n".join(lines)


def write_section(text: str) -> None:
    """Put the report between our markers in BENCHMARKS.md, leaving other sections alone."""
    path = ROOT / "BENCHMARKS.md"
    current = path.read_text(encoding="utf-8") if path.exists() else ""
    block = f"{BEGIN}\n{text}\n{END}"
    if BEGIN in current and END in current:
        head, rest = current.split(BEGIN, 1)
        current = head + block + rest.split(END, 1)[1]
    else:
        current = current.rstrip("\n") + "\n\n## Search latency\n\n" + block + "\n"
    path.write_text(current, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument(
        "--budget", type=float, default=30.0, help="seconds per mode and size, after 3 queries"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--write", action="store_true", help="update BENCHMARKS.md")
    args = parser.parse_args()
    # qdrant-client warns once that local mode is not meant for >20,000 points: that is measured
    warnings.filterwarnings("ignore", message="Local mode is not recommended")
    results = []
    for size in args.sizes:
        print(f"building {size:,} chunks...", flush=True)
        results.append(run_size(size, args.queries, args.budget, args.seed))
    command = "bench/bench_search_latency.py " + " ".join(sys.argv[1:])
    text = report(results, args.queries, command.strip())
    print(text)
    if args.write:
        write_section(text)


if __name__ == "__main__":
    main()
