"""On start, with fallback endpoints configured, each endpoint is checked for the default model
and size; a start where every endpoint is refused fails with a message, one where some are
refused or down goes on (they are logged and never used, or checked again later)."""

from __future__ import annotations

from pathlib import Path

import pytest

from docingest.server import StartupError, check_embedding_endpoints
from tests.support.embedding_server import FakeEmbeddingServer
from tests.support.redis_db import TestRedis
from tests.support.services import services_factory
from tests.support.settings import FAKE_DIMENSIONS


def test_a_start_where_every_endpoint_serves_another_size_fails(
    tmp_path: Path, redis_db: TestRedis
) -> None:
    with (
        FakeEmbeddingServer(fixed_dimensions=FAKE_DIMENSIONS * 2) as primary,
        FakeEmbeddingServer(fixed_dimensions=FAKE_DIMENSIONS + 1) as fallback,
        services_factory(tmp_path, redis_db.prefix, primary) as make,
    ):
        services = make(openai_fallback_urls=[fallback.base_url])
        with pytest.raises(StartupError) as caught:
            check_embedding_endpoints(services)
    message = str(caught.value)
    assert message.startswith("No embedding endpoint serves the configured model")
    assert "primary refused: it answers test-embed with 64-dimensional vectors" in message
    assert "fallback1 refused: it answers test-embed with 33-dimensional vectors" in message


def test_a_start_with_one_refused_and_one_down_goes_on(
    tmp_path: Path, redis_db: TestRedis, embedding_server: FakeEmbeddingServer
) -> None:
    with (
        FakeEmbeddingServer(fixed_dimensions=FAKE_DIMENSIONS + 1) as wrong,
        FakeEmbeddingServer() as down,
        services_factory(tmp_path, redis_db.prefix, embedding_server) as make,
    ):
        down.fail_from(1, {"status": 503})
        services = make(openai_fallback_urls=[wrong.base_url, down.base_url])
        check_embedding_endpoints(services)  # no error: the primary serves
        outcome = services.check_embedding_endpoints()
    assert outcome["primary"] == "ok"
    assert outcome["fallback1"].startswith("refused: it answers test-embed with 33-dimensional")
    assert outcome["fallback2"].startswith("unchecked: HTTP 503")


def test_without_fallbacks_nothing_is_probed_on_start(
    tmp_path: Path, redis_db: TestRedis, embedding_server: FakeEmbeddingServer
) -> None:
    with services_factory(tmp_path, redis_db.prefix, embedding_server) as make:
        check_embedding_endpoints(make())
    assert embedding_server.requests == []
