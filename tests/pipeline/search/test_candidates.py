"""Fusion and selection of candidates, on hand-made candidate lists (the ranking against
Qdrant's own RRF is in test_search.py, on both engines)."""

from __future__ import annotations

import pytest

from docingest.pipeline.search.candidates import RRF_K, Candidate, Fusion, fuse, rrf, select
from docingest.pipeline.search.request import SearchRequest
from docingest.pipeline.store import ScoredChunk


def _chunk(point: str, document_id: str = "d", version: int = 1, score: float = 0.5) -> ScoredChunk:
    return ScoredChunk(point, score, document_id, version, 0, "t", None, None, None, None, [], {})


def test_hybrid_threshold_drops_chunks_found_by_keyword_only() -> None:
    dense = [_chunk("a", score=0.9), _chunk("b", score=0.3)]
    keyword = [_chunk("c", score=7.0), _chunk("a", score=2.0)]
    fused = fuse(dense, keyword, Fusion("rrf"))
    assert [(c.chunk.id, c.vector, c.keyword) for c in fused] == [
        ("a", 0.9, 2.0), ("c", None, 7.0), ("b", 0.3, None)
    ]  # fmt: skip
    assert fused[0].score == pytest.approx(1 / RRF_K + 1 / (RRF_K + 1))
    assert [c.chunk.id for c in rrf(dense, keyword)] == ["a", "c", "b"]
    plain = select(fused, SearchRequest(query="q", top_k=10))
    assert [c.chunk.id for c in plain] == ["a", "c", "b"]
    cut = select(fused, SearchRequest(query="q", top_k=10, score_threshold=0.2))
    assert [c.chunk.id for c in cut] == ["a", "b"]


def test_select_keeps_each_documents_newest_version_first() -> None:
    candidates = [
        Candidate(_chunk("old", "d", 1), 0.9, vector=0.9),
        Candidate(_chunk("new", "d", 2), 0.5, vector=0.5),
        Candidate(_chunk("other", "e", 1), 0.7, vector=0.7),
    ]
    chosen = select(candidates, SearchRequest(query="q", top_k=1))
    assert [c.chunk.id for c in chosen] == ["other"]
    chosen = select(candidates, SearchRequest(query="q", top_k=5))
    assert [c.chunk.id for c in chosen] == ["other", "new"]


def test_convex_fusion_weighs_how_far_ahead_each_hit_is_not_only_its_rank() -> None:
    """RRF ranks `b` (second in both lists) above `c`, the keyword list's clear winner; the
    convex combination sees that `c` stands far above every other keyword hit."""
    dense_scores = {"a": 0.80, "b": 0.79, "d": 0.785, "f": 0.782, "c": 0.78, "g": 0.40}
    dense = [_chunk(point, score=score) for point, score in dense_scores.items()]
    keyword_scores = {"c": 30.0, "b": 3.0, "e": 2.5, "a": 1.0}
    keyword = [_chunk(point, score=score) for point, score in keyword_scores.items()]
    assert [c.chunk.id for c in fuse(dense, keyword, Fusion("rrf"))][:3] == ["b", "a", "c"]
    fused = fuse(dense, keyword, Fusion("convex", vector_weight=0.4))
    assert [c.chunk.id for c in fused] == ["c", "b", "a", "d", "f", "e", "g"]
    scores = {c.chunk.id: c.score for c in fused}
    assert scores["c"] == pytest.approx(0.4 * (0.38 / 0.40) + 0.6 * 1.0)
    assert scores["b"] == pytest.approx(0.4 * (0.39 / 0.40) + 0.6 * (2.0 / 29.0))
    assert scores["a"] == pytest.approx(0.4 * 1.0 + 0.6 * 0.0)  # the keyword list's lowest
    assert scores["g"] == pytest.approx(0.0)  # the dense list's lowest, no keyword match
    assert {c.chunk.id: (c.vector_rank, c.keyword_rank) for c in fused}["b"] == (2, 2)


def test_convex_fusion_counts_a_lone_or_tied_hit_as_its_lists_best() -> None:
    dense = [_chunk("a", score=0.5), _chunk("b", score=0.5)]
    keyword = [_chunk("b", score=4.0)]
    fused = fuse(dense, keyword, Fusion("convex", vector_weight=0.3))
    assert [(c.chunk.id, round(c.score, 6)) for c in fused] == [("b", 1.0), ("a", 0.3)]
    assert fuse([], [], Fusion("convex")) == []
    only_keyword = fuse([], keyword, Fusion("convex", vector_weight=1.0))
    assert [(c.chunk.id, c.score) for c in only_keyword] == [("b", 0.0)]
