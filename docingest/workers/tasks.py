"""The tasks: thin wrappers that call one pipeline function and turn `RetryJob` into a retry."""

from __future__ import annotations

import logging
from typing import Any

from celery import Celery, Task
from celery.exceptions import SoftTimeLimitExceeded
from celery.signals import worker_process_init, worker_process_shutdown

from docingest.pipeline.ingest.runner import RetryJob, run_job
from docingest.pipeline.ingest.store_wait import StoreWait
from docingest.pipeline.ingest.sweep import sweep
from docingest.pipeline.keys import HOUSEKEEPING_TASK, INGEST_QUEUE, INGEST_TASK
from docingest.workers import context
from docingest.workers.broker import job_ids_in_broker

log = logging.getLogger(__name__)


def register_tasks(app: Celery) -> None:
    """Register the ingest and housekeeping tasks (`docingest.pipeline.keys`) on `app`.

    Not shared with other apps (Celery's default): each app's tasks are closures over that
    app, and a second app in the process would otherwise be given the first one's.
    """

    @app.task(name=INGEST_TASK, bind=True, max_retries=None, shared=False)
    def ingest(self: Task, job_id: str, store_wait: dict[str, float] | None = None) -> str:
        try:
            return run_job(
                context.current(),
                job_id,
                timeout_errors=(SoftTimeLimitExceeded,),
                store_wait=StoreWait.from_message(store_wait),
            )
        except RetryJob as retry:
            log.warning("job %s: %s", job_id, retry)
            # always given: by default Celery would send this message's kwargs again
            wait = {"store_wait": retry.store_wait.to_message()} if retry.store_wait else {}
            raise self.retry(countdown=retry.countdown, exc=retry, kwargs=wait) from retry

    @app.task(name=HOUSEKEEPING_TASK, shared=False)
    def housekeeping() -> dict[str, Any]:
        def enqueue(job_id: str) -> None:
            ingest.apply_async(args=[job_id], queue=INGEST_QUEUE)

        services = context.current()
        report = sweep(
            services,
            enqueue=enqueue,
            in_broker=lambda job_ids, overdue_after: job_ids_in_broker(
                services, job_ids, overdue_after=overdue_after
            ),
        )
        return {
            "requeued": report.requeued,
            "resent": report.resent,
            "staged_deleted": report.staged_deleted,
            "deletes_finished": report.deletes_finished,
        }


@worker_process_init.connect
def _fresh_child(**_: Any) -> None:
    context.forget()


@worker_process_shutdown.connect
def _close_child(**_: Any) -> None:
    context.shutdown()
