"""The Celery app, built from `Settings` by `create_celery_app` (never at import time).

The settings that keep jobs safe, each for a reason:
- `task_acks_late` + `task_reject_on_worker_lost`: a task is acknowledged when it ends, and a
  task whose pool process died goes back to the queue instead of being lost.
- `worker_prefetch_multiplier=1`: a worker holds one unstarted task per slot, so a long job
  does not sit on others' work.
- the broker visibility timeout above the hard time limit (checked by `Settings`): a task
  still running is never delivered to a second worker (celery#5935).
- no result backend: job state lives in our own Redis hashes (`docingest.pipeline.jobs.state`).
"""

from __future__ import annotations

from celery import Celery

from docingest.pipeline.keys import (
    HOUSEKEEPING_QUEUE,
    HOUSEKEEPING_TASK,
    INGEST_QUEUE,
    INGEST_TASK,
    Keys,
)
from docingest.pipeline.settings import Settings

__all__ = ["HOUSEKEEPING_TASK", "INGEST_TASK", "broker_prefix", "create_celery_app"]


def broker_prefix(settings: Settings) -> str:
    """Prefix of every broker key, so several deployments (or test runs) share one Redis."""
    return Keys(settings.redis_key_prefix).broker_prefix


def create_celery_app(settings: Settings) -> Celery:
    """Return a Celery app for `settings`, with the docingest tasks registered."""
    from docingest.workers.tasks import register_tasks

    app = Celery("docingest", set_as_current=False)
    app.conf.update(
        broker_url=settings.redis_url,
        broker_transport_options={
            "visibility_timeout": settings.broker_visibility_timeout_seconds,
            "global_keyprefix": broker_prefix(settings),
        },
        broker_connection_retry_on_startup=True,
        task_serializer="json",
        accept_content=["json"],
        result_backend=None,
        task_ignore_result=True,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        worker_cancel_long_running_tasks_on_connection_loss=True,
        task_soft_time_limit=settings.task_soft_time_limit_seconds,
        task_time_limit=settings.task_time_limit_seconds,
        task_default_queue=INGEST_QUEUE,
        task_routes={
            INGEST_TASK: {"queue": INGEST_QUEUE},
            HOUSEKEEPING_TASK: {"queue": HOUSEKEEPING_QUEUE},
        },
        worker_hijack_root_logger=False,
        worker_send_task_events=False,
        enable_utc=True,
    )
    register_tasks(app)
    return app
