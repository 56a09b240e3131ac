"""Each rerank provider against the fake re-ranker over real HTTP: every documented reply
variant gives the known function's scores; failures become the right `RerankFailed` code."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from docingest.pipeline.errors import InvalidRerank, RerankFailed
from docingest.pipeline.rerank import Reranker, build_reranker
from docingest.pipeline.rerank.llm import LlmReranker
from docingest.pipeline.settings import Settings
from tests.support.rerank_server import FakeRerankServer, fake_order, fake_score

QUERY = "which certificate errors break TLS handshakes"
TEXTS = [f"passage {n}: certificates, host names and handshakes, variant {n}" for n in range(12)]


BUILT: list[Reranker] = []


@pytest.fixture
def server() -> Iterator[FakeRerankServer]:
    with FakeRerankServer() as fake:
        yield fake
    while BUILT:
        BUILT.pop().close()


def reranker(server: FakeRerankServer, provider: str, **settings: Any) -> Reranker:
    """A re-ranker of `provider` at the fake server, closed after the test."""
    values: dict[str, Any] = {
        "rerank_url": server.url,
        "rerank_api_key": "k-123",
        "rerank_max_attempts": 3,
    }
    built = build_reranker(provider, "fake-model", settings=Settings(**(values | settings)))
    BUILT.append(built)
    return built


def soon(seconds: float = 30.0) -> float:
    return time.monotonic() + seconds


@pytest.mark.parametrize("style", ["cohere", "jina", "voyage", "score"])
def test_cohere_style_replies_give_the_known_scores(server: FakeRerankServer, style: str) -> None:
    server.style = style
    scores = reranker(server, "cohere").scores(QUERY, TEXTS, deadline=soon())
    assert scores == [fake_score(QUERY, text) for text in TEXTS]
    sent = server.requests[-1]
    assert sent.path == "/rerank"
    assert sent.body == {"query": QUERY, "documents": TEXTS, "model": "fake-model"}
    assert sent.headers["Authorization"] == "Bearer k-123"


def test_tei_reply_gives_the_known_scores(server: FakeRerankServer) -> None:
    scores = reranker(server, "tei").scores(QUERY, TEXTS, deadline=soon())
    assert scores == [fake_score(QUERY, text) for text in TEXTS]
    assert server.requests[-1].body["texts"] == TEXTS
    assert server.requests[-1].body["raw_scores"] is False


@pytest.mark.parametrize("llm_style", ["json", "prose"])
def test_llm_ranking_follows_the_model(server: FakeRerankServer, llm_style: str) -> None:
    server.llm_style = llm_style
    scores = reranker(server, "llm").scores(QUERY, TEXTS, deadline=soon())
    by_score = sorted(range(len(TEXTS)), key=lambda i: -scores[i])
    assert by_score == fake_order(QUERY, TEXTS)
    assert max(scores) == 1.0 and min(scores) > 0
    sent = server.requests[-1]
    assert sent.path == "/chat/completions"
    assert sent.body["response_format"]["type"] == "json_schema"


def test_llm_ids_are_validated(server: FakeRerankServer) -> None:
    """Unknown labels dropped, repeats counted once, the left-out passage appended last."""
    server.llm_style = "bad_ids"
    scores = reranker(server, "llm").scores(QUERY, TEXTS, deadline=soon())
    by_score = sorted(range(len(TEXTS)), key=lambda i: -scores[i])
    assert by_score == fake_order(QUERY, TEXTS)


def test_llm_falls_back_to_plain_json_when_the_schema_is_refused(
    server: FakeRerankServer,
) -> None:
    server.llm_style = "no_schema"
    llm = reranker(server, "llm")
    scores = llm.scores(QUERY, TEXTS, deadline=soon())
    assert sorted(range(len(TEXTS)), key=lambda i: -scores[i]) == fake_order(QUERY, TEXTS)
    assert isinstance(llm, LlmReranker) and llm.structured is False
    assert ["response_format" in r.body for r in server.requests] == [True, False]
    llm.scores(QUERY, TEXTS, deadline=soon())
    assert "response_format" not in server.requests[-1].body


def test_a_server_error_is_retried(server: FakeRerankServer) -> None:
    server.add_faults({"status": 503}, {"status": 429, "headers": {"Retry-After": "0"}})
    scores = reranker(server, "cohere").scores(QUERY, TEXTS, deadline=soon())
    assert scores == [fake_score(QUERY, text) for text in TEXTS]
    assert len(server.requests) == 3


@pytest.mark.parametrize(
    ("fault", "code"),
    [
        ({"status": 500}, "rerank_unavailable"),
        ({"status": 429, "headers": {"Retry-After": "0"}}, "rate_limited"),
        ({"status": 401}, "rerank_refused"),
    ],
)
def test_failures_have_their_code(
    server: FakeRerankServer, fault: dict[str, object], code: str
) -> None:
    server.always = fault
    with pytest.raises(RerankFailed) as caught:
        reranker(server, "cohere").scores(QUERY, TEXTS, deadline=soon())
    assert caught.value.code == code
    assert len(server.requests) == (1 if code == "rerank_refused" else 3)
    assert "k-123" not in caught.value.message


def test_a_slow_reranker_is_cut_at_the_deadline(server: FakeRerankServer) -> None:
    server.always = {"delay": 30}
    with pytest.raises(RerankFailed) as caught:
        reranker(server, "cohere").scores(QUERY, TEXTS, deadline=soon(0.5))
    assert caught.value.code == "timeout"


def test_an_unreachable_reranker_is_unavailable() -> None:
    settings = Settings(rerank_url="http://127.0.0.1:9", rerank_max_attempts=1)
    tei = build_reranker("tei", "", settings=settings)
    with pytest.raises(RerankFailed) as caught:
        tei.scores(QUERY, TEXTS, deadline=soon())
    tei.close()
    assert caught.value.code == "rerank_unavailable"


def test_no_url_and_unknown_provider_are_refused() -> None:
    with pytest.raises(RerankFailed) as caught:
        build_reranker("cohere", "m", settings=Settings(rerank_url=None))
    assert caught.value.code == "rerank_not_configured"
    with pytest.raises(InvalidRerank, match="known providers are: cohere, llm, tei"):
        build_reranker("colbert", "m", settings=Settings(rerank_url="http://x"))
