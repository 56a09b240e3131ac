"""Helpers shared by the job, runner, sweep, worker and API tests: a private Redis key prefix
on DB 15, service settings pointed at the fake embedding server, and waiting for a job."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from redis import Redis

from pipeline.jobs.state import Job, JobSpec, JobStore
from pipeline.settings import Settings
from tests.embedding_server import FakeEmbeddingServer
from tests.service import TEST_REDIS_URL, purge_keys

FAKE_MODEL = "test-embed"
"""A model the OpenAI-compatible embedder does not know: sized from the fake's reply."""
FAKE_DIMENSIONS = 32

TERMINAL = ("completed", "failed", "cancelled")


def unique_prefix(tag: str) -> str:
    return f"test-{tag}:{uuid.uuid4().hex[:12]}:"


@contextmanager
def private_redis(prefix: str) -> Iterator[Redis]:
    """A decoding client on DB 15; every key under `prefix` is deleted afterwards."""
    client = Redis.from_url(TEST_REDIS_URL, decode_responses=True)
    try:
        yield client
    finally:
        client.close()
        purge_keys(prefix)


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


def job_spec(
    index: str = "docs",
    *,
    document_id: str = "notes.txt",
    staged_name: str | None = None,
    size_bytes: int = 10,
    **fields: Any,
) -> JobSpec:
    """A job as the API would record it (its staged file is the caller's business)."""
    job_id = fields.pop("job_id", uuid.uuid4().hex)
    return JobSpec(
        job_id=job_id,
        index=index,
        document_id=document_id,
        filename=fields.pop("filename", document_id),
        staged_name=staged_name or job_id,
        size_bytes=size_bytes,
        content_sha256=fields.pop("content_sha256", None),
        content_type=fields.pop("content_type", None),
        metadata=fields.pop("metadata", {}),
        force=fields.pop("force", False),
    )


def wait_until(
    condition: Callable[[], bool], *, timeout: float = 30.0, what: str = "the condition"
) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not hold within {timeout:.0f} s")
        time.sleep(0.02)


def wait_for_status(
    jobs: JobStore, job_id: str, statuses: tuple[str, ...] = TERMINAL, *, timeout: float = 30.0
) -> Job:
    """Poll the job until its status is one of `statuses`; return it."""
    found: list[Job] = []

    def reached() -> bool:
        found[:] = [jobs.get(job_id)]
        return found[0].status in statuses

    try:
        wait_until(reached, timeout=timeout, what=f"job {job_id} reaching {statuses}")
    except TimeoutError as exc:
        raise TimeoutError(f"{exc}; last state: {found[0] if found else None}") from None
    return found[0]
