"""Fixtures of the end-to-end tests: one real `docingest serve` per test module.

The service runs as a subprocess (tests/support/docingest_service.py) with the local embedding
model, local-mode Qdrant in a temporary data directory, and its own Redis key prefix on DB 15,
removed after.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.docingest_service import ServiceEnv, running_serve
from tests.support.http_client import ApiClient
from tests.support.redis_db import purge_keys


@pytest.fixture(scope="module")
def serve_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceEnv]:
    """A `docingest serve` running for the whole module; yields its environment."""
    env = ServiceEnv(data_dir=tmp_path_factory.mktemp("serve"))
    try:
        with running_serve(env):
            yield env
    finally:
        purge_keys(env.key_prefix)


@pytest.fixture(scope="module")
def api(serve_env: ServiceEnv) -> Iterator[ApiClient]:
    """An HTTP client of the module's service."""
    client = ApiClient(serve_env.base_url)
    yield client
    client.close()
