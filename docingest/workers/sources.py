"""The source scheduler of one process (`docingest serve`, or each `docingest worker`): every
`source_poll_seconds` it looks for due sources and runs, on its own threads, those whose
lease it wins (`docingest.pipeline.sources.runner`). A lease in Redis rather than Celery beat:
beat is one more process to deploy and keep single, while a lease lets every process offer to
run sources and exactly one runs each, as the housekeeping ticker does for the sweep. On a
service with no source a look costs one ZRANGEBYSCORE on an empty set (BENCHMARKS.md,
"Sources").
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor

from celery import Celery

from docingest.pipeline.errors import IngestError
from docingest.pipeline.keys import INGEST_QUEUE, INGEST_TASK
from docingest.pipeline.services import Services
from docingest.pipeline.sources import SourceRunner

log = logging.getLogger(__name__)


class SourceScheduler:
    def __init__(self, app: Celery, services: Services) -> None:
        settings = services.settings
        self._app = app
        self._interval = settings.source_poll_seconds
        self._slots = settings.source_concurrency
        self._stop = threading.Event()
        self._runner = SourceRunner(services, submit=self._submit, stopping=self._stop.is_set)
        self._pool = ThreadPoolExecutor(self._slots, thread_name_prefix="source-run")
        self._running: dict[tuple[str, str], Future[bool]] = {}
        self._thread = threading.Thread(target=self._loop, name="source-scheduler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop looking; runs under way stop at their next item and are carried on later
        (by this or another process) from their checkpoints."""
        self._stop.set()
        self._thread.join(timeout=5)
        self._pool.shutdown(wait=True, cancel_futures=True)

    def poll(self) -> int:
        """Start the due sources this process has room for; how many were started."""
        self._running = {key: run for key, run in self._running.items() if not run.done()}
        room = self._slots - len(self._running)
        if room <= 0:
            return 0
        started = 0
        for key in self._runner.due(room + len(self._running)):
            if key in self._running or len(self._running) >= self._slots:
                continue
            self._running[key] = self._pool.submit(self._runner.try_run, *key)
            started += 1
        return started

    def _submit(self, job_id: str) -> None:
        self._app.send_task(INGEST_TASK, args=[job_id], queue=INGEST_QUEUE)

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.poll()
            except (IngestError, OSError) as exc:  # Redis blipped; next look
                log.warning("source scheduler: %s", exc)
