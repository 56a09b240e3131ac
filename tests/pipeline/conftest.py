"""Fixtures of the pipeline's in-process tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from docingest.pipeline.services import Services
from tests.support.embedding_server import FakeEmbeddingServer
from tests.support.redis_db import TestRedis
from tests.support.services import services_factory


@pytest.fixture
def services(
    tmp_path: Path, embedding_server: FakeEmbeddingServer, redis_db: TestRedis
) -> Iterator[Services]:
    """One process's services: the test Redis, Qdrant in memory, the fake embedding server."""
    with services_factory(tmp_path, redis_db.prefix, embedding_server) as make:
        yield make()
