"""Fusion and selection of candidates, on hand-made candidate lists (the ranking against
Qdrant's own RRF is in test_search.py, on both engines)."""

from __future__ import annotations

import pytest

from pipeline.search.candidates import RRF_K, Candidate, fuse, fuse_documents, select
from pipeline.search.request import SearchRequest
from pipeline.store import ScoredChunk


def _chunk(point: str, document_id: str = "d", version: int = 1, score: float = 0.5) -> ScoredChunk:
    return ScoredChunk(point, score, document_id, version, 0, "t", None, None, None, None, [], {})


def test_hybrid_threshold_drops_chunks_found_by_keyword_only() -> None:
    dense = [_chunk("a", score=0.9), _chunk("b", score=0.3)]
    keyword = [_chunk("c", score=7.0), _chunk("a", score=2.0)]
    fused = fuse(dense, keyword)
    assert [(c.chunk.id, c.vector, c.keyword) for c in fused] == [
        ("a", 0.9, 2.0), ("c", None, 7.0), ("b", 0.3, None)
    ]  # fmt: skip
    assert fused[0].score == pytest.approx(1 / RRF_K + 1 / (RRF_K + 1))
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


def test_a_capped_response_fuses_documents_not_chunks() -> None:
    # d1 is found by meaning in one chunk and by its words in another; d2's two chunks top
    # the keyword list. Fusing chunks splits d1's evidence; fusing documents does not.
    dense = [_chunk("d1-0", "d1"), _chunk("d3-0", "d3"), _chunk("d2-0", "d2")]
    keyword = [_chunk("d2-0", "d2"), _chunk("d2-1", "d2"), _chunk("d1-1", "d1")]
    by_chunk = select(fuse(dense, keyword), SearchRequest(query="q", max_chunks_per_document=1))
    assert [c.chunk.document_id for c in by_chunk] == ["d2", "d1", "d3"]
    fused = fuse_documents(dense, keyword)
    # d1: dense rank 0 + keyword rank 1 (second document); d2: dense 2 + keyword 0
    assert fused[0].score == pytest.approx(1 / RRF_K + 1 / (RRF_K + 1))
    chosen = select(fused, SearchRequest(query="q", max_chunks_per_document=1))
    assert [c.chunk.id for c in chosen] == ["d1-0", "d2-0", "d3-0"]
    two = select(fused, SearchRequest(query="q", max_chunks_per_document=2))
    assert [c.chunk.id for c in two] == ["d1-0", "d1-1", "d2-0", "d2-1", "d3-0"]
    assert two[0].score == two[1].score  # a document's chunks carry its score


def test_document_fusion_ranks_each_documents_newest_version() -> None:
    dense = [_chunk("old", "d", 1), _chunk("e", "e"), _chunk("new", "d", 2)]
    keyword = [_chunk("old", "d", 1), _chunk("new", "d", 2)]
    fused = fuse_documents(dense, keyword)
    assert [c.chunk.id for c in fused] == ["new", "e"]  # d ranks 1 in dense, 0 in keyword
    assert fused[0].score == pytest.approx(1 / (RRF_K + 1) + 1 / RRF_K)
