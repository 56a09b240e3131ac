"""A Celery worker inside the current process, on a thread pool (the embedded topology).

`docingest serve` runs the API and this worker in one process so both share one embedded
store. It uses Celery's `WorkController` directly, as celery.contrib.testing does: the
`celery worker` program would install signal handlers, which only the main thread may do.
"""

from __future__ import annotations

import logging
import threading

from celery import Celery
from celery.worker import WorkController
from celery.worker import state as worker_state

from docingest.pipeline.keys import HOUSEKEEPING_QUEUE, INGEST_QUEUE

log = logging.getLogger(__name__)

PREFETCH_MULTIPLIER = 2
"""Messages held per thread: each slot has its next job at hand when one ends, instead of
waiting for the ack and the next fetch to go through the event loop, which serves more small
jobs per second (BENCHMARKS.md, "Small jobs under load"). `docingest.workers.app`'s 1 keeps a
scaled-out worker from sitting on others' work; this worker is the only one. A held message
waits at most one job before it starts, so it may stay unacknowledged past the visibility
timeout and be delivered again while it runs; that copy finds the job claimed and busy
(`docingest.pipeline.jobs.scripts.CLAIM`) and does nothing."""


class EmbeddedWorker:
    """Start with `start()`, stop with `stop()` (running tasks finish first, up to `timeout`)."""

    def __init__(self, app: Celery, *, concurrency: int, hostname: str = "embedded@%h") -> None:
        # Pool threads run a task as the *default* app's copy of it (tasks are shared by every
        # app), so `self.retry()` would publish through the default app's broker (AMQP on
        # localhost) and the retry would be lost. The `celery worker` program and
        # celery.contrib.testing make the worker's app the current and default one; so do we.
        app.finalize()
        app.set_current()
        app.set_default()
        self._controller = WorkController(
            app=app,
            pool_cls="threads",
            concurrency=concurrency,
            prefetch_multiplier=PREFETCH_MULTIPLIER,
            hostname=hostname,
            queues=[INGEST_QUEUE, HOUSEKEEPING_QUEUE],
            without_heartbeat=True,
            without_mingle=True,
            without_gossip=True,
            loglevel=logging.WARNING,
        )
        self._thread = threading.Thread(
            target=self._controller.start, name="celery-worker", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Warm shutdown: stop consuming, let running tasks finish."""
        self._controller.stop(in_sighandler=False, exitcode=0)
        self._thread.join(timeout)
        if self._thread.is_alive():
            log.warning("the embedded worker did not stop within %.0f s", timeout)
        worker_state.should_terminate = None
