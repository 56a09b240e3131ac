"""Shared fixtures: the sample corpus, the test Redis, the fake embedding server and a real
`docingest serve`.

The helpers behind them live in `tests/support/`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.docingest_service import ServiceEnv, running_serve
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


@pytest.fixture(scope="module")
def serve_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceEnv]:
    """A real `docingest serve` (API and in-process worker, local model, local-mode Qdrant in
    a temporary directory, its own key prefix on DB 15) for the whole module; its environment."""
    env = ServiceEnv(data_dir=tmp_path_factory.mktemp("serve"))
    with running_serve(env):
        yield env
