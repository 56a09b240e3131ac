"""Measure retrieval quality of an index on a judged query set, through the service's API.

Each variant (a search mode, with or without rerank) runs every query twice: top 10 for the
figures at 10 and the latency (the search a user makes), and top 100 for recall@100 (a larger
top_k also widens each retriever's candidate list, which could move the top 10). Both ask for
one chunk per document, so a ranking is a ranking of documents, as the judgments are.

Metrics are the usual TREC definitions (as in `pytrec_eval`, which BEIR uses): nDCG@10 with
graded gains and log2 discounts, recall@k over the judged relevant documents, and MRR@10 (the
reciprocal rank of the first relevant document within the top 10, else 0).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from docingest import Client
from docingest.beir import Qrels, TestSet
from docingest.models import SearchMode

MODES: tuple[SearchMode, ...] = ("vector", "keyword", "hybrid")
SHOWN_QUERIES = 10
"""Queries listed per side in `wins`/`losses` (the largest differences first)."""


@dataclass(frozen=True)
class Variant:
    mode: SearchMode
    rerank: bool | None = None
    """None sends no `rerank` field (the index's default); True/False turn it on or off."""

    @property
    def name(self) -> str:
        if self.rerank is None:
            return self.mode
        return f"{self.mode}+rerank" if self.rerank else f"{self.mode}-rerank"


def ndcg_at(ranking: Sequence[str], relevant: dict[str, int], k: int = 10) -> float:
    dcg = sum(
        (2 ** relevant.get(doc, 0) - 1) / math.log2(rank + 2)
        for rank, doc in enumerate(ranking[:k])
    )
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum((2**gain - 1) / math.log2(rank + 2) for rank, gain in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at(ranking: Sequence[str], relevant: dict[str, int], k: int) -> float:
    if not relevant:
        return 0.0
    return len(set(ranking[:k]) & relevant.keys()) / len(relevant)


def mrr_at(ranking: Sequence[str], relevant: dict[str, int], k: int = 10) -> float:
    for rank, doc in enumerate(ranking[:k]):
        if doc in relevant:
            return 1.0 / (rank + 1)
    return 0.0


@dataclass
class VariantResult:
    variant: Variant
    per_query: dict[str, float] = field(default_factory=dict)
    """nDCG@10 per query id (what wins and losses compare)."""
    ndcg10: float = 0.0
    recall10: float = 0.0
    recall100: float = 0.0
    mrr10: float = 0.0
    latency_ms: dict[str, float] = field(default_factory=dict)
    """p50/p95 of the top-10 search as the client saw it, and the server's `took_ms` p50."""
    reranked: int = 0
    """Queries whose response said `reranked: true`."""
    wins: list[str] = field(default_factory=list)
    losses: list[str] = field(default_factory=list)
    """Against the baseline variant: query ids ahead/behind on nDCG@10, largest first."""
    win_count: int = 0
    loss_count: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            "variant": self.variant.name,
            "mode": self.variant.mode,
            "rerank": self.variant.rerank,
            "ndcg@10": round(self.ndcg10, 4),
            "recall@10": round(self.recall10, 4),
            "recall@100": round(self.recall100, 4),
            "mrr@10": round(self.mrr10, 4),
            "latency_ms": self.latency_ms,
            "reranked_queries": self.reranked,
            "wins": self.win_count,
            "losses": self.loss_count,
            "won_queries": self.wins,
            "lost_queries": self.losses,
        }


def run_variant(
    client: Client,
    index: str,
    test: TestSet,
    variant: Variant,
    *,
    on_query: Callable[[], None] = lambda: None,
) -> VariantResult:
    result = VariantResult(variant)
    client_ms: list[float] = []
    server_ms: list[float] = []
    sums = {"recall10": 0.0, "recall100": 0.0, "mrr10": 0.0}
    for qid, query in test.queries.items():
        relevant = test.qrels[qid]
        started = time.perf_counter()
        top10 = client.search(
            index, query, mode=variant.mode, top_k=10, max_chunks_per_document=1,
            rerank=variant.rerank,
        )  # fmt: skip
        client_ms.append((time.perf_counter() - started) * 1000)
        server_ms.append(top10.took_ms)
        result.reranked += top10.reranked
        ranking = [hit.document_id for hit in top10.results]
        top100 = client.search(
            index, query, mode=variant.mode, top_k=100, max_chunks_per_document=1,
            rerank=variant.rerank,
        )  # fmt: skip
        result.per_query[qid] = ndcg_at(ranking, relevant)
        sums["recall10"] += recall_at(ranking, relevant, 10)
        sums["mrr10"] += mrr_at(ranking, relevant)
        sums["recall100"] += recall_at([h.document_id for h in top100.results], relevant, 100)
        on_query()
    count = max(len(test.queries), 1)
    result.ndcg10 = sum(result.per_query.values()) / count
    result.recall10, result.recall100 = sums["recall10"] / count, sums["recall100"] / count
    result.mrr10 = sums["mrr10"] / count
    result.latency_ms = {
        "p50": round(_percentile(client_ms, 50), 1),
        "p95": round(_percentile(client_ms, 95), 1),
        "server_p50": round(_percentile(server_ms, 50), 1),
    }
    return result


def compare(results: list[VariantResult], baseline: str) -> None:
    """Fill each result's wins and losses against the variant named `baseline`."""
    base = next((r for r in results if r.variant.name == baseline), None)
    if base is None:
        raise ValueError(f"no variant named {baseline!r}: {[r.variant.name for r in results]}")
    for result in results:
        deltas = {qid: score - base.per_query[qid] for qid, score in result.per_query.items()}
        ahead = sorted((q for q, d in deltas.items() if d > 1e-9), key=lambda q: -deltas[q])
        behind = sorted((q for q, d in deltas.items() if d < -1e-9), key=lambda q: deltas[q])
        result.win_count, result.loss_count = len(ahead), len(behind)
        result.wins, result.losses = ahead[:SHOWN_QUERIES], behind[:SHOWN_QUERIES]


def evaluate(
    client: Client,
    index: str,
    test: TestSet,
    variants: Sequence[Variant],
    *,
    baseline: str | None = None,
    on_query: Callable[[], None] = lambda: None,
) -> list[VariantResult]:
    """Run every variant over the test set; wins/losses are against `baseline` (the first
    variant unless named)."""
    results = [run_variant(client, index, test, v, on_query=on_query) for v in variants]
    if results:
        compare(results, baseline or results[0].variant.name)
    return results


def variants(modes: Sequence[SearchMode], *, rerank: bool) -> list[Variant]:
    """Each mode as the index serves it; with `rerank`, each mode with rerank off and on."""
    if not rerank:
        return [Variant(mode) for mode in modes]
    return [Variant(mode, flag) for mode in modes for flag in (False, True)]


def _percentile(values: Sequence[float], q: int) -> float:
    if not values:
        return 0.0
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def qrels_documents(qrels: Qrels) -> set[str]:
    return {doc for judged in qrels.values() for doc in judged}
