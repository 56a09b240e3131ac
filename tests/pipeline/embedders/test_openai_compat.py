"""The OpenAI-compatible embedder against the fake server, over real HTTP with the real client."""

from __future__ import annotations

import time
import uuid
from contextlib import closing
from typing import Any

import numpy as np
import pytest
from redis import Redis

from docingest.pipeline.embedders.base import COUNTERS
from docingest.pipeline.embedders.batching import token_counter
from docingest.pipeline.embedders.endpoints import credential_scope
from docingest.pipeline.embedders.openai_compat import OpenAICompatibleEmbedder
from docingest.pipeline.errors import EmbeddingFailed, EmbeddingUnavailable, ProviderRateLimited
from docingest.pipeline.settings import Settings
from tests.support.embedding_server import FakeEmbeddingServer, RecordedRequest, fake_vector
from tests.support.redis_db import TestRedis
from tests.support.settings import FAKE_DIMENSIONS

MODEL = "test-embed"  # unknown to the embedder: sized from the server's reply
DIMS = FAKE_DIMENSIONS


def settings_for(embedding_server: FakeEmbeddingServer, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "openai_base_url": embedding_server.base_url,
        "openai_api_key": "sk-test",
        "embedding_timeout_seconds": 2.0,
        "embedding_backoff_base_seconds": 0.01,
        "embedding_backoff_max_seconds": 0.02,
        "embedding_max_attempts": 5,
        "embedding_deadline_seconds": 10.0,
        "embedding_concurrency": 4,
    }
    values.update(overrides)
    return Settings(**values)


def embedder_for(
    embedding_server: FakeEmbeddingServer,
    *,
    model: str = MODEL,
    dimensions: int | None = None,
    redis: Redis | None = None,
    **overrides: Any,
) -> OpenAICompatibleEmbedder:
    return OpenAICompatibleEmbedder.from_settings(
        model=model,
        dimensions=dimensions,
        settings=settings_for(embedding_server, **overrides),
        redis=redis,
    )


def expected(texts: list[str], *, model: str = MODEL, dims: int = DIMS) -> np.ndarray:
    vectors = np.stack([fake_vector(model, text, dims) for text in texts])
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def texts_of(n: int, tag: str = "text") -> list[str]:
    return [f"{tag} {i}: the quick brown fox jumps over the lazy dog" for i in range(n)]


def sent_inputs(requests: list[RecordedRequest]) -> list[str]:
    return [text for request in requests for text in request.inputs]


def test_inputs_go_in_the_fewest_requests_the_count_limit_allows(
    embedding_server: FakeEmbeddingServer,
) -> None:
    texts = texts_of(95)
    with closing(embedder_for(embedding_server, embedding_max_batch=10)) as embedder:
        vectors = embedder.embed_documents(texts)
    assert len(embedding_server.requests) == 10
    assert sorted(len(r.inputs) for r in embedding_server.requests) == [5] + [10] * 9
    assert sorted(sent_inputs(embedding_server.requests)) == sorted(texts)
    np.testing.assert_allclose(vectors, expected(texts), atol=1e-6)


def test_token_budget_forces_splits(embedding_server: FakeEmbeddingServer) -> None:
    texts = texts_of(30)
    counter = token_counter(MODEL)
    per_text = counter.count(texts[0])
    assert all(counter.count(text) == per_text for text in texts)
    budget = per_text * 4 + 1  # four fit, five do not
    with closing(embedder_for(embedding_server, embedding_max_batch_tokens=budget)) as embedder:
        embedder.embed_documents(texts)
    assert len(embedding_server.requests) == 8  # ceil(30 / 4)
    assert all(sum(map(counter.count, r.inputs)) <= budget for r in embedding_server.requests)


def test_order_is_kept_under_concurrency(embedding_server: FakeEmbeddingServer) -> None:
    embedding_server.latency_jitter = 0.08
    texts = texts_of(60)
    with closing(
        embedder_for(embedding_server, embedding_max_batch=3, embedding_concurrency=8)
    ) as e:
        vectors = e.embed_documents(texts)
    np.testing.assert_allclose(vectors, expected(texts), atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    assert vectors.dtype == np.float32
    requests = embedding_server.requests
    assert len(requests) == 20
    overlapping = max(
        sum(1 for other in requests if other.received <= r.received < (other.answered or 0))
        for r in requests
    )
    assert overlapping >= 2, "requests were not in flight together"


def test_float_replies_are_accepted_too() -> None:
    with FakeEmbeddingServer(dimensions=DIMS, always_float=True) as embedding_server:
        with closing(embedder_for(embedding_server)) as embedder:
            vectors = embedder.embed_documents(["alpha", "beta"])
    np.testing.assert_allclose(vectors, expected(["alpha", "beta"]), atol=1e-6)


def test_retry_after_seconds_is_waited(embedding_server: FakeEmbeddingServer) -> None:
    embedding_server.add_faults({"status": 429, "headers": {"Retry-After": "2"}})
    with closing(embedder_for(embedding_server)) as embedder:
        embedder.embed_documents(["hello"])
    first, second = embedding_server.requests
    assert first.status == 429 and second.status == 200
    assert 1.9 <= second.received - first.received < 3.5


def test_retry_after_ms_is_waited(embedding_server: FakeEmbeddingServer) -> None:
    embedding_server.add_faults({"status": 503, "headers": {"retry-after-ms": "600"}})
    with closing(embedder_for(embedding_server)) as embedder:
        embedder.embed_documents(["hello"])
    first, second = embedding_server.requests
    assert 0.55 <= second.received - first.received < 1.5


def test_the_exhausted_rate_limit_reset_is_waited(embedding_server: FakeEmbeddingServer) -> None:
    headers = {
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "700ms",
        "x-ratelimit-remaining-tokens": "90000",
        "x-ratelimit-reset-tokens": "6m0s",  # not exhausted: not waited
    }
    embedding_server.add_faults({"status": 429, "headers": headers})
    with closing(embedder_for(embedding_server)) as embedder:
        embedder.embed_documents(["hello"])
    first, second = embedding_server.requests
    assert 0.65 <= second.received - first.received < 1.5


def test_persistent_500_fails_within_the_deadline(embedding_server: FakeEmbeddingServer) -> None:
    embedding_server.fail_when(lambda inputs: True, {"status": 500, "message": "upstream exploded"})
    started = time.monotonic()
    with closing(
        embedder_for(
            embedding_server,
            embedding_deadline_seconds=3.0,
            embedding_max_attempts=1000,
            embedding_backoff_base_seconds=0.05,
            embedding_backoff_max_seconds=0.3,
        )
    ) as embedder:
        with pytest.raises(EmbeddingUnavailable) as caught:
            embedder.embed_documents(["hello"])
    elapsed = time.monotonic() - started
    # Within the deadline, allowing a loaded machine its lag; without one, the 1,000 attempts
    # with their backoff would take minutes.
    assert elapsed <= 3.0 + 7.0
    assert len(embedding_server.requests) > 3
    message = caught.value.message
    assert (
        "HTTP 500" in message
        and embedding_server.base_url in message
        and "upstream exploded" in message
    )
    assert f"after {len(embedding_server.requests)} attempts" in message


def test_attempts_are_bounded(embedding_server: FakeEmbeddingServer) -> None:
    embedding_server.fail_when(lambda inputs: True, {"status": 502})
    with closing(embedder_for(embedding_server, embedding_max_attempts=3)) as embedder:
        with pytest.raises(EmbeddingUnavailable, match="after 3 attempts: HTTP 502"):
            embedder.embed_documents(["hello"])
    assert len(embedding_server.requests) == 3


def test_400_is_not_retried(embedding_server: FakeEmbeddingServer) -> None:
    embedding_server.add_faults({"status": 400, "message": "input is too long"})
    with closing(embedder_for(embedding_server)) as embedder:
        with pytest.raises(EmbeddingFailed, match="HTTP 400 .*input is too long"):
            embedder.embed_documents(["hello"])
    assert len(embedding_server.requests) == 1


def test_a_failed_batch_alone_is_retried(embedding_server: FakeEmbeddingServer) -> None:
    texts = texts_of(20)
    texts[7] = "MARKER " + texts[7]
    embedding_server.fail_inputs_containing("MARKER", {"status": 500}, times=2)
    with closing(embedder_for(embedding_server, embedding_max_batch=5)) as embedder:
        vectors = embedder.embed_documents(texts)
    np.testing.assert_allclose(vectors, expected(texts), atol=1e-6)
    sent = sent_inputs(embedding_server.requests)
    for index, text in enumerate(texts):
        assert sent.count(text) == (3 if 5 <= index < 10 else 1), index
    assert len(embedding_server.requests) == 6


def test_a_permanent_failure_cancels_the_batches_not_started(
    embedding_server: FakeEmbeddingServer,
) -> None:
    texts = texts_of(50)
    embedding_server.fail_inputs_containing(texts[12], {"status": 401, "message": "bad key"})
    with closing(
        embedder_for(embedding_server, embedding_max_batch=5, embedding_concurrency=1)
    ) as e:
        with pytest.raises(EmbeddingFailed, match="HTTP 401"):
            e.embed_documents(texts)
    time.sleep(0.2)
    assert (
        len(embedding_server.requests) == 3
    )  # batches 1 and 2 succeeded, 3 failed, 4-10 never sent


def test_a_timeout_is_retried(embedding_server: FakeEmbeddingServer) -> None:
    embedding_server.add_faults({"delay": 2.0})
    with closing(embedder_for(embedding_server, embedding_timeout_seconds=0.3)) as embedder:
        vectors = embedder.embed_documents(["slow"])
    np.testing.assert_allclose(vectors, expected(["slow"]), atol=1e-6)
    assert len(embedding_server.requests) == 2


def test_a_dropped_connection_is_retried(embedding_server: FakeEmbeddingServer) -> None:
    embedding_server.add_faults({"disconnect": True})
    with closing(embedder_for(embedding_server)) as embedder:
        embedder.embed_documents(["hello"])
    assert len(embedding_server.requests) == 2


def test_malformed_json_is_retried(embedding_server: FakeEmbeddingServer) -> None:
    embedding_server.add_faults({"malformed": True}, {"malformed": True})
    with closing(embedder_for(embedding_server)) as embedder:
        vectors = embedder.embed_documents(["hello", "world"])
    np.testing.assert_allclose(vectors, expected(["hello", "world"]), atol=1e-6)
    assert len(embedding_server.requests) == 3


def test_wrong_dimensions_fail_without_retry(embedding_server: FakeEmbeddingServer) -> None:
    embedding_server.add_faults({"wrong_dimensions": True})
    with closing(embedder_for(embedding_server, model="text-embedding-3-small")) as embedder:
        with pytest.raises(EmbeddingFailed, match="1537-dimensional vectors; expected 1536"):
            embedder.embed_documents(["hello"])
    assert len(embedding_server.requests) == 1


def test_dimensions_are_sent_only_to_shorten_a_text_embedding_3_model(
    embedding_server: FakeEmbeddingServer,
) -> None:
    model = "text-embedding-3-small"
    with closing(embedder_for(embedding_server, model=model, dimensions=256)) as embedder:
        assert embedder.dimensions == 256
        vectors = embedder.embed_documents(["hello"])
    assert vectors.shape == (1, 256)
    np.testing.assert_allclose(vectors, expected(["hello"], model=model, dims=256), atol=1e-6)
    with closing(embedder_for(embedding_server, model=model, dimensions=1536)) as embedder:
        assert embedder.embed_documents(["hello"]).shape == (1, 1536)
    with closing(embedder_for(embedding_server, model=model)) as embedder:
        assert embedder.dimensions == 1536
        embedder.embed_documents(["hello"])
    assert [r.dimensions for r in embedding_server.requests] == [256, None, None]
    with pytest.raises(ValueError, match="1536 dimensions; 256 unsupported"):
        embedder_for(embedding_server, model="text-embedding-ada-002", dimensions=256)
    assert len(embedding_server.requests) == 3


def test_an_unknown_model_learns_its_size_from_one_probe(
    embedding_server: FakeEmbeddingServer,
) -> None:
    with closing(embedder_for(embedding_server)) as embedder:
        assert embedder.dimensions == DIMS
        assert embedder.dimensions == DIMS
    assert len(embedding_server.requests) == 1
    assert embedding_server.requests[0].dimensions is None


def test_an_over_long_input_is_split_and_never_sent_whole(
    embedding_server: FakeEmbeddingServer,
) -> None:
    model = "text-embedding-3-small"
    counter = token_counter(model)
    long_text = " ".join(f"word{i} alpha beta" for i in range(6000))
    assert counter.count(long_text) > 8191
    texts = ["short before", long_text, "short after"]
    with closing(embedder_for(embedding_server, model=model, dimensions=64)) as embedder:
        vectors = embedder.embed_documents(texts)
    sent = sent_inputs(embedding_server.requests)
    assert long_text not in sent
    assert all(counter.count(text) <= 8191 for text in sent)
    windows = sent[1:-1]
    assert sent[0] == "short before" and sent[-1] == "short after"
    assert "".join(windows) == long_text and len(windows) >= 2
    weights = np.array([counter.count(window) for window in windows], dtype=np.float32)
    mean = (expected(windows, model=model, dims=64) * weights[:, None]).sum(axis=0)
    np.testing.assert_allclose(vectors[1], mean / np.linalg.norm(mean), atol=1e-5)
    np.testing.assert_allclose(vectors[[0, 2]], expected(texts[::2], model=model, dims=64))


def test_progress_is_monotonic_and_ends_at_n(embedding_server: FakeEmbeddingServer) -> None:
    embedding_server.latency_jitter = 0.03
    texts = texts_of(47)
    seen: list[int] = []
    with closing(embedder_for(embedding_server, embedding_max_batch=4)) as embedder:
        embedder.embed_documents(texts, on_progress=seen.append)
    assert len(seen) == 12
    assert seen == sorted(seen) and seen[-1] == 47 and seen[0] > 0


def test_counters_move_by_the_right_amounts(embedding_server: FakeEmbeddingServer) -> None:
    texts = texts_of(10)
    counter = token_counter(MODEL)
    tokens = sum(map(counter.count, texts))
    embedding_server.add_faults({"status": 500})
    before = COUNTERS.snapshot()
    with closing(embedder_for(embedding_server, embedding_max_batch=10)) as embedder:
        embedder.embed_documents(texts)
        embedding_server.add_faults({"status": 400})
        with pytest.raises(EmbeddingFailed):
            embedder.embed_documents(["doomed"])
    after = COUNTERS.snapshot()
    delta = {name: after[name] - before[name] for name in after}
    assert delta == {
        "requests": 3,
        "retries": 1,
        "failures": 1,
        "inputs": 21,
        "tokens": 2 * tokens + counter.count("doomed"),
    }


def test_embed_query_sends_one_input_with_the_key(embedding_server: FakeEmbeddingServer) -> None:
    with closing(embedder_for(embedding_server)) as embedder:
        vector = embedder.embed_query("what is a fox?")
    np.testing.assert_allclose(vector, expected(["what is a fox?"])[0], atol=1e-6)
    (request,) = embedding_server.requests
    assert request.inputs == ["what is a fox?"]
    assert request.model == MODEL and request.encoding_format == "base64"
    assert request.headers["authorization"] == "Bearer sk-test"


def test_empty_input_is_refused_before_anything_is_sent(
    embedding_server: FakeEmbeddingServer,
) -> None:
    with closing(embedder_for(embedding_server)) as embedder:
        with pytest.raises(ValueError, match="input 1 is empty"):
            embedder.embed_documents(["a", "", "c"])
    assert embedding_server.requests == []


def test_api_key(embedding_server: FakeEmbeddingServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(EmbeddingFailed, match="OPENAI_API_KEY"):
        OpenAICompatibleEmbedder.from_settings(
            model="text-embedding-3-small", dimensions=None, settings=Settings()
        )
    with closing(embedder_for(embedding_server, openai_api_key=None)) as embedder:  # a local server
        embedder.embed_query("hi")
    assert embedding_server.requests[-1].headers["authorization"] == "Bearer unused"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    with closing(embedder_for(embedding_server, openai_api_key=None)) as embedder:
        embedder.embed_query("hi")
    assert embedding_server.requests[-1].headers["authorization"] == "Bearer sk-from-env"


def test_the_shared_rate_limit_holds_requests_back(
    embedding_server: FakeEmbeddingServer, redis_db: TestRedis
) -> None:
    # The limiter's keys live under the global rate-limit prefix (a credential's limit is shared
    # by every deployment), so this test owns the unique scope of its fresh key, not a prefix.
    key = f"sk-{uuid.uuid4().hex}"
    redis = redis_db.client
    scope = credential_scope(embedding_server.base_url, key)
    try:
        with closing(
            embedder_for(
                embedding_server,
                redis=redis,
                openai_api_key=key,
                embedding_requests_per_minute=2,
                embedding_max_batch=1,
                embedding_deadline_seconds=1.0,
            )
        ) as embedder:
            embedder.embed_documents(["one", "two"])
            with pytest.raises(ProviderRateLimited):
                embedder.embed_query("three")
        assert len(embedding_server.requests) == 2
        assert redis.keys(f"*{scope}*"), "the limiter's keys carry the credential scope"
        assert not redis.keys(f"*{key}*"), "the key itself never reaches Redis"
    finally:
        for name in redis.keys(f"*{scope}*"):
            redis.delete(name)
