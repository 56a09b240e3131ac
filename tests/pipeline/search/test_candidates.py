"""Fusion and selection of candidates, on hand-made candidate lists (the ranking against
Qdrant's own RRF is in test_search.py, on both engines)."""

from __future__ import annotations

import pytest

from pipeline.search.candidates import RRF_K, Candidate, fuse, select
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
