"""`Settings` of an in-process test deployment: DB 15, a private key prefix, Qdrant in memory,
short timeouts, and the fake embedding server when one is given."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from docingest.pipeline.settings import Settings
from tests.support.embedding_server import FakeEmbeddingServer
from tests.support.redis_db import TEST_REDIS_URL

FAKE_MODEL = "test-embed"
"""A model the OpenAI-compatible embedder does not know: sized from the fake's reply."""
FAKE_DIMENSIONS = 32


def service_settings(
    data_dir: Path, prefix: str, fake: FakeEmbeddingServer | None, **overrides: Any
) -> Settings:
    """Settings of a test deployment: DB 15, `prefix`, Qdrant in memory, the fake embedder
    (the local model without `fake`)."""
    values: dict[str, Any] = {
        "data_dir": data_dir,
        "redis_url": TEST_REDIS_URL,
        "redis_key_prefix": prefix,
        "qdrant_url": ":memory:",
        "embedding_timeout_seconds": 5.0,
        "embedding_backoff_base_seconds": 0.01,
        "embedding_backoff_max_seconds": 0.02,
        "embedding_max_attempts": 2,
        "embedding_deadline_seconds": 10.0,
        "heartbeat_interval_seconds": 0.2,
        "heartbeat_timeout_seconds": 5.0,
        "job_retry_base_seconds": 0.05,
        "job_retry_max_seconds": 0.2,
        "chunk_size": 300,
        "chunk_overlap": 0,
    }
    if fake is not None:
        values |= {
            "embedding_provider": "openai",
            "embedding_model": FAKE_MODEL,
            "embedding_dimensions": FAKE_DIMENSIONS,
            "openai_base_url": fake.base_url,
            "openai_api_key": "sk-test",
        }
    values.update(overrides)
    return Settings(**values)
