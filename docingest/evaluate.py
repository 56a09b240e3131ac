"""Measure retrieval quality of an index on a judged query set, through the service's API.

Each variant (a search mode, with or without rerank) runs every query twice: top 10 for the
figures at 10 and the latency (the search a user makes), and top 100 for recall@100 (a larger
top_k also widens each retriever's candidate list, which could move the top 10). Both ask for
one chunk per document, so a ranking is a ranking of documents, as the judgments are.

The metrics are the project's only implementation (the bench scripts use them too), with
trec_eval's definitions, as `pytrec_eval` and BEIR compute them: nDCG@k with linear gain (a
document's grade is its gain, not 2^grade - 1), a log2 discount and the ideal ranking of every
judged-relevant document; recall@k over the judged-relevant documents; MRR@10, the reciprocal
rank of the first relevant document within the top 10, else 0. A document is relevant when its
grade is above 0; a grade of 0 or below (judged not relevant) counts as unjudged. On binary
judgments linear and exponential gain agree; on graded ones (Cranfield's 0-4) they do not.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
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


def ndcg_at(ranking: Sequence[str], judgments: Mapping[str, int], k: int = 10) -> float:
    """nDCG@k with linear gain, as trec_eval's `ndcg_cut` (0 when nothing is relevant)."""
    dcg = sum(
        _gain(judgments.get(doc, 0)) / math.log2(rank + 2) for rank, doc in enumerate(ranking[:k])
    )
    ideal = sorted((_gain(grade) for grade in judgments.values()), reverse=True)[:k]
    idcg = sum(gain / math.log2(rank + 2) for rank, gain in enumerate(ideal) if gain)
    return dcg / idcg if idcg else 0.0


def recall_at(ranking: Sequence[str], judgments: Mapping[str, int], k: int) -> float:
    """The share of the relevant documents found in the top k (0 when none is relevant)."""
    relevant = relevant_documents(judgments)
    if not relevant:
        return 0.0
    return len(relevant.intersection(ranking[:k])) / len(relevant)


def mrr_at(ranking: Sequence[str], judgments: Mapping[str, int], k: int = 10) -> float:
    """The reciprocal rank of the first relevant document in the top k, else 0."""
    for rank, doc in enumerate(ranking[:k]):
        if judgments.get(doc, 0) > 0:
            return 1.0 / (rank + 1)
    return 0.0


def mean_ndcg_and_recall(
    rankings: Mapping[str, Sequence[str]], qrels: Qrels, *, k: int = 10
) -> tuple[float, float]:
    """Mean nDCG@k and recall@k over the judged queries (a query left unranked scores 0)."""
    if not qrels:
        return 0.0, 0.0
    ndcgs = [ndcg_at(rankings.get(query, []), judged, k) for query, judged in qrels.items()]
    recalls = [recall_at(rankings.get(query, []), judged, k) for query, judged in qrels.items()]
    return statistics.fmean(ndcgs), statistics.fmean(recalls)


def relevant_documents(judgments: Mapping[str, int]) -> set[str]:
    """The documents judged relevant (grade above 0)."""
    return {doc for doc, grade in judgments.items() if grade > 0}


def _gain(grade: int) -> int:
    # trec_eval gives a document judged non-relevant (0, or a negative grade) no gain.
    return max(grade, 0)


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


def rerank_problem(client: Client, index: str, query: str) -> str | None:
    """Why a search of `index` with rerank on is not re-ranked (None when it is): `--rerank`
    against a service without a re-ranker would print "+rerank" rows equal to the others."""
    answer = client.search(index, query, top_k=1, rerank=True)
    if answer.reranked:
        return None
    if answer.rerank_error is not None:
        return f"{answer.rerank_error.code}: {answer.rerank_error.message}"
    return "the search came back without rerank"


def unreranked(results: Sequence[VariantResult], queries: int) -> list[str]:
    """The names of the variants asked to rerank that re-ranked none of `queries`."""
    return [r.variant.name for r in results if r.variant.rerank and queries and not r.reranked]


def _percentile(values: Sequence[float], q: int) -> float:
    if not values:
        return 0.0
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def qrels_documents(qrels: Qrels) -> set[str]:
    return {doc for judged in qrels.values() for doc in judged}
