"""The candidates of a search: how many each retriever fetches, how two lists are fused, and
which of them make the response.

Hybrid fuses the dense and keyword lists here, by default with a convex combination of their
scores: each list's scores are min-max normalised over its candidates, and a chunk scores
`w * vector + (1 - w) * keyword` (0 for a list it is not in), `w` being `VECTOR_WEIGHT`. On
SciFact's test queries through the whole service it beat Reciprocal Rank Fusion by +0.015
nDCG@10, and tied it on Cranfield (BENCHMARKS.md, "Hybrid fusion"):
RRF keeps only ranks, so a keyword list whose first hit stands far above the rest counts the
same as one whose hits are all alike. RRF (`Fusion("rrf")`) stays available: a chunk scores
sum(1 / (RRF_K + rank)) over the lists it is in, rank counted from 0, which is Qdrant's own
formula (tests check the ranking against Qdrant's `RrfQuery`). Qdrant could fuse RRF
server-side, but its fused points carry only the fused score, and the contract returns each
retriever's own score per result (`scores.vector`, `scores.keyword`) so callers can threshold
on a meaningful number.

A response holds one version of each document: among the candidates, a document keeps only
the chunks of its highest version (two versions are live for a moment while one replaces the
other). Then come the rerank stage (`docingest.pipeline.search.reranking`), when on, and then
`score_threshold`, `max_chunks_per_document` and `top_k`, in that order.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Literal

from docingest.pipeline.search.request import SearchMode, SearchRequest
from docingest.pipeline.store import ScoredChunk

RRF_K = 60
"""Rank constant of Reciprocal Rank Fusion: 60 as in Cormack et al. (2009), who count ranks
from 1 (with Qdrant's ranks from 0, the same constant weighs the first place a little more).
Other constants and weights gained nothing measurable: BENCHMARKS.md, "Retrieval quality by
search mode"."""


VECTOR_WEIGHT = 0.45
"""The dense list's weight in the convex combination (the keyword list's is 1 minus it).
0.4 and 0.45 were best on SciFact's train queries; Cranfield chose 0.45, where 0.4 lost a
little to RRF (BENCHMARKS.md, "Hybrid fusion")."""

FusionMethod = Literal["convex", "rrf"]


@dataclass(frozen=True, slots=True)
class Fusion:
    """How hybrid search fuses its two lists (`DOCINGEST_HYBRID_FUSION`)."""

    method: FusionMethod = "convex"
    vector_weight: float = VECTOR_WEIGHT
    """The dense list's weight in `convex` (0-1)."""


DEFAULT_FUSION = Fusion()


@dataclass(slots=True)
class Candidate:
    """A chunk a retriever found: its score in the ranking, and each retriever's own."""

    chunk: ScoredChunk
    score: float
    vector: float | None = None
    keyword: float | None = None
    rerank: float | None = None
    vector_rank: int | None = None
    """Place in the dense list, from 1 (for `explain`)."""
    keyword_rank: int | None = None
    rerank_rank: int | None = None


def candidate_limit(top_k: int) -> int:
    """Candidates fetched per retriever, so version and per-document cuts still fill top_k."""
    return max(top_k * 4, 50)


def fuse(
    dense: list[ScoredChunk],
    keyword: list[ScoredChunk],
    fusion: Fusion = DEFAULT_FUSION,
    *,
    depth: int | None = None,
) -> list[Candidate]:
    """Fuse two ranked lists as `fusion` says, best first. `depth`: see `convex`."""
    if fusion.method == "rrf":
        return rrf(dense, keyword)
    return convex(dense, keyword, vector_weight=fusion.vector_weight, depth=depth)


def convex(
    dense: list[ScoredChunk],
    keyword: list[ScoredChunk],
    *,
    vector_weight: float,
    depth: int | None = None,
) -> list[Candidate]:
    """Fuse two ranked lists by a convex combination of their min-max normalised scores,
    best first; ties keep first-seen order (dense first).

    Each list is scaled over its first `depth` hits (all when None), and hits past them
    count 0, so fetching more candidates (for the rerank stage) leaves the scores and the
    order of the others as they are: a search whose re-ranker fails answers as one that
    asked for none."""
    dense_shares = [vector_weight * share for share in _normalised(dense, depth)]
    keyword_shares = [(1.0 - vector_weight) * share for share in _normalised(keyword, depth)]
    return _combined(dense, dense_shares, keyword, keyword_shares)


def _normalised(hits: list[ScoredChunk], depth: int | None) -> list[float]:
    """Each hit's score scaled to 0 (the lowest of the first `depth`) to 1 (the highest),
    those below 0 counted as 0; all 1 when the scores are equal (a single hit is its list's
    best, not its worst)."""
    if not hits:
        return []
    scores = [hit.score for hit in hits]
    scale = scores[:depth] if depth is not None else scores
    low, high = min(scale), max(scores)
    if high <= low:
        return [1.0 if score >= high else 0.0 for score in scores]
    return [max(0.0, (score - low) / (high - low)) for score in scores]


def rrf(dense: list[ScoredChunk], keyword: list[ScoredChunk], *, k: int = RRF_K) -> list[Candidate]:
    """Fuse two ranked lists by RRF, best first; ties keep first-seen order (dense first)."""
    dense_shares = [1.0 / (k + rank) for rank in range(len(dense))]
    keyword_shares = [1.0 / (k + rank) for rank in range(len(keyword))]
    return _combined(dense, dense_shares, keyword, keyword_shares)


def _combined(
    dense: list[ScoredChunk],
    dense_shares: list[float],
    keyword: list[ScoredChunk],
    keyword_shares: list[float],
) -> list[Candidate]:
    """Candidates scoring the sum of their shares in the lists they are in (each hit's share
    given beside it), best first; ties keep first-seen order (dense first)."""
    fused: dict[str, Candidate] = {}
    for rank, (hit, share) in enumerate(zip(dense, dense_shares, strict=True)):
        fused[hit.id] = Candidate(hit, share, vector=hit.score, vector_rank=rank + 1)
    for rank, (hit, share) in enumerate(zip(keyword, keyword_shares, strict=True)):
        if (candidate := fused.get(hit.id)) is None:
            fused[hit.id] = Candidate(hit, share, keyword=hit.score, keyword_rank=rank + 1)
        else:
            candidate.score += share
            candidate.keyword = hit.score
            candidate.keyword_rank = rank + 1
    return sorted(fused.values(), key=lambda candidate: candidate.score, reverse=True)


def newest_versions(candidates: list[Candidate]) -> list[Candidate]:
    """The candidates of each document's highest version among them, in order."""
    newest: dict[str, int] = {}
    for candidate in candidates:
        chunk = candidate.chunk
        newest[chunk.document_id] = max(chunk.version, newest.get(chunk.document_id, 0))
    return [c for c in candidates if c.chunk.version == newest[c.chunk.document_id]]


def select(
    candidates: list[Candidate], request: SearchRequest, *, reranked: bool = False
) -> list[Candidate]:
    """Apply version consistency, the threshold, the per-document cap and top_k, in order.

    `reranked`: the threshold applies to the rerank score (higher is better)."""
    kept = newest_versions(candidates)
    if (threshold := request.score_threshold) is not None:
        if reranked:
            kept = [c for c in kept if c.rerank is not None and c.rerank >= threshold]
        else:
            kept = [c for c in kept if _passes(c, request.mode, threshold)]
    kept.sort(key=lambda candidate: candidate.score, reverse=True)
    if (cap := request.max_chunks_per_document) is not None:
        per_document: Counter[str] = Counter()
        capped = []
        for candidate in kept:
            per_document[candidate.chunk.document_id] += 1
            if per_document[candidate.chunk.document_id] <= cap:
                capped.append(candidate)
        kept = capped
    return kept[: request.top_k]


def _passes(candidate: Candidate, mode: SearchMode, threshold: float) -> bool:
    score = candidate.keyword if mode == "keyword" else candidate.vector
    return score is not None and score >= threshold
