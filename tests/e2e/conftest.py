"""Fixtures of the end-to-end tests: a client of the module's `docingest serve` (`serve_env`,
tests/conftest.py), a subprocess with the local embedding model, the embedded store in a
temporary data directory, and its own Redis key prefix on DB 15, removed after.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.docingest_service import ServiceEnv
from tests.support.http_client import ApiClient


@pytest.fixture(scope="module")
def api(serve_env: ServiceEnv) -> Iterator[ApiClient]:
    """An HTTP client of the module's service."""
    client = ApiClient(serve_env.base_url)
    yield client
    client.close()
