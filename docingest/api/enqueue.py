"""Hand a recorded job to the Celery queue, failing fast when the broker is down."""

from __future__ import annotations

import logging

from celery import Celery
from kombu.exceptions import OperationalError
from redis.exceptions import RedisError

from docingest.pipeline.errors import DependencyUnavailable
from docingest.pipeline.jobs.state import JobStore
from docingest.pipeline.keys import INGEST_QUEUE, INGEST_TASK

log = logging.getLogger(__name__)

_PUBLISH_RETRY = {"max_retries": 2, "interval_start": 0, "interval_step": 0.5, "interval_max": 1}
"""Retry publishing briefly (a connection blip), then answer 503 rather than hang."""


def enqueue(celery: Celery, jobs: JobStore, job_id: str) -> None:
    """Send `job_id` to the ingest queue; on failure mark the job failed and raise 503."""
    try:
        celery.send_task(
            INGEST_TASK, args=[job_id], queue=INGEST_QUEUE, retry=True, retry_policy=_PUBLISH_RETRY
        )
    except (OperationalError, RedisError, OSError) as exc:
        log.error("could not queue job %s: %s", job_id, exc)
        error = DependencyUnavailable("The job queue (Redis) is unavailable; upload again later.")
        try:
            jobs.mark_unqueueable(job_id, error.to_dict())
        except DependencyUnavailable:
            pass
        raise error from exc
