"""Shared fixtures: the sample corpus, the test Redis and the fake embedding server.

The helpers behind them live in `tests/support/`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.embedding_server import FakeEmbeddingServer
from tests.support.paths import CORPUS_DIR
from tests.support.redis_db import TestRedis, private_redis, unique_prefix
from tests.support.settings import FAKE_DIMENSIONS


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    """The shared corpus of real public documents (read-only)."""
    return CORPUS_DIR


@pytest.fixture
def redis_db(request: pytest.FixtureRequest) -> Iterator[TestRedis]:
    """A decoding client of the test Redis (DB 15) and a key prefix of this test's own; the
    prefix's keys are deleted afterwards, and nothing else."""
    prefix = unique_prefix(request.node.module.__name__.rpartition(".")[2])
    with private_redis(prefix) as client:
        yield TestRedis(client, prefix)


@pytest.fixture
def embedding_server() -> Iterator[FakeEmbeddingServer]:
    """The fake OpenAI-compatible embedding server (real HTTP), `FAKE_DIMENSIONS` wide."""
    with FakeEmbeddingServer(dimensions=FAKE_DIMENSIONS) as server:
        yield server
