"""Hybrid fusion choices re-played offline on the candidate lists of a running service.

Run: .venv/bin/python bench/bench_fusion.py URL INDEX [--dataset DIR] [--split train]
         [--first-documents N] [--cache FILE]

For each judged query (of `--split`; only those whose relevant documents are all among the
corpus's first N records, for an index loaded part-way by `docingest eval --ingest`), fetches
what hybrid search fuses for top_k 10 through the API: the 50 best chunks by vector and by
keyword (`mode` vector / keyword, top_k 50, no cap), and the service's own hybrid answer (top
10, one chunk per document). Then ranks documents by each fusion below and reports nDCG@10,
R@10, and the queries each wins or loses against the service's answer. "chunk RRF" must equal
the service's answer (a check that the re-play is faithful). Tune on `train`, report on `test`.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _common import find_corpus  # noqa: E402

from docingest.beir import load_test_set, read_corpus  # noqa: E402
from docingest.evaluate import ndcg_at, recall_at  # noqa: E402

Hit = tuple[str, int, float]  # document id, chunk index, score
Lists = dict[str, list[Hit]]


def documents(hits: list[Hit]) -> list[str]:
    """Documents in the order of their best chunk."""
    return list(dict.fromkeys(document for document, _, _ in hits))


def rrf(*rankings: list[str], k: int = 60) -> list[str]:
    scores: dict[str, float] = defaultdict(float)
    for ranking in rankings:
        for rank, item in enumerate(ranking):
            scores[item] += 1.0 / (k + rank)
    return sorted(scores, key=lambda item: -scores[item])  # stable: first seen wins ties


def chunk_rrf(lists: Lists) -> list[str]:
    """Today's fusion: RRF over chunks, then each document's best fused chunk."""
    keys = [[f"{d}\x1f{c}" for d, c, _ in lists[mode]] for mode in ("vector", "keyword")]
    return list(dict.fromkeys(key.split("\x1f")[0] for key in rrf(*keys)))


def weighted_chunk_rrf(lists: Lists, keyword_weight: float, k: int = 60) -> list[str]:
    """Chunk RRF with the keyword list's terms weighted (the vector list's weight is 1)."""
    scores: dict[str, float] = defaultdict(float)
    for mode, weight in (("vector", 1.0), ("keyword", keyword_weight)):
        for rank, (document, chunk, _) in enumerate(lists[mode]):
            scores[f"{document}\x1f{chunk}"] += weight / (k + rank)
    ranked = sorted(scores, key=lambda key: -scores[key])
    return list(dict.fromkeys(key.split("\x1f")[0] for key in ranked))


def convex(lists: Lists, alpha: float) -> list[str]:
    """Convex combination of min-max normalised scores (Bruch et al., 2023): alpha * vector +
    (1 - alpha) * keyword per chunk, a chunk missing from a list scoring that list's 0."""
    scores: dict[str, float] = defaultdict(float)
    for mode, weight in (("vector", alpha), ("keyword", 1.0 - alpha)):
        hits = lists[mode]
        if not hits:
            continue
        top, bottom = max(h[2] for h in hits), min(h[2] for h in hits)
        span = (top - bottom) or 1.0
        for document, chunk, score in hits:
            scores[f"{document}\x1f{chunk}"] += weight * (score - bottom) / span
    ranked = sorted(scores, key=lambda key: -scores[key])
    return list(dict.fromkeys(key.split("\x1f")[0] for key in ranked))


def convex_max(lists: Lists, alpha: float) -> list[str]:
    """As `convex`, but each list's scores divided by its best (its floor taken as 0, as a
    cosine's and a keyword score's natural floor): a weak list's best does not count as 1
    only because the others are weaker still."""
    scores: dict[str, float] = defaultdict(float)
    for mode, weight in (("vector", alpha), ("keyword", 1.0 - alpha)):
        hits = lists[mode]
        top = max((h[2] for h in hits), default=0.0)
        if top <= 0:
            continue
        for document, chunk, score in hits:
            scores[f"{document}\x1f{chunk}"] += weight * max(score, 0.0) / top
    ranked = sorted(scores, key=lambda key: -scores[key])
    return list(dict.fromkeys(key.split("\x1f")[0] for key in ranked))


def keyword_sum(lists: Lists) -> list[str]:
    scores: dict[str, float] = defaultdict(float)
    for document, _, score in lists["keyword"]:
        scores[document] += score
    return sorted(scores, key=lambda document: -scores[document])


FUSIONS: dict[str, Callable[[Lists], list[str]]] = {
    "vector alone": lambda lists: documents(lists["vector"]),
    "keyword alone": lambda lists: documents(lists["keyword"]),
    "chunk RRF (DOCINGEST_HYBRID_FUSION=rrf)": chunk_rrf,
    "document RRF": lambda lists: rrf(documents(lists["vector"]), documents(lists["keyword"])),
    "document RRF, k=20": lambda lists: rrf(
        documents(lists["vector"]), documents(lists["keyword"]), k=20
    ),
    "document RRF, keyword = sum of chunk scores": lambda lists: rrf(
        documents(lists["vector"]), keyword_sum(lists)
    ),
    **{
        f"chunk RRF, keyword weight {w}": functools.partial(weighted_chunk_rrf, keyword_weight=w)
        for w in (0.75, 1.5, 2.0)
    },
    **{
        f"convex, vector weight {a}{' (the default)' if a == 0.45 else ''}": functools.partial(
            convex, alpha=a
        )
        for a in (0.3, 0.35, 0.4, 0.45, 0.5, 0.6)
    },
    **{
        f"convex over each list's best, vector weight {a}": functools.partial(convex_max, alpha=a)
        for a in (0.4, 0.5, 0.6, 0.7)
    },
    "per-list cap, then chunk RRF": lambda lists: chunk_rrf(
        {
            mode: [hit for i, hit in enumerate(hits) if hit[0] not in documents(hits[:i])]
            for mode, hits in lists.items()
            if mode != "hybrid"
        }
    ),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("index")
    parser.add_argument("--dataset", type=Path, default=find_corpus() / "retrieval" / "scifact")
    parser.add_argument("--split", default="train")
    parser.add_argument("--first-documents", type=int)
    parser.add_argument("--cache", type=Path, help="keep the fetched lists in this JSON file")
    args = parser.parse_args()
    test = load_test_set(args.dataset, split=args.split)
    corpus = [str(record["_id"]) for record in read_corpus(args.dataset / "corpus.jsonl")]
    have = set(corpus[: args.first_documents] if args.first_documents else corpus)
    queries = [q for q in test.queries if set(test.qrels[q]) <= have]
    print(f"{len(queries)} {args.split} queries whose judged documents are all in the index")
    http = httpx.Client(base_url=args.url, timeout=120)
    lists: dict[str, Lists] = {}
    if args.cache and args.cache.exists():
        lists = {q: {m: [tuple(h) for h in hits] for m, hits in fetched.items()}
                 for q, fetched in json.loads(args.cache.read_text()).items()}  # fmt: skip
    for query in [q for q in queries if q not in lists]:
        fetched: Lists = {}
        for mode in ("vector", "keyword"):
            body = {"query": test.queries[query], "mode": mode, "top_k": 50}
            answer = http.post(f"/v1/indexes/{args.index}/search", json=body).json()
            fetched[mode] = [
                (h["document_id"], h["chunk_index"], h["score"]) for h in answer["results"]
            ]
        body = {"query": test.queries[query], "top_k": 10, "max_chunks_per_document": 1}
        answer = http.post(f"/v1/indexes/{args.index}/search", json=body).json()
        fetched["hybrid"] = [
            (h["document_id"], h["chunk_index"], h["score"]) for h in answer["results"]
        ]
        lists[query] = fetched
    if args.cache:
        args.cache.write_text(json.dumps(lists))
    served = {q: ndcg_at(documents(lists[q]["hybrid"]), test.qrels[q]) for q in queries}
    print("| fusion | nDCG@10 | R@10 | queries won / lost against the service |")
    print("|---|---:|---:|---:|")
    rows: list[tuple[str, Callable[[Lists], list[str]]]] = [
        ("the service's hybrid answer", lambda lists: documents(lists["hybrid"])),
        *FUSIONS.items(),
    ]
    for name, fusion in rows:
        rankings = {q: fusion(lists[q])[:10] for q in queries}
        per = {q: ndcg_at(rankings[q], test.qrels[q]) for q in queries}
        ndcg = sum(per.values()) / len(queries)
        recall = sum(recall_at(rankings[q], test.qrels[q], 10) for q in queries) / len(queries)
        won = sum(per[q] > served[q] + 1e-9 for q in queries)
        lost = sum(per[q] < served[q] - 1e-9 for q in queries)
        print(f"| {name} | {ndcg:.4f} | {recall:.4f} | +{won} / -{lost} |")


if __name__ == "__main__":
    main()
