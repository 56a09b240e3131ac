"""Contextual headers: does embedding each chunk with its document's title help retrieval?

Run: .venv/bin/python bench/bench_contextual_headers.py [--dataset scifact|cranfield]
         [--limit-docs N] [--chunk-size C] [--chunk-overlap O]

Each BEIR document is uploaded as a user would: a text file of its title line, a blank line
and its body (Cranfield's body, which repeats the title, without that copy), chunked by
`docingest.pipeline.chunking` at the index's chunk size, with the title as the upload's `title`
metadata. Two indexes in one in-memory store hold the same chunks and the same keyword
vectors; only the dense vectors differ: the chunk alone (today), or
`docingest.pipeline.indexing.chunk_vectors.embedding_text` (title and heading path, then the chunk).
Every test query goes through `docingest.pipeline.search.search` (top 10, one chunk per document) in
vector and hybrid mode; nDCG@10 and R@10 as in bench/_common.py. Results: BENCHMARKS.md,
"Contextual headers".
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import find_corpus, machine

from docingest.beir import load_test_set, read_corpus
from docingest.evaluate import mean_ndcg_and_recall, qrels_documents
from docingest.pipeline.chunking import Chunk, chunk_text
from docingest.pipeline.embedders.base import EmbeddingConfig, QueryCache
from docingest.pipeline.embedders.local import LocalEmbedder
from docingest.pipeline.indexing.chunk_vectors import embedding_text, keyword_text, text_hash
from docingest.pipeline.search import SearchMode, SearchRequest, SearchTarget, search
from docingest.pipeline.settings import Settings
from docingest.pipeline.sparse import average_length, encode_document
from docingest.pipeline.store import ChunkRecord, DocumentFields, IndexConfig, VectorStore

MODES: tuple[SearchMode, ...] = ("vector", "hybrid")


def load(folder: Path, limit_docs: int | None) -> tuple[list[dict[str, Any]], dict, dict]:
    docs = list(read_corpus(folder / "corpus.jsonl"))
    test = load_test_set(folder)
    if limit_docs is not None:  # every relevant document, then distractors in corpus order
        judged = qrels_documents(test.qrels)
        others = [doc["_id"] for doc in docs if doc["_id"] not in judged]
        kept = judged | set(others[: max(limit_docs - len(judged), 0)])
        docs = [doc for doc in docs if doc["_id"] in kept]
    return docs, test.queries, test.qrels


def document_file(doc: dict[str, str]) -> tuple[str, str]:
    """Return (title, the text a user would upload: title line, blank line, body)."""
    title, body = doc["title"].strip(), doc["text"].strip()
    if title and body.startswith(title):  # Cranfield's body opens with its title
        body = body[len(title) :].strip()
    return title, f"{title}\n\n{body}" if title else body


def build(
    store: VectorStore,
    name: str,
    chunked: list[tuple[str, str, list[Chunk]]],
    embedder: LocalEmbedder,
    *,
    headers: bool,
    avg_len: float,
) -> float:
    started = time.perf_counter()
    config = IndexConfig(
        embedding=EmbeddingConfig(provider="local", model="all-MiniLM-L6-v2", dimensions=384),
        contextual_headers=headers,
    )
    store.create_index(name, config)
    texts = [
        embedding_text(chunk, title) if headers else chunk.text
        for _, title, chunks in chunked
        for chunk in chunks
    ]
    vectors = iter(embedder.embed_documents(texts))
    records = []
    for doc_id, _, chunks in chunked:
        fields = DocumentFields(
            filename=f"{doc_id}.txt", format="txt", content_sha256=None, pages=None,
            words=None, chunk_count=len(chunks),
        )  # fmt: skip
        for chunk in chunks:
            records.append(
                ChunkRecord(
                    document_id=doc_id,
                    version=1,
                    chunk_index=chunk.index,
                    text=chunk.text,
                    text_hash=text_hash(chunk.text),
                    start=chunk.start,
                    end=chunk.end,
                    page_start=None,
                    page_end=None,
                    headings=list(chunk.headings),
                    dense=next(vectors),
                    sparse=encode_document(keyword_text(chunk), avg_len=avg_len),
                    document=fields,
                    gap=chunk.gap,
                )  # fmt: skip
            )
    store.write_chunks(name, records)
    for doc_id, _, _ in chunked:
        store.publish(name, doc_id, 1)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", choices=["scifact", "cranfield"], default="scifact")
    parser.add_argument("--limit-docs", type=int)
    parser.add_argument("--chunk-size", type=int, default=Settings().chunk_size)
    parser.add_argument("--chunk-overlap", type=int, default=Settings().chunk_overlap)
    args = parser.parse_args()
    retrieval = find_corpus() / "retrieval"
    folder = retrieval / "scifact" if args.dataset == "scifact" else retrieval / "cranfield/beir"
    docs, queries, qrels = load(folder, args.limit_docs)
    chunked = []
    for doc in docs:
        title, text = document_file(doc)
        chunks = chunk_text(text, chunk_size=args.chunk_size, chunk_overlap=args.chunk_overlap)
        chunked.append((doc["_id"], title, chunks))
    count = sum(len(chunks) for _, _, chunks in chunked)
    print(f"{machine()}; load average {os.getloadavg()[0]:.1f}")
    print(f"{args.dataset}: {len(docs)} documents, {count} chunks of {args.chunk_size}/"
          f"{args.chunk_overlap} characters, {len(queries)} queries")  # fmt: skip
    embedder = LocalEmbedder.load()
    avg_len = average_length(args.chunk_size, "characters")
    cache = QueryCache(4096)
    with VectorStore.open(Settings(qdrant_url=":memory:")) as store:
        for headers in (False, True):
            name = "headers" if headers else "plain"
            seconds = build(store, name, chunked, embedder, headers=headers, avg_len=avg_len)
            for mode in MODES:
                rankings = {}
                for query_id, text in queries.items():
                    request = SearchRequest(
                        query=text, top_k=10, mode=mode, max_chunks_per_document=1, excerpt=False
                    )
                    response = search(
                        store, SearchTarget(name, embedder), request, query_cache=cache
                    )
                    rankings[query_id] = [result.document_id for result in response.results]
                ndcg, recall = mean_ndcg_and_recall(rankings, qrels)
                print(f"headers={str(headers).lower():5} {mode:7} nDCG@10 {ndcg:.4f} "
                      f"R@10 {recall:.4f}  (built in {seconds:.0f} s)")  # fmt: skip
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
