"""Measure a real re-ranker on SciFact: first stage alone, rerank `replace`, rerank `rrf`.

Run: DOCINGEST_RERANK_PROVIDER=cohere DOCINGEST_RERANK_URL=https://api.cohere.com/v2 \
     DOCINGEST_RERANK_API_KEY=... DOCINGEST_RERANK_MODEL=rerank-v3.5 \
     .venv/bin/python bench/bench_rerank_variants.py [--mode keyword|hybrid] [--candidates 50]
         [--limit-docs N] [--limit-queries N]

No re-ranking model runs here, so BENCHMARKS.md, "Rerank: replace or fuse", could only
simulate one; this script is for anyone with an endpoint (Cohere, Jina, Voyage, a vLLM, TEI or
Infinity server, or a chat model with `llm`). It takes the rerank settings from the
environment like the service, stores SciFact's abstracts (title as the document title, one
chunk each) in a temporary embedded store, and runs every test query through
`docingest.pipeline.search.search` three times: rerank off, on with `fusion: replace`, and on with
`fusion: rrf`, each with top_k 10 and the same candidates. Keyword mode needs no embedding
(the dense vectors are random and unused); `--mode hybrid` embeds with the local model (about
20 minutes for the 5,183 abstracts on 2 CPUs). Prints nDCG@10 and R@10 (BEIR's definitions)
per variant, the re-ranker's failures, and its median time per query.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import find_corpus, machine
from bench_retrieval import load_dataset

from docingest.evaluate import mean_ndcg_and_recall
from docingest.pipeline.embedders.base import EmbeddingConfig
from docingest.pipeline.rerank import RerankDefaults, Reranker, RerankSpec, build_reranker
from docingest.pipeline.search import Reranking, SearchTarget, search
from docingest.pipeline.search.request import SearchRequest
from docingest.pipeline.settings import Settings
from docingest.pipeline.sparse import encode_document
from docingest.pipeline.store import ChunkRecord, DocumentFields, IndexConfig, VectorStore
from docingest.pipeline.store.requests import fields_filter

INDEX = "scifact"
DIMENSIONS = 384


class RandomEmbedder:
    provider = "local"
    model = "bench-random"
    dimensions = DIMENSIONS
    max_batch = 1

    def embed_query(self, text: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
        row = np.random.default_rng(seed).standard_normal(DIMENSIONS).astype(np.float32)
        return row / np.linalg.norm(row)

    def embed_documents(self, texts: list[str], on_progress: object = None) -> np.ndarray:
        return np.stack([self.embed_query(text) for text in texts])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["keyword", "hybrid"], default="keyword")
    parser.add_argument("--candidates", type=int, default=50)
    parser.add_argument("--limit-docs", type=int)
    parser.add_argument("--limit-queries", type=int)
    args = parser.parse_args()
    settings = Settings()
    if not settings.rerank_provider:
        sys.exit("set DOCINGEST_RERANK_PROVIDER and DOCINGEST_RERANK_URL (see the docstring)")
    data = load_dataset("scifact", find_corpus() / "retrieval", args.limit_docs)
    titles = dict(zip(data.doc_ids, data.doc_texts, strict=True))
    queries = list(data.queries.items())[: args.limit_queries]
    if args.mode == "hybrid":
        from docingest.pipeline.embedders.local import LocalEmbedder

        embedder: object = LocalEmbedder.load()
    else:
        embedder = RandomEmbedder()
    vectors = embedder.embed_documents(data.doc_texts)  # type: ignore[attr-defined]
    built: list[Reranker] = []

    def reranker_for(spec: RerankSpec) -> Reranker:
        if not built:
            built.append(build_reranker(spec.provider, spec.model, settings=settings))
        return built[0]

    reranking = Reranking(
        defaults=RerankDefaults.from_settings(settings),
        reranker_for=reranker_for,
        deadline_seconds=settings.rerank_deadline_seconds,
    )
    with tempfile.TemporaryDirectory() as data_dir:
        store = VectorStore.open(Settings(data_dir=Path(data_dir)))
        store.create_index(
            INDEX,
            IndexConfig(embedding=EmbeddingConfig(model="bench", dimensions=DIMENSIONS)),
        )
        records = [
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
                dense=vectors[i],
                sparse=encode_document(text),
                document=DocumentFields(
                    filename=None, format="text", content_sha256=None, pages=None,
                    words=None, chunk_count=1,
                ),
            )
            for i, (doc_id, text) in enumerate(titles.items())
        ]  # fmt: skip
        for start in range(0, len(records), 2000):
            store.write_chunks(INDEX, records[start : start + 2000])
        store.engine.set_payload(INDEX, {"state": "live"}, fields_filter(state="staged"))
        target = SearchTarget(index=INDEX, embedder=embedder)  # type: ignore[arg-type]
        variants = {"first stage": False, "rerank replace": "replace", "rerank rrf": "rrf"}
        rankings: dict[str, dict[str, list[str]]] = {name: {} for name in variants}
        failures: dict[str, int] = dict.fromkeys(variants, 0)
        seconds: list[float] = []
        for query_id, text in queries:
            for name, fusion in variants.items():
                rerank: object = (
                    False if fusion is False else {"candidates": args.candidates, "fusion": fusion}
                )
                request = SearchRequest.model_validate(
                    {"query": text, "top_k": 10, "mode": args.mode, "rerank": rerank}
                )
                started = time.perf_counter()
                response = search(store, target, request, reranking=reranking)
                if fusion == "replace":
                    seconds.append(time.perf_counter() - started)
                if response.rerank_error is not None:
                    failures[name] += 1
                rankings[name][query_id] = [r.document_id for r in response.results]
        store.close()
    for reranker in built:
        reranker.close()
    qrels = {q: data.qrels[q] for q, _ in queries}
    print(
        f"# {machine()}, load {os.getloadavg()[0]:.1f}; {len(queries)} queries, "
        f"{len(titles)} documents, mode {args.mode}, {args.candidates} candidates"
    )
    print(
        f"# re-ranker: {settings.rerank_provider} {settings.rerank_model} at "
        f"{settings.rerank_url}; median {statistics.median(seconds) * 1000:.0f} ms per search"
    )
    print("| variant | nDCG@10 | R@10 | rerank failures |")
    print("|---|---:|---:|---:|")
    for name in variants:
        ndcg, recall = mean_ndcg_and_recall(rankings[name], qrels)
        print(f"| {name} | {ndcg:.3f} | {recall:.3f} | {failures[name]} |")


if __name__ == "__main__":
    main()
