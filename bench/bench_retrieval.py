"""Retrieval quality and speed of the local embedding model on the public BEIR-layout sets.

Run: .venv/bin/python bench/bench_retrieval.py [--dataset scifact|cranfield]
         [--max-seq-length N [N ...]] [--limit-docs N] [--threads N]

For each dataset under `<corpus>/retrieval` (SciFact; Cranfield in `cranfield/beir`): embed
"title text" of every document with `LocalEmbedder.embed_documents` (one call, so inputs are
sorted by length and padded per batch as in the service), embed each test query alone with
`embed_query`, rank all documents by exact cosine similarity in numpy and score the top 10.

- nDCG@10 as trec_eval / BEIR compute it (`docingest.evaluate`): gain = graded relevance
  (linear), log2 discount, ideal DCG from every judged-relevant document of the query.
  (`bm25_sanity_check.py` uses 2^rel - 1 gains, which differ on Cranfield's graded judgments,
  not on SciFact's binary ones.)
- R@10: relevant documents (score > 0) in the top 10 / relevant documents of the query.
- docs/s: documents embedded per second (wall clock, model already loaded); CPU ms/doc: process
  CPU time per document (steadier than wall clock when other processes share the cores);
  query ms: median latency of one `embed_query`; load: 1-minute load average after the run.
- BM25: the corpus's `bm25_sanity_check.py` logic (k1 0.9, b 0.4, [a-z0-9]+ tokens, no
  stemming), scored with the same metric code; RRF: reciprocal rank fusion (k = 60) of the
  BM25 and dense top 100, for reference.

`--limit-docs N` keeps every document judged relevant to a test query, then fills up to N
documents in corpus order: fewer distractors, so scores are higher than on the full set and only
comparable between runs of the same subset.
"""

from __future__ import annotations

import argparse
import collections
import math
import os
import re
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import find_corpus, machine

from docingest.beir import load_test_set, read_corpus
from docingest.evaluate import mean_ndcg_and_recall, qrels_documents
from docingest.pipeline.embedders.local import DEFAULT_MAX_SEQ_LENGTH, LocalEmbedder

DATASETS = {"scifact": "scifact", "cranfield": "cranfield/beir"}
TOP_K = 10
RRF_K = 60
RRF_DEPTH = 100


@dataclass
class Dataset:
    name: str
    doc_ids: list[str]
    doc_texts: list[str]
    queries: dict[str, str]  # test queries only
    qrels: dict[str, dict[str, int]]  # query id -> doc id -> graded relevance


def load_dataset(name: str, root: Path, limit_docs: int | None) -> Dataset:
    folder = root / DATASETS[name]
    docs = list(read_corpus(folder / "corpus.jsonl"))
    test = load_test_set(folder)
    qrels, queries = test.qrels, test.queries
    if limit_docs is not None:
        judged = qrels_documents(qrels)
        judged_docs = [doc for doc in docs if doc["_id"] in judged][:limit_docs]
        others = [doc for doc in docs if doc["_id"] not in judged]
        kept = judged_docs + others[: limit_docs - len(judged_docs)]
        kept_ids = {doc["_id"] for doc in kept}
        docs = [doc for doc in docs if doc["_id"] in kept_ids]
        qrels = {
            query_id: {doc_id: s for doc_id, s in judgments.items() if doc_id in kept_ids}
            for query_id, judgments in qrels.items()
        }
        qrels = {q: j for q, j in qrels.items() if j}  # queries left with a relevant document
        queries = {q: text for q, text in queries.items() if q in qrels}
    return Dataset(
        name=name,
        doc_ids=[doc["_id"] for doc in docs],
        doc_texts=[f"{doc['title']} {doc['text']}".strip() for doc in docs],
        queries=queries,
        qrels=qrels,
    )


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def bm25_rankings(
    data: Dataset, depth: int, k1: float = 0.9, b: float = 0.4
) -> dict[str, list[str]]:
    """Rank with plain BM25, as the corpus's bm25_sanity_check.py does."""
    frequencies = [collections.Counter(_words(text)) for text in data.doc_texts]
    lengths = [sum(counts.values()) for counts in frequencies]
    average = sum(lengths) / len(lengths)
    postings: dict[str, list[tuple[int, int]]] = collections.defaultdict(list)
    for index, counts in enumerate(frequencies):
        for word, count in counts.items():
            postings[word].append((index, count))
    rankings = {}
    for query_id, text in data.queries.items():
        scores: dict[int, float] = collections.defaultdict(float)
        for word in set(_words(text)):
            if word not in postings:
                continue
            df = len(postings[word])
            idf = math.log(1 + (len(lengths) - df + 0.5) / (df + 0.5))
            for index, count in postings[word]:
                norm = k1 * (1 - b + b * lengths[index] / average)
                scores[index] += idf * count * (k1 + 1) / (count + norm)
        best = sorted(scores, key=scores.__getitem__, reverse=True)[:depth]
        rankings[query_id] = [data.doc_ids[index] for index in best]
    return rankings


def rrf(*rankings: dict[str, list[str]]) -> dict[str, list[str]]:
    fused = {}
    for query_id in rankings[0]:
        scores: dict[str, float] = collections.defaultdict(float)
        for ranking in rankings:
            for rank, doc_id in enumerate(ranking.get(query_id, [])[:RRF_DEPTH]):
                scores[doc_id] += 1 / (RRF_K + rank + 1)
        fused[query_id] = sorted(scores, key=scores.__getitem__, reverse=True)
    return fused


@dataclass
class DenseRun:
    rankings: dict[str, list[str]]
    docs_per_second: float
    cpu_ms_per_doc: float
    seconds: float
    query_ms: float


def dense_run(data: Dataset, embedder: LocalEmbedder) -> DenseRun:
    total = len(data.doc_texts)
    step = max(total // 10, 1)
    reported = [0]

    def progress(done: int) -> None:
        if done - reported[0] >= step or done == total:
            reported[0] = done
            print(f"  {data.name} @{embedder.max_seq_length}: {done}/{total}", file=sys.stderr)

    started, cpu_started = time.perf_counter(), time.process_time()
    doc_vectors = embedder.embed_documents(data.doc_texts, on_progress=progress)
    seconds = time.perf_counter() - started
    cpu_ms = (time.process_time() - cpu_started) * 1000 / total
    query_ids = list(data.queries)
    latencies, query_vectors = [], []
    for query_id in query_ids:
        began = time.perf_counter()
        query_vectors.append(embedder.embed_query(data.queries[query_id]))
        latencies.append(time.perf_counter() - began)
    similarity = np.stack(query_vectors) @ doc_vectors.T  # cosine: all vectors are unit length
    depth = min(RRF_DEPTH, len(data.doc_ids))
    top = np.argpartition(-similarity, depth - 1, axis=1)[:, :depth]
    rankings = {}
    for row, query_id in enumerate(query_ids):
        order = top[row][np.argsort(-similarity[row, top[row]], kind="stable")]
        rankings[query_id] = [data.doc_ids[index] for index in order]
    query_ms = statistics.median(latencies) * 1000
    return DenseRun(rankings, total / seconds, cpu_ms, seconds, query_ms)


COLUMNS = [
    "dataset", "docs", "queries", "retriever", "nDCG@10", "R@10",
    "docs/s", "CPU ms/doc", "embed s", "query ms", "load",
]  # fmt: skip


def row(data: Dataset, retriever: str, scores: tuple[float, float], *timing: str) -> str:
    cells = [data.name, f"{len(data.doc_ids):,}", str(len(data.queries)), retriever]
    cells += [f"{score:.3f}" for score in scores]
    cells += list(timing) or [""] * 5
    return "| " + " | ".join(cells) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=sorted(DATASETS), action="append")
    parser.add_argument("--max-seq-length", type=int, nargs="+", default=[DEFAULT_MAX_SEQ_LENGTH])
    parser.add_argument("--limit-docs", type=int, default=None)
    parser.add_argument("--threads", type=int, default=0, help="0: one per CPU")
    args = parser.parse_args()
    root = find_corpus() / "retrieval"
    print(machine())
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}\n")
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    for name in args.dataset or sorted(DATASETS, reverse=True):
        data = load_dataset(name, root, args.limit_docs)
        bm25 = bm25_rankings(data, RRF_DEPTH)
        print(row(data, "BM25 (no stemming)", mean_ndcg_and_recall(bm25, data.qrels)), flush=True)
        for max_seq_length in args.max_seq_length:
            embedder = LocalEmbedder.load(threads=args.threads, max_seq_length=max_seq_length)
            run = dense_run(data, embedder)
            timing = (
                f"{run.docs_per_second:.1f}",
                f"{run.cpu_ms_per_doc:.0f}",
                f"{run.seconds:.0f}",
                f"{run.query_ms:.1f}",
                f"{os.getloadavg()[0]:.1f}",
            )
            scores = mean_ndcg_and_recall(run.rankings, data.qrels)
            print(row(data, f"MiniLM int8 @{max_seq_length}", scores, *timing), flush=True)
            fused = mean_ndcg_and_recall(rrf(bm25, run.rankings), data.qrels)
            print(row(data, f"RRF(BM25, MiniLM @{max_seq_length})", fused), flush=True)


if __name__ == "__main__":
    main()
