"""The search request's bounds and defaults."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from docingest.pipeline.search.request import SearchRequest


@pytest.mark.parametrize(
    "fields",
    [{"query": ""}, {"top_k": 0}, {"top_k": 101}, {"mode": "semantic"},
     {"max_chunks_per_document": 0}, {"surprise": 1}],
)  # fmt: skip
def test_request_validation(fields: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        SearchRequest.model_validate({"query": "q", **fields})


def test_request_defaults() -> None:
    request = SearchRequest(query="q")
    assert (request.top_k, request.mode, request.filter) == (5, "hybrid", None)
    assert (request.max_chunks_per_document, request.score_threshold) == (None, None)
