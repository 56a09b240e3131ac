"""The rerank stage: the first stage's best candidates re-ordered by a re-ranker.

It takes the first `candidates` results (at least `top_k`, so a response is never shorter for
it) of each document's newest version, sends each as its title, heading path and text
(`rerank_text`), and orders them by the re-ranker's score, which becomes the result's `score`
(or, with `fusion: rrf`, the RRF of the first-stage rank and the rerank rank: BENCHMARKS.md,
"Rerank: replace or fuse", says when each wins). The threshold, the per-document cap and
`top_k` come after, in `select`. Candidates past the re-ranked ones are dropped.

A search never fails because of its re-ranker: a timeout, an error, a bad reply or a missing
configuration leaves the candidates in first-stage order and is reported as the response's
`rerank_error` (`RerankOutcome.error`), logged, and counted in `/metrics` by outcome.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from docingest.pipeline import metrics
from docingest.pipeline.errors import InvalidRerank, RerankFailed
from docingest.pipeline.rerank import (
    RerankConfig,
    RerankDefaults,
    Reranker,
    RerankSpec,
    resolve_rerank,
)
from docingest.pipeline.search.candidates import RRF_K, Candidate, newest_versions
from docingest.pipeline.search.request import SearchRequest
from docingest.pipeline.store import ScoredChunk

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Reranking:
    """What a search needs to re-rank: the server's defaults and a re-ranker per spec."""

    defaults: RerankDefaults
    reranker_for: Callable[[RerankSpec], Reranker]
    """Returns the re-ranker of a spec (`Services.reranker_for` caches them); may raise
    `RerankFailed` or `InvalidRerank` when the settings name none that can be built."""
    deadline_seconds: float


@dataclass(frozen=True, slots=True)
class RerankOutcome:
    """What the stage did, for the response, the index's usage and the logs."""

    reranked: bool = False
    error: RerankFailed | None = None
    requested: bool = False
    """Whether a re-ranker was asked (a rerank request to count)."""


def rerank_text(chunk: ScoredChunk) -> str:
    """What the re-ranker reads of a chunk: its document title, heading path and text."""
    head = [part for part in (chunk.title, " > ".join(chunk.headings)) if part]
    return "\n".join([*head, chunk.text]) if head else chunk.text


def plan_rerank(
    request: SearchRequest, index_rerank: RerankConfig | None, reranking: Reranking | None
) -> RerankSpec | RerankFailed | None:
    """The rerank the search asks for, why it cannot have one, or None (off)."""
    if reranking is None:
        return None
    try:
        return resolve_rerank(request.rerank, index_rerank, reranking.defaults)
    except RerankFailed as exc:
        return exc


def rerank_candidates(
    candidates: list[Candidate],
    request: SearchRequest,
    plan: RerankSpec | RerankFailed | None,
    reranking: Reranking | None,
) -> tuple[list[Candidate], RerankOutcome]:
    """Re-order `candidates` as `plan` (from `plan_rerank`) says; see the module."""
    if isinstance(plan, RerankFailed):
        return candidates, RerankOutcome(error=plan)
    if plan is None or reranking is None:
        return candidates, RerankOutcome()
    spec = plan
    pool = newest_versions(candidates)[: max(spec.candidates, request.top_k)]
    if not pool:
        return [], RerankOutcome(reranked=True)
    started = time.monotonic()
    endpoint = "(none)"
    try:
        reranker = reranking.reranker_for(spec)
        endpoint = reranker.endpoint
        texts = [rerank_text(candidate.chunk) for candidate in pool]
        scores = reranker.scores(
            request.query, texts, deadline=started + reranking.deadline_seconds
        )
    except InvalidRerank as exc:  # DOCINGEST_RERANK_PROVIDER names no provider
        return candidates, _failed(RerankFailed("rerank_not_configured", exc.message), spec)
    except RerankFailed as exc:
        metrics.RERANK_SECONDS.labels(spec.provider).observe(time.monotonic() - started)
        return candidates, _failed(exc, spec, endpoint=endpoint)
    metrics.RERANK_SECONDS.labels(spec.provider).observe(time.monotonic() - started)
    metrics.RERANK_REQUESTS.labels(spec.provider, endpoint, "ok").inc()
    log.debug("reranked %d candidates at %s (%s)", len(pool), endpoint, spec.provider)
    return _ordered(pool, scores, spec), RerankOutcome(reranked=True, requested=True)


def _ordered(pool: list[Candidate], scores: list[float], spec: RerankSpec) -> list[Candidate]:
    order = sorted(range(len(pool)), key=lambda i: -scores[i])  # stable: ties keep first order
    for rank, i in enumerate(order):
        pool[i].rerank = scores[i]
        pool[i].rerank_rank = rank + 1
    for first_rank, candidate in enumerate(pool):
        if spec.fusion == "rrf":
            assert candidate.rerank_rank is not None
            candidate.score = 1.0 / (RRF_K + first_rank) + 1.0 / (RRF_K + candidate.rerank_rank - 1)
        else:
            candidate.score = scores[first_rank]
    return sorted(pool, key=lambda candidate: candidate.score, reverse=True)


def _failed(error: RerankFailed, spec: RerankSpec, *, endpoint: str = "(none)") -> RerankOutcome:
    if endpoint != "(none)":
        metrics.RERANK_REQUESTS.labels(spec.provider, endpoint, error.code).inc()
    requested = endpoint != "(none)" and error.code != "rerank_busy"  # busy: nothing was sent
    log.warning(
        "rerank by %s at %s failed, first-stage order kept: %s: %s",
        spec.provider,
        endpoint,
        error.code,
        error.message,
    )
    return RerankOutcome(error=error, requested=requested)
