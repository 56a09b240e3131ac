"""Run the sources that are due, each by exactly one process: a run needs the source's lease
in Redis (`SET NX PX`, renewed while it runs), which any number of schedulers in any number
of processes compete for. A process that dies mid-run stops renewing; once the lease lapses
the source is due again and the next scheduler carries the run on from its checkpoint, or,
when its cancel was asked meanwhile, ends it `cancelled` before reading anything.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import uuid
from collections.abc import Callable

from docingest.pipeline import metrics
from docingest.pipeline.errors import IngestError
from docingest.pipeline.services import Services
from docingest.pipeline.sources.store import source_store
from docingest.pipeline.sources.sync import LeaseLost, RunContext, run_once

log = logging.getLogger(__name__)

COMPLETED_EVENT = "source.sync.completed"
FAILED_EVENT = "source.sync.failed"
CANCELLED_EVENT = "source.sync.cancelled"
EVENTS = {"completed": COMPLETED_EVENT, "failed": FAILED_EVENT, "cancelled": CANCELLED_EVENT}
"""The webhook event of each way a run ends."""
CANCEL_CHECK_SECONDS = 1.0
"""How often a run reads whether its cancel was asked: a run checks per item, and a crawl of
unchanged pages goes through hundreds a second; a second is as prompt as a person needs."""


class SourceRunner:
    """Runs due sources for one process; `submit` hands a job id to the ingest queue."""

    def __init__(
        self,
        services: Services,
        *,
        submit: Callable[[str], None],
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        self._services = services
        self._store = source_store(services)
        self._submit = submit
        self._stopping = stopping
        self._lease_seconds = services.settings.source_lease_seconds
        self._token_base = uuid.uuid4().hex

    def due(self, most: int) -> list[tuple[str, str]]:
        return self._store.due(most)

    def try_run(self, index: str, name: str) -> bool:
        """Run the source if this process wins its lease; whether it ran."""
        token = f"{self._token_base}:{uuid.uuid4().hex}"
        store = self._store
        if not store.take_lease(index, name, token, self._lease_seconds):
            return False
        lost = threading.Event()
        done = threading.Event()
        renewer = threading.Thread(
            target=self._renew,
            args=(index, name, token, lost, done),
            name=f"source-lease-{index}-{name}",
            daemon=True,
        )
        renewer.start()
        try:
            self._run(index, name, token, lost)
        finally:
            done.set()
            renewer.join(timeout=5)
            try:
                store.release_lease(index, name, token)
            except IngestError as exc:
                log.warning("source %s/%s: could not release its lease: %s", index, name, exc)
        return True

    def _run(self, index: str, name: str, token: str, lost: threading.Event) -> None:
        store = self._store
        source = store.get(index, name)
        if source is None:  # deleted while due
            store.forget_due(index, name)
            return
        current = store.current(index, name)
        run = store.start(index, name, trigger=current.trigger if current else "schedule")
        began = time.monotonic()
        context = RunContext(
            services=self._services,
            store=store,
            submit=self._submit,
            lease_held=lambda: not lost.is_set(),
            stopping=self._stopping,
            cancel_requested=Throttled(
                lambda: store.cancel_requested(index, name), CANCEL_CHECK_SECONDS
            ),
        )
        try:
            ended = run_once(context, source, run)
        except LeaseLost:
            log.warning("source %s/%s: run %s left to another process", index, name, run.run_id)
            return
        latest = store.get(index, name) or source
        next_due = time.time() + latest.schedule.seconds if latest.schedule else None
        event = EVENTS[ended.status]
        if store.finish(latest, ended, token=token, next_due=next_due, event=event):
            metrics.SOURCE_RUNS.labels(index, name, ended.status).inc()
            metrics.SOURCE_RUN_SECONDS.labels(index, name).observe(time.monotonic() - began)
            log.info(
                "source %s/%s: run %s %s: %s",
                index,
                name,
                run.run_id,
                ended.status,
                ended.counts.model_dump(),
            )

    def _renew(
        self, index: str, name: str, token: str, lost: threading.Event, done: threading.Event
    ) -> None:
        while not done.wait(self._lease_seconds / 3):
            try:
                if not self._store.renew_lease(index, name, token, self._lease_seconds):
                    lost.set()
                    return
            except IngestError as exc:  # Redis blipped: try again before the lease lapses
                log.warning("source %s/%s: lease renewal failed: %s", index, name, exc)


class Throttled:
    """A yes/no read at most every `seconds` (the first call reads); in between, the last
    answer. Once yes, always yes: a cancel is never taken back."""

    def __init__(self, read: Callable[[], bool], seconds: float) -> None:
        self._read = read
        self._seconds = seconds
        self._read_at = -math.inf
        self._answer = False

    def __call__(self) -> bool:
        now = time.monotonic()
        if not self._answer and now - self._read_at >= self._seconds:
            self._read_at = now
            self._answer = self._read()
        return self._answer
