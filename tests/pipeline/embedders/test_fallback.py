"""Same-model fallback endpoints: two or three fake OpenAI-compatible servers on loopback, the
real client, real HTTP; the primary down, slow or rate-limited, a fallback of the wrong size or
model (refused), the primary coming back (its circuit closes)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import ExitStack, closing
from typing import Any

import numpy as np
import pytest
from prometheus_client import REGISTRY
from pydantic import SecretStr

from docingest.pipeline.embedders.endpoint_check import PROBE_TEXT
from docingest.pipeline.embedders.endpoints import CircuitBreaker, primary_api_key
from docingest.pipeline.embedders.openai_compat import OpenAICompatibleEmbedder
from docingest.pipeline.embedders.usage import JobUsage, metering
from docingest.pipeline.errors import EmbeddingUnavailable
from docingest.pipeline.settings import Settings
from tests.support.embedding_server import FakeEmbeddingServer, RecordedRequest, fake_vector
from tests.support.waiting import wait_until

MODEL = "test-embed"
DIMS = 32


@pytest.fixture
def servers() -> Iterator[list[FakeEmbeddingServer]]:
    """Three fake servers of the same model: the primary and two candidate fallbacks."""
    with ExitStack() as stack:
        yield [stack.enter_context(FakeEmbeddingServer()) for _ in range(3)]


def settings_for(
    primary: FakeEmbeddingServer, *fallbacks: FakeEmbeddingServer, **overrides: Any
) -> Settings:
    values: dict[str, Any] = {
        "openai_base_url": primary.base_url,
        "openai_api_key": "sk-primary",
        "openai_fallback_urls": [server.base_url for server in fallbacks],
        "embedding_timeout_seconds": 2.0,
        "embedding_backoff_base_seconds": 0.01,
        "embedding_backoff_max_seconds": 0.02,
        "embedding_max_attempts": 3,
        "embedding_deadline_seconds": 20.0,
        "embedding_concurrency": 2,
        "embedding_max_batch": 4,
        "embedding_circuit_failures": 3,
        "embedding_circuit_open_seconds": 60.0,
    }
    return Settings(**(values | overrides))


def embedder_of(settings: Settings) -> OpenAICompatibleEmbedder:
    return OpenAICompatibleEmbedder.from_settings(model=MODEL, dimensions=DIMS, settings=settings)


def texts_of(n: int, tag: str = "text") -> list[str]:
    return [f"{tag} {i}: a sentence about field work in the hills" for i in range(n)]


def expected(texts: list[str]) -> np.ndarray:
    vectors = np.stack([fake_vector(MODEL, text, DIMS) for text in texts])
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def batches(server: FakeEmbeddingServer) -> list[RecordedRequest]:
    """The requests a server served, its check's probe left out."""
    return [request for request in server.served if request.inputs != [PROBE_TEXT]]


def metric(name: str, endpoint: str) -> float:
    return REGISTRY.get_sample_value(f"{name}_total", {"endpoint": endpoint}) or 0.0


def assert_usage_matches(usage: JobUsage, *servers: tuple[str, FakeEmbeddingServer]) -> None:
    """The job's usage equals the servers' own logs, request for request, token for token."""
    for label, server in servers:
        served = batches(server)
        used = usage.endpoints.get(label)
        if not served:
            assert used is None, label
            continue
        assert used is not None, label
        assert used.requests == len(served), label
        assert used.input_tokens == sum(request.prompt_tokens or 0 for request in served), label
    assert usage.embedding_requests == sum(u.requests for u in usage.endpoints.values())
    assert usage.input_tokens == sum(u.input_tokens for u in usage.endpoints.values())


def test_a_primary_that_goes_down_is_replaced_by_the_fallback(
    servers: list[FakeEmbeddingServer], caplog: pytest.LogCaptureFixture
) -> None:
    primary, fallback, _ = servers
    primary.fail_from(4, {"status": 503})  # its check and two batches, then down for good
    before = metric("docingest_embedding_failovers", "primary")
    texts = texts_of(40)
    with closing(embedder_of(settings_for(primary, fallback))) as embedder, metering() as meter:
        caplog.set_level(logging.INFO, logger="docingest.pipeline.embedders")
        vectors = embedder.embed_documents(texts)
        breaker = embedder.endpoints[0].breaker
    np.testing.assert_allclose(vectors, expected(texts), atol=1e-6)
    usage = meter.usage()
    assert usage.fallback_used and set(usage.endpoints) == {"primary", "fallback1"}
    assert usage.endpoints["primary"].requests == 2
    assert_usage_matches(usage, ("primary", primary), ("fallback1", fallback))
    assert sorted(t for r in batches(primary) + batches(fallback) for t in r.inputs) == sorted(
        texts
    )
    assert breaker.state == "open"
    # once open, batches skip the primary: it saw at most its threshold of failed attempts
    # plus what the batches already in flight there were sending
    failed = [r for r in primary.requests if r.status == 503]
    assert 3 <= len(failed) <= 3 + 2
    assert metric("docingest_embedding_failovers", "primary") > before
    assert "circuit open" in caplog.text
    assert "embedded by fallback1" in caplog.text


def test_a_fallback_answering_another_size_is_refused_and_the_next_one_serves(
    servers: list[FakeEmbeddingServer], caplog: pytest.LogCaptureFixture
) -> None:
    primary, _, good = servers
    with FakeEmbeddingServer(fixed_dimensions=DIMS + 16) as wrong:
        primary.fail_from(1, {"status": 500})
        settings = settings_for(primary, wrong, good)
        with closing(embedder_of(settings)) as embedder, metering() as meter:
            vectors = embedder.embed_documents(texts_of(6))
            checked = embedder.check_endpoints()
        assert wrong.requests and all(r.inputs == [PROBE_TEXT] for r in wrong.requests)
        assert len(wrong.requests) == 1, "refused for good after one probe"
    np.testing.assert_allclose(vectors, expected(texts_of(6)), atol=1e-6)
    assert set(meter.usage().endpoints) == {"fallback2"}
    assert checked["fallback1"].startswith("refused: it answers test-embed with 48-dimensional")
    assert checked["fallback2"] == "ok"
    assert checked["primary"].startswith("unchecked: HTTP 500")
    assert "fallback1" in caplog.text and "refused" in caplog.text


def test_a_fallback_serving_another_model_under_the_same_name_is_refused(
    servers: list[FakeEmbeddingServer],
) -> None:
    primary, _, _ = servers
    with FakeEmbeddingServer(model_salt="-v2-retrained") as impostor:
        settings = settings_for(primary, impostor)
        with closing(embedder_of(settings)) as embedder:
            checked = embedder.check_endpoints()  # what the service does on start
            primary.fail_from(1, {"status": 503})
            with pytest.raises(EmbeddingUnavailable) as caught:
                embedder.embed_documents(texts_of(3))
        assert [r.inputs for r in impostor.requests] == [[PROBE_TEXT]]
    assert checked["primary"] == "ok"
    assert "another model under the name test-embed" in checked["fallback1"]
    message = caught.value.message
    assert message.startswith("Embedding failed on every endpoint")
    assert "fallback1 refused" in message and "503" in message


def test_a_slow_primary_times_out_and_the_fallback_serves(
    servers: list[FakeEmbeddingServer],
) -> None:
    primary, fallback, _ = servers
    primary.fail_from(2, {"delay": 3.0})  # its check answers; then past the 0.5 s timeout
    settings = settings_for(
        primary, fallback, embedding_timeout_seconds=0.5, embedding_max_attempts=2
    )
    texts = texts_of(8)
    with closing(embedder_of(settings)) as embedder, metering() as meter:
        vectors = embedder.embed_documents(texts)
    np.testing.assert_allclose(vectors, expected(texts), atol=1e-6)
    assert set(meter.usage().endpoints) == {"fallback1"}
    assert_usage_matches(meter.usage(), ("primary", primary), ("fallback1", fallback))


def test_a_429_with_retry_after_is_waited_out_on_the_primary(
    servers: list[FakeEmbeddingServer],
) -> None:
    """A rate limit is not an outage: the primary is asked again after its Retry-After, and
    the fallback is not used."""
    primary, fallback, _ = servers
    primary.fail_inputs_containing(
        "text 0:", {"status": 429, "headers": {"Retry-After": "0.5"}}, times=1
    )
    settings = settings_for(primary, fallback)
    with closing(embedder_of(settings)) as embedder, metering() as meter:
        vectors = embedder.embed_documents(texts_of(1))
    np.testing.assert_allclose(vectors, expected(texts_of(1)), atol=1e-6)
    limited, served = [r for r in primary.requests if r.inputs != [PROBE_TEXT]]
    assert limited.status == 429 and served.status == 200
    assert served.received - limited.received >= 0.5  # the hint, never less
    assert batches(fallback) == [] and set(meter.usage().endpoints) == {"primary"}


def test_the_primary_takes_the_traffic_back_once_it_recovers(
    servers: list[FakeEmbeddingServer],
) -> None:
    primary, fallback, _ = servers
    settings = settings_for(primary, fallback, embedding_circuit_open_seconds=0.3)
    with closing(embedder_of(settings)) as embedder:
        embedder.check_endpoints()
        primary.fail_from(1, {"status": 503})
        with metering() as outage:
            embedder.embed_documents(texts_of(12, "down"))
        breaker = embedder.endpoints[0].breaker
        assert breaker.state in ("open", "half-open")
        primary.recover()
        wait_until(lambda: breaker.state == "half-open", timeout=10, what="the half-open probe")
        with metering() as probe:  # one batch: the half-open probe, a single attempt
            embedder.embed_documents(texts_of(1, "probe"))
        assert breaker.state == "closed"
        with metering() as recovered:  # (while a probe is out, other batches go on past it)
            embedder.embed_documents(texts_of(12, "back"))
    assert set(outage.usage().endpoints) == {"fallback1"}
    assert set(probe.usage().endpoints) == {"primary"}
    assert set(recovered.usage().endpoints) == {"primary"}


def test_every_endpoint_down_is_transient_and_names_each(
    servers: list[FakeEmbeddingServer],
) -> None:
    primary, fallback, _ = servers
    for server in (primary, fallback):
        server.fail_from(1, {"status": 502})
    with closing(embedder_of(settings_for(primary, fallback))) as embedder:
        with pytest.raises(EmbeddingUnavailable) as caught:
            embedder.embed_documents(texts_of(4))
    assert caught.value.code == "embedding_failed"
    assert "after 3 attempts on primary: HTTP 502" in caught.value.message
    assert "after 3 attempts on fallback1: HTTP 502" in caught.value.message
    assert len(primary.requests) == len(fallback.requests) == 3, "each retried as alone"


def test_each_endpoint_keeps_its_own_rate_limit_and_key(servers: list[FakeEmbeddingServer]) -> None:
    primary, first, second = servers
    settings = settings_for(
        primary,
        first,
        second,
        openai_fallback_api_keys=["sk-first"],
        embedding_requests_per_minute=100,
    )
    from redis import Redis

    from tests.support.redis_db import TEST_REDIS_URL

    with closing(Redis.from_url(TEST_REDIS_URL)) as redis:
        embedder = OpenAICompatibleEmbedder.from_settings(
            model=MODEL, dimensions=DIMS, settings=settings, redis=redis
        )
        with closing(embedder):
            keys = [endpoint.client.api_key for endpoint in embedder.endpoints]
            scopes = {endpoint.limiter.scope for endpoint in embedder.endpoints}  # type: ignore[attr-defined]
            labels = [endpoint.label for endpoint in embedder.endpoints]
    assert keys == ["sk-primary", "sk-first", "sk-primary"]  # the primary's key by default
    assert len(scopes) == 3
    assert labels == ["primary", "fallback1", "fallback2"]


def test_fallback_settings_read_comma_separated_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCINGEST_OPENAI_FALLBACK_URLS", "http://a:1/v1, http://b:2/v1")
    monkeypatch.setenv("DOCINGEST_OPENAI_FALLBACK_API_KEYS", "sk-a,")
    settings = Settings()
    assert settings.openai_fallback_urls == ["http://a:1/v1", "http://b:2/v1"]
    assert [key.get_secret_value() for key in settings.openai_fallback_api_keys] == ["sk-a", ""]
    monkeypatch.setenv("DOCINGEST_OPENAI_FALLBACK_API_KEYS", "k1,k2,k3")
    with pytest.raises(ValueError, match="more keys than there are fallbacks"):
        Settings()
    monkeypatch.delenv("DOCINGEST_OPENAI_FALLBACK_API_KEYS")
    assert primary_api_key(Settings(openai_api_key=SecretStr("sk-x"))) == "sk-x"


def test_the_breaker_opens_after_its_threshold_and_lets_one_probe_through() -> None:
    now = [0.0]
    breaker = CircuitBreaker(failures=2, open_seconds=10.0, clock=lambda: now[0])
    assert breaker.admit() == "normal"
    assert not breaker.failed() and breaker.failed()  # the second failure opens it
    assert breaker.admit() is None and breaker.state == "open"
    now[0] = 10.0
    assert breaker.admit() == "probe" and breaker.admit() is None  # one probe at a time
    assert breaker.failed() and breaker.state == "open"  # a failed probe: open again
    now[0] = 20.0
    assert breaker.admit() == "probe"
    assert breaker.succeeded() and breaker.state == "closed" and breaker.admit() == "normal"


def test_without_the_providers_count_tokens_are_counted_as_openai_does() -> None:
    """A reply without `usage` (some servers send none): tokens are cl100k_base's count."""
    from docingest.pipeline.embedders.batching import token_counter

    texts = texts_of(5)
    with FakeEmbeddingServer(report_usage=False) as server:
        with closing(embedder_of(settings_for(server))) as embedder, metering() as meter:
            embedder.embed_documents(texts)
    counter = token_counter(MODEL)
    assert meter.usage().input_tokens == sum(counter.count(text) for text in texts)
    assert meter.usage().embedding_requests == len(server.served) == 2  # batches of 4


def test_a_probe_that_ends_undecided_lets_the_next_one_go() -> None:
    now = [0.0]
    breaker = CircuitBreaker(failures=1, open_seconds=1.0, clock=lambda: now[0])
    breaker.failed()
    now[0] = 1.0
    assert breaker.admit() == "probe"
    breaker.probe_ended()  # its job was cancelled before the attempt decided anything
    assert breaker.state == "half-open" and breaker.admit() == "probe"
