"""Hostile rerank configs and re-rankers: a bad `rerank` at PUT or in a search is a 422 with
the contract's error shape, never a 500; a re-ranker answering garbage, NaN, a huge body or a
JSON bomb is refused as `rerank_bad_reply` (a search then keeps first-stage order:
tests/pipeline/search/test_reranking.py). RELIABILITY.md, "Hostile re-rankers"."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from docingest.pipeline.errors import RerankFailed
from docingest.pipeline.rerank import Reranker, build_reranker
from docingest.pipeline.services import Services
from docingest.pipeline.settings import Settings
from tests.support.api_app import api_client
from tests.support.embedding_server import FakeEmbeddingServer
from tests.support.redis_db import TestRedis
from tests.support.rerank_server import FakeRerankServer
from tests.support.settings import service_settings

TEXTS = ["first passage", "second passage", "third passage"]


@pytest.fixture(scope="module")
def server() -> Iterator[FakeRerankServer]:
    with FakeRerankServer() as fake:
        yield fake


@pytest.fixture
def client(
    tmp_path: Path, redis_db: TestRedis, embedding_server: FakeEmbeddingServer
) -> Iterator[httpx.Client]:
    settings = service_settings(tmp_path, redis_db.prefix, embedding_server)
    services = Services(settings, owns_store=True)
    try:
        with api_client(settings, services=services) as api:
            yield api
    finally:
        services.close()


BAD_INDEX_RERANK: list[Any] = [
    {"provider": "colbert"},
    {"provider": ""},
    {"provider": "cohere", "candidates": 0},
    {"provider": "cohere", "candidates": 1001},
    {"provider": "cohere", "candidates": 1e30},
    {"provider": "cohere", "fusion": "max"},
    {"provider": "cohere", "top_n": 5},
    {"provider": ["cohere"]},
    {"provider": "x" * 100},
    "cohere",
    True,
]


BAD_SEARCH_RERANK: list[Any] = [
    {"candidates": 0},
    {"candidates": -3},
    {"candidates": 10**30},
    {"provider": "cohere"},  # a request may not pick the provider (the index does)
    {"fusion": "sum"},
    "yes",
    1,
    [True],
]


def test_a_bad_rerank_is_a_422_at_put_and_in_a_search(client: httpx.Client) -> None:
    """One server for every case (starting one per case is slow on a loaded machine)."""
    for rerank in BAD_INDEX_RERANK:
        response = client.put("/v1/indexes/hostile", json={"rerank": rerank})
        assert response.status_code == 422, (rerank, response.text)
        assert response.json()["error"]["code"] == "validation_error"
        assert client.get("/v1/indexes/hostile").status_code == 404  # nothing half-made
    for rerank in BAD_SEARCH_RERANK:
        response = client.post("/v1/indexes/any/search", json={"query": "q", "rerank": rerank})
        assert response.status_code == 422, (rerank, response.text)
        assert response.json()["error"]["code"] == "validation_error"


@pytest.fixture
def built() -> Iterator[list[Reranker]]:
    rerankers: list[Reranker] = []
    yield rerankers
    for reranker in rerankers:
        reranker.close()


def reranker(server: FakeRerankServer, provider: str, built: list[Reranker]) -> Reranker:
    settings = Settings(rerank_url=server.url, rerank_max_attempts=1)
    made = build_reranker(provider, "m", settings=settings)
    built.append(made)
    return made


GARBAGE = ["nan", "huge", "not_json", "missing", "repeated", "bool", "nested", "out_of_range"]


@pytest.mark.parametrize("kind", GARBAGE)
@pytest.mark.parametrize("provider", ["cohere", "tei", "llm"])
def test_a_garbage_reply_is_a_bad_reply(
    server: FakeRerankServer, built: list[Reranker], provider: str, kind: str
) -> None:
    server.add_faults({"garbage": kind})
    with pytest.raises(RerankFailed) as caught:
        reranker(server, provider, built).scores("q", TEXTS, deadline=_soon())
    assert caught.value.code == "rerank_bad_reply", caught.value.message
    assert len(caught.value.message) < 500


@pytest.mark.parametrize(
    "content",
    [
        None,
        "",
        "I cannot rank these passages.",
        '{"ranking": [7, 8, 9]}',  # only unknown labels
        '{"ranking": "1, 2, 3"}',
        '{"ranking": [1.5, null, {"id": 1}]}',
        "[" * 50_000 + "]" * 50_000,
    ],
)
def test_an_llm_answer_without_a_usable_ranking_is_a_bad_reply(
    server: FakeRerankServer, built: list[Reranker], content: str | None
) -> None:
    body = {"choices": [{"message": {"role": "assistant", "content": content}}]}
    server.add_faults({"reply": body})
    with pytest.raises(RerankFailed) as caught:
        reranker(server, "llm", built).scores("q", TEXTS, deadline=_soon())
    assert caught.value.code == "rerank_bad_reply"


def _soon() -> float:
    return time.monotonic() + 60
