"""One run of a source: list, compare, send what is new or changed through the ordinary job
path, delete what vanished (when the source prunes), wait for its jobs, and finish.

Each item compared is recorded at once (`SourceStore.mark`: the checkpoint, its counts, its
fingerprint, its job), so a run whose process dies is carried on by the next lease holder
without fetching again what was already compared. A listing that fails ends the run
`failed` and deletes nothing: only a complete listing says what vanished. An item that
cannot be fetched, or whose job fails, counts in `failed` and keeps no fingerprint, so the
next run tries it again. A run whose cancel was asked stops listing, deletes nothing (its
listing is incomplete), cancels its jobs still pending, and ends `cancelled`; the items of
those jobs keep no fingerprint, so the next run brings them.
"""

from __future__ import annotations

import logging
import time
import unicodedata
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from docingest.pipeline import metrics
from docingest.pipeline.errors import (
    DocumentNotFound,
    IngestError,
    InvalidSource,
    JobNotFound,
    JobStateConflict,
    SourceUnreadable,
)
from docingest.pipeline.ingest.staging import check_room
from docingest.pipeline.jobs.job import JobSpec
from docingest.pipeline.keys import TERMINAL_STATUSES, JobStatus
from docingest.pipeline.outbox.store import rfc3339
from docingest.pipeline.services import Services
from docingest.pipeline.sources.base import Fetched, Found, ItemFailed
from docingest.pipeline.sources.registry import source_type
from docingest.pipeline.sources.spec import Run, RunError, StoredSource
from docingest.pipeline.sources.store import SourceStore

log = logging.getLogger(__name__)

MAX_DOCUMENT_ID_CHARS = 512
"""As an upload's `document_id` (docingest/api/routes/documents.py)."""
JOB_POLL_SECONDS = 0.5
JOBS_PER_READ = 500
UNCHANGED_BATCH = 500
"""Unchanged items recorded in one Redis step. Batching costs nothing on a restart: an
unchanged item not yet recorded is compared again, which fetches nothing (BENCHMARKS.md,
"Sources")."""


class LeaseLost(Exception):
    """Another process took the source's run over (this one stalled past its lease)."""


class RunCancelled(Exception):
    """Not an error: the run's cancel was asked (`SourceStore.cancel_run`)."""


@dataclass
class RunContext:
    """What a run needs besides its source: the process's clients, how to hand a job to
    the queue, whether the lease is still this run's, and whether its cancel was asked."""

    services: Services
    store: SourceStore
    submit: Callable[[str], None]
    lease_held: Callable[[], bool]
    stopping: Callable[[], bool] = lambda: False
    cancel_requested: Callable[[], bool] = lambda: False


def run_once(context: RunContext, source: StoredSource, run: Run) -> Run:
    """Carry `run` of `source` to its end and return it ended (not yet recorded: the
    caller finishes it with its lease). Raises `LeaseLost` if the run is no longer ours."""
    index, name = source.index, source.name
    try:
        try:
            _carry(context, source)
            status = "completed"
        except RunCancelled:
            _stop_cancelled(context, source)
            status = "cancelled"
        error = None
    except LeaseLost:
        raise
    except (SourceUnreadable, InvalidSource) as exc:
        status, error = "failed", RunError(code=exc.code, message=exc.message)
    except IngestError as exc:  # Redis down, staging full: the run fails, nothing is lost
        status, error = "failed", RunError(code=exc.code, message=exc.message)
    except Exception as exc:  # a reader's bug must not take the scheduler down
        log.exception("source %s/%s: run failed", index, name)
        status, error = "failed", RunError(code="source_error", message=f"The run failed: {exc}.")
    ended = context.store.current(index, name) or run
    return ended.model_copy(
        update={"status": status, "error": error, "finished_at": rfc3339(time.time())}
    )


def _carry(context: RunContext, source: StoredSource) -> None:
    if context.cancel_requested():  # cancelled while queued, or after its process died
        raise RunCancelled()
    kind = source_type(source.type)
    config = kind.config.model_validate(source.config)
    kind.check(config, context.services.settings)
    reader = kind.open(config, context.services.settings)
    try:
        _walk(context, source, reader)
    finally:
        reader.close()
    if source.prune:
        _prune(context, source)
    _wait_for_jobs(context, source)


def _walk(context: RunContext, source: StoredSource, reader: Any) -> None:
    store, services = context.store, context.services
    index, name = source.index, source.name
    known = store.known(index, name)
    seen = store.seen(index, name)
    unchanged: list[tuple[str, dict[str, Any] | None]] = []

    def flush() -> None:
        store.mark_unchanged(index, name, unchanged)
        metrics.SOURCE_ITEMS.labels(index, name, "unchanged").inc(len(unchanged))
        unchanged.clear()

    if services.owns_store:
        services.ensure_index(index)
    for found in reader.walk(known, lambda: services.staged_path(uuid.uuid4().hex)):
        item = found.item
        if item.document_id in seen:  # compared before this run was interrupted
            _discard(found.staged)
            continue
        seen.add(item.document_id)
        previous = known.get(item.document_id)
        if found.failure is None and (
            found.unchanged or (previous is not None and previous.get("fp") == item.fingerprint)
        ):
            _discard(found.staged)  # read by the walk (a crawler), the same bytes as before
            keep = found.staged is not None or found.unchanged
            unchanged.append(
                (item.document_id, {"fp": item.fingerprint, **item.extra} if keep else None)
            )
            if len(unchanged) >= UNCHANGED_BATCH:
                _check_lease(context)
                flush()  # before a cancel's check too: a cancelled run's counts are kept
                _check(context)
            continue
        flush()
        try:
            _check(context)
        except (LeaseLost, RunCancelled):
            _discard(found.staged)  # the item in hand: fetched again by the run that goes on
            raise
        if found.failure is not None:
            log.warning("source %s/%s: %s: %s", index, name, item.uri, found.failure.message)
            store.mark(index, name, item.document_id, ("listed", "failed"))
            metrics.SOURCE_ITEMS.labels(index, name, "failed").inc()
            continue
        outcome = "changed" if previous is not None else "new"
        try:
            job_id = _submit(context, source, found, reader)
        except ItemFailed as exc:
            log.warning("source %s/%s: %s: %s", index, name, item.uri, exc.message)
            store.mark(index, name, item.document_id, ("listed", "failed"))
            metrics.SOURCE_ITEMS.labels(index, name, "failed").inc()
            continue
        store.mark(
            index,
            name,
            item.document_id,
            ("listed", outcome),
            record={"fp": item.fingerprint, **item.extra},
            job=(job_id, outcome),
        )
        metrics.SOURCE_ITEMS.labels(index, name, outcome).inc()
    flush()


def _submit(context: RunContext, source: StoredSource, found: Found, reader: Any) -> str:
    """Stage the item and record and queue its job, as an upload is; its job id."""
    services = context.services
    item = found.item
    _check_document_id(item.document_id)
    job_id = uuid.uuid4().hex
    destination = services.staged_path(job_id)
    try:
        check_room(services.settings, more_bytes=item.size or 0)
        if found.staged is not None and found.fetched is not None:
            found.staged.rename(destination)
            fetched: Fetched = found.fetched
        else:
            fetched = reader.fetch(item, destination)
        if fetched.size == 0:
            raise ItemFailed("empty_document", f"{item.uri} is empty (0 bytes).")
        provenance = {
            key: value
            for key, value in (
                ("name", source.name),
                ("uri", item.uri),
                ("etag", item.etag),
                ("last_modified", item.last_modified),
            )
            if value is not None
        }
        services.jobs.create(
            JobSpec(
                job_id=job_id,
                index=source.index,
                document_id=item.document_id,
                filename=item.filename,
                staged_name=job_id,
                size_bytes=fetched.size,
                content_sha256=fetched.sha256,
                content_type=fetched.content_type,
                metadata={**source.metadata, "source": provenance},
                access=source.access,
                force=False,
            )
        )
    except BaseException:
        destination.unlink(missing_ok=True)
        _discard(found.staged)
        raise
    context.submit(job_id)
    return job_id


def _check_document_id(document_id: str) -> None:
    if not 0 < len(document_id) <= MAX_DOCUMENT_ID_CHARS or any(
        unicodedata.category(char) == "Cc" for char in document_id
    ):
        raise ItemFailed(
            "invalid_upload",
            f"The item's id is not a document id (1-{MAX_DOCUMENT_ID_CHARS} characters "
            "without control characters).",
        )


def _prune(context: RunContext, source: StoredSource) -> None:
    """Delete the documents of the items the complete listing no longer shows."""
    store, index, name = context.store, source.index, source.name
    seen = store.seen(index, name)
    for item_id in store.item_ids(index, name):
        if item_id in seen:
            continue
        _check(context)
        try:
            context.services.delete_document(index, item_id)
        except DocumentNotFound:
            pass
        store.forget_item(index, name, item_id, {"deleted": 1})
        metrics.SOURCE_ITEMS.labels(index, name, "deleted").inc()


def _stop_cancelled(context: RunContext, source: StoredSource) -> None:
    """Cancel the run's jobs still pending (a processing one is asked to stop, as
    `DELETE /v1/jobs/{id}` does) and wait for them, so that no document of the run lands after
    it ended; their items keep no fingerprint and leave `new`/`changed`, not for `failed`."""
    index, name = source.index, source.name
    for job_id in context.store.run_jobs(index, name):
        try:
            context.services.jobs.cancel(job_id)
        except (JobNotFound, JobStateConflict):  # ended meanwhile: counted as it ended
            pass
    _wait_for_jobs(context, source, cancelled=True)


def _wait_for_jobs(context: RunContext, source: StoredSource, *, cancelled: bool = False) -> None:
    """Wait until every job of the run has ended; a failed one moves its item to `failed`
    and drops its fingerprint, so the next run tries it again (a job the cancel of the run
    stopped drops it too, without counting in `failed`)."""
    store, redis, keys = context.store, context.services.redis, context.services.keys
    index, name = source.index, source.name
    while True:
        pending = store.run_jobs(index, name)
        if not pending:
            return
        job_ids = list(pending)
        for start in range(0, len(job_ids), JOBS_PER_READ):
            batch = job_ids[start : start + JOBS_PER_READ]
            pipe = redis.pipeline(transaction=False)
            for job_id in batch:
                pipe.hget(keys.job(job_id), "status")
            for job_id, status in zip(batch, pipe.execute(), strict=True):
                if status is not None and status not in TERMINAL_STATUSES:
                    continue
                item_id, outcome = pending[job_id]
                if cancelled and status == JobStatus.CANCELLED:
                    store.forget_item(index, name, item_id, {outcome: -1})
                elif status in (JobStatus.FAILED, JobStatus.CANCELLED):
                    store.forget_item(index, name, item_id, {outcome: -1, "failed": 1})
                    metrics.SOURCE_ITEMS.labels(index, name, "failed").inc()
                store.drop_job(index, name, job_id)
        if store.run_jobs(index, name):
            if cancelled:
                _check_lease(context)
            else:
                _check(context)
            time.sleep(JOB_POLL_SECONDS)


def _check(context: RunContext) -> None:
    _check_lease(context)
    if context.cancel_requested():
        raise RunCancelled()


def _check_lease(context: RunContext) -> None:
    if not context.lease_held() or context.stopping():
        raise LeaseLost("the run's lease is no longer held")


def _discard(path: Path | None) -> None:
    if path is not None:
        path.unlink(missing_ok=True)
