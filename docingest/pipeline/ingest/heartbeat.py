"""`Heartbeat`: the thread that keeps a job attempt alive in Redis and writes its progress."""

from __future__ import annotations

import contextvars
import logging
import threading
from types import TracebackType
from typing import Any

from docingest.pipeline.errors import DependencyUnavailable
from docingest.pipeline.jobs.state import JobStore

log = logging.getLogger(__name__)


class Heartbeat:
    """A thread that records every `interval` s that an attempt is alive, until closed, and
    writes the progress posted to it (`post`), so the job never waits on Redis for it.

    Posts that arrive while a write is under way are merged (the newest value of each field
    wins) and go out together in the next write: a small upload's five or six progress
    updates cost the job no round trip, and a large one's per-batch updates no more than one
    at a time. Every write is also a heartbeat; one that finds the attempt no longer owns the
    job sets `lost`. Closing writes what is still pending, so the job's last progress lands
    before its outcome is recorded.
    """

    def __init__(self, jobs: JobStore, job_id: str, attempt: int, *, interval: float) -> None:
        self._jobs, self._job_id, self._attempt = jobs, job_id, attempt
        self._interval = interval
        self._stop = threading.Event()
        self._posted = threading.Event()
        self._lock = threading.Lock()
        self._pending: dict[str, Any] = {}
        self.lost = False
        self._thread = threading.Thread(
            target=contextvars.copy_context().run,  # its log lines carry the job's fields
            args=(self._run,),
            name=f"heartbeat-{job_id}",
            daemon=True,
        )

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._posted.set()
        self._thread.join(timeout=self._interval + 5)

    def post(self, **fields: Any) -> None:
        """Have `fields` (`JobStore.update`'s keyword arguments) written soon."""
        with self._lock:
            self._pending.update(fields)
        self._posted.set()

    def _run(self) -> None:
        while not self.lost:
            self._posted.wait(self._interval)
            self._posted.clear()
            stopping = self._stop.is_set()
            with self._lock:
                fields, self._pending = self._pending, {}
            if fields or not stopping:
                self._write(fields)
            if stopping:
                return

    def _write(self, fields: dict[str, Any]) -> None:
        try:
            if not self._jobs.update(self._job_id, self._attempt, **fields):
                self.lost = True
        except DependencyUnavailable as exc:  # Redis blipped: the next write may pass
            log.warning("heartbeat or progress of job %s not recorded: %s", self._job_id, exc)
