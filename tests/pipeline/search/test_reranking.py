"""The rerank stage inside a real search, on both store engines, against the fake re-ranker:
the final order is the known score function's order over the candidates, with the threshold,
the per-document cap and top_k applied after it; a failing re-ranker leaves first-stage order."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from docingest.pipeline.embedders.base import EmbeddingConfig, ProgressCallback
from docingest.pipeline.rerank import (
    RerankConfig,
    RerankDefaults,
    Reranker,
    RerankSpec,
    build_reranker,
)
from docingest.pipeline.search import Reranking, SearchTarget, search
from docingest.pipeline.search.candidates import RRF_K
from docingest.pipeline.search.request import SearchRequest, SearchResponse
from docingest.pipeline.search.reranking import rerank_text
from docingest.pipeline.settings import Settings
from docingest.pipeline.sparse import analyze, encode_document, encode_query
from docingest.pipeline.store import (
    ChunkRecord,
    DocumentFields,
    IndexConfig,
    ScoredChunk,
    VectorStore,
)
from tests.support.engines import ENGINES, engine_fields
from tests.support.rerank_server import FakeRerankServer, fake_score

INDEX = "rr"
DIMENSIONS = 16
QUERY = "certificate renewal for the proxy"
WORDS = "certificate renewal proxy host chain root expiry handshake client server".split()


def vector_of(text: str) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    row = np.random.default_rng(seed).standard_normal(DIMENSIONS).astype(np.float32)
    return row / np.linalg.norm(row)


class HashEmbedder:
    """A deterministic stand-in for the index's model (the first stage is not under test)."""

    provider = "local"
    model = "hash"
    dimensions = DIMENSIONS
    max_batch = 64

    def embed_query(self, text: str) -> np.ndarray:
        return vector_of(text)

    def embed_documents(
        self, texts: Sequence[str], on_progress: ProgressCallback | None = None
    ) -> np.ndarray:
        return np.stack([vector_of(text) for text in texts])


def records() -> list[ChunkRecord]:
    """Six documents of five chunks, each chunk holding some of the query's words."""
    out = []
    for d in range(6):
        fields = DocumentFields(
            filename=f"doc{d}.txt",
            format="text",
            content_sha256=None,
            pages=1,
            words=0,
            chunk_count=5,
            title=f"Handbook {d}",
        )
        for c in range(5):
            words = [WORDS[(d * 5 + c * 3 + k) % len(WORDS)] for k in range(4 + c)]
            text = f"Chunk {c} of document {d}: " + " ".join(words) + "."
            out.append(
                ChunkRecord(
                    document_id=f"doc{d}",
                    version=1,
                    chunk_index=c,
                    text=text,
                    text_hash=hashlib.sha256(text.encode()).hexdigest(),
                    start=0,
                    end=len(text),
                    page_start=1,
                    page_end=1,
                    headings=["Operations", f"Section {c}"],
                    dense=vector_of(text),
                    sparse=encode_document("\n".join(["Operations", f"Section {c}", text])),
                    document=fields,
                )
            )
    return out


@pytest.fixture(scope="module")
def server() -> Iterator[FakeRerankServer]:
    with FakeRerankServer() as fake:
        yield fake


@pytest.fixture(params=ENGINES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[VectorStore]:
    settings = Settings(**engine_fields(request.param, tmp_path), data_dir=tmp_path)
    config = IndexConfig(
        embedding=EmbeddingConfig(provider="local", model="hash", dimensions=DIMENSIONS)
    )
    with VectorStore.open(settings) as vector_store:
        vector_store.create_index(INDEX, config)
        vector_store.write_chunks(INDEX, records())
        for d in range(6):
            vector_store.publish(INDEX, f"doc{d}", 1)
        yield vector_store


@pytest.fixture
def reranking(server: FakeRerankServer) -> Iterator[Reranking]:
    server.always = None
    settings = Settings(rerank_url=server.url, rerank_provider="cohere", rerank_max_attempts=1)
    built: dict[tuple[str, str], Reranker] = {}

    def reranker_for(spec: RerankSpec) -> Reranker:
        key = (spec.provider, spec.model)
        if key not in built:
            built[key] = build_reranker(spec.provider, spec.model, settings=settings)
        return built[key]

    yield Reranking(
        defaults=RerankDefaults.from_settings(settings),
        reranker_for=reranker_for,
        deadline_seconds=30.0,
    )
    for reranker in built.values():
        reranker.close()


def run(
    store: VectorStore,
    reranking: Reranking | None,
    *,
    index_rerank: RerankConfig | None = None,
    **fields: object,
) -> SearchResponse:
    target = SearchTarget(index=INDEX, embedder=HashEmbedder(), rerank=index_rerank)
    request = SearchRequest.model_validate({"query": QUERY} | fields)
    return search(store, target, request, reranking=reranking)


def first_stage(store: VectorStore) -> list[ScoredChunk]:
    """Every chunk in keyword mode's first-stage order (what the rerank stage receives)."""
    return store.query_sparse(INDEX, encode_query(QUERY), limit=100, filter=None)


def key(chunk: ScoredChunk) -> tuple[str, int]:
    return (chunk.document_id, chunk.chunk_index)


@pytest.mark.parametrize(
    ("candidates", "top_k", "threshold", "cap"),
    [(10, 5, None, None), (20, 8, 0.3, 2), (6, 10, None, 1), (30, 3, 0.6, None)],
)
def test_the_order_is_the_rerankers_then_threshold_cap_and_top_k(
    store: VectorStore,
    reranking: Reranking,
    candidates: int,
    top_k: int,
    threshold: float | None,
    cap: int | None,
) -> None:
    response = run(
        store,
        reranking,
        mode="keyword",
        top_k=top_k,
        rerank={"candidates": candidates},
        score_threshold=threshold,
        max_chunks_per_document=cap,
    )
    pool = first_stage(store)[: max(candidates, top_k)]
    ranked = sorted(pool, key=lambda chunk: -fake_score(QUERY, rerank_text(chunk)))
    if threshold is not None:
        ranked = [c for c in ranked if fake_score(QUERY, rerank_text(c)) >= threshold]
    if cap is not None:
        seen: dict[str, int] = {}
        kept = []
        for chunk in ranked:
            seen[chunk.document_id] = seen.get(chunk.document_id, 0) + 1
            if seen[chunk.document_id] <= cap:
                kept.append(chunk)
        ranked = kept
    expected = ranked[:top_k]
    assert response.reranked is True and response.rerank_error is None
    assert [(r.document_id, r.chunk_index) for r in response.results] == [key(c) for c in expected]
    for result, chunk in zip(response.results, expected, strict=True):
        assert result.score == result.scores.rerank == fake_score(QUERY, rerank_text(chunk))
        assert result.scores.keyword == pytest.approx(chunk.score)


def test_the_reranker_reads_title_heading_path_and_text(
    store: VectorStore, reranking: Reranking, server: FakeRerankServer
) -> None:
    run(store, reranking, mode="keyword", top_k=3, rerank=True)
    documents = server.requests[-1].body["documents"]
    pool = first_stage(store)[:50]
    assert documents == [rerank_text(chunk) for chunk in pool]
    assert documents[0].startswith(f"Handbook {pool[0].document_id[-1]}\nOperations > Section ")


def test_rrf_fusion_fuses_first_stage_and_rerank_ranks(
    store: VectorStore, reranking: Reranking
) -> None:
    response = run(
        store, reranking, mode="keyword", top_k=10, rerank={"candidates": 12, "fusion": "rrf"}
    )
    pool = first_stage(store)[:12]
    by_rerank = sorted(range(12), key=lambda i: -fake_score(QUERY, rerank_text(pool[i])))
    rerank_rank = {i: rank for rank, i in enumerate(by_rerank)}
    fused = {i: 1 / (RRF_K + i) + 1 / (RRF_K + rerank_rank[i]) for i in range(12)}
    expected = sorted(range(12), key=lambda i: -fused[i])[:10]
    assert [(r.document_id, r.chunk_index) for r in response.results] == [
        key(pool[i]) for i in expected
    ]
    assert all(r.scores.rerank is not None for r in response.results)


@pytest.mark.parametrize(
    ("fault", "code"),
    [
        ({"status": 500}, "rerank_unavailable"),
        ({"delay": 30}, "timeout"),
        ({"garbage": "nan"}, "rerank_bad_reply"),
    ],
)
def test_a_failing_reranker_leaves_first_stage_order(
    store: VectorStore,
    reranking: Reranking,
    server: FakeRerankServer,
    fault: dict[str, object],
    code: str,
) -> None:
    plain = run(store, None, mode="hybrid", top_k=7, max_chunks_per_document=2)
    server.always = fault
    reranking = dataclasses.replace(reranking, deadline_seconds=1.0)  # the delay is 30 s
    response = run(store, reranking, mode="hybrid", top_k=7, max_chunks_per_document=2, rerank=True)
    assert response.reranked is False
    assert response.rerank_error is not None and response.rerank_error.code == code

    # qdrant-client's local mode may differ in a score's 8th digit between two runs of one
    # query: the order and all else must be the same, the scores to that digit
    def numbers(response: SearchResponse) -> list[float | None]:
        return [x for r in response.results for x in (r.score, r.scores.vector, r.scores.keyword)]

    unscored = {"score", "scores"}
    assert [r.model_dump(exclude=unscored) for r in response.results] == [
        r.model_dump(exclude=unscored) for r in plain.results
    ]
    assert numbers(response) == pytest.approx(numbers(plain))


def test_the_index_default_applies_unless_the_request_says_false(
    store: VectorStore, reranking: Reranking
) -> None:
    on = RerankConfig(candidates=8)
    assert run(store, reranking, index_rerank=on, top_k=4).reranked is True
    assert run(store, reranking, index_rerank=on, top_k=4, rerank=False).reranked is False
    assert run(store, reranking, top_k=4).reranked is False
    unconfigured = Reranking(
        defaults=RerankDefaults(provider=None, model=None, candidates=50),
        reranker_for=reranking.reranker_for,
        deadline_seconds=1,
    )
    response = run(store, unconfigured, top_k=4, rerank=True)
    assert response.reranked is False and response.results
    assert response.rerank_error is not None
    assert response.rerank_error.code == "rerank_not_configured"


def test_explain_gives_ranks_and_matched_terms(store: VectorStore, reranking: Reranking) -> None:
    response = run(store, reranking, mode="hybrid", top_k=6, rerank=True, explain=True)
    dense, keyword = store.query_both(
        INDEX,
        vector=vector_of(QUERY),
        terms=encode_query(QUERY),
        limit=50,
        filter=None,
    )
    dense_rank = {key(c): rank for rank, c in enumerate(dense, 1)}
    keyword_rank = {key(c): rank for rank, c in enumerate(keyword, 1)}
    query_terms = list(dict.fromkeys(analyze(QUERY)))
    for place, result in enumerate(response.results, 1):
        explain = result.explain
        assert explain is not None
        assert explain.rerank_rank == place
        assert explain.vector_rank == dense_rank.get((result.document_id, result.chunk_index))
        assert explain.keyword_rank == keyword_rank.get((result.document_id, result.chunk_index))
        held = set(analyze("\n".join([*result.headings, result.text])))
        assert explain.matched_terms == [t for t in query_terms if t in held]
    assert any(r.explain and r.explain.matched_terms for r in response.results)
    assert run(store, reranking, top_k=2).results[0].explain is None
