"""Run one ingestion job: claim it, prepare the staged upload, index it, record the outcome.

This is everything an ingest task does; the Celery task only turns `RetryJob` into a retry.
Each attempt owns the job through its attempt number (see `docingest.pipeline.jobs.state`); if the
sweep gives the job to another attempt meanwhile, this one notices at its next heartbeat or update
and stops without recording anything. The document version is allocated once per job and kept in
the job, so a redelivered job rewrites the same deterministic points instead of adding more.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import asdict, replace
from typing import Any

from docingest.pipeline import log as log_context
from docingest.pipeline import metrics
from docingest.pipeline.embedders.usage import JobUsage, UsageMeter, metering
from docingest.pipeline.errors import (
    Cancelled,
    DependencyUnavailable,
    IngestError,
    JobNotFound,
    PermanentError,
    ProviderRateLimited,
    RequestError,
    Superseded,
    TransientError,
)
from docingest.pipeline.indexing import IndexHooks, IndexResult
from docingest.pipeline.ingest.file import IngestHooks, IngestRequest, ingest_file
from docingest.pipeline.ingest.heartbeat import Heartbeat
from docingest.pipeline.ingest.progress import JobProgress, LostJob
from docingest.pipeline.ingest.store_wait import StoreWait, check_cap, store_problem
from docingest.pipeline.jobs.job import JobWork
from docingest.pipeline.jobs.state import JobStore
from docingest.pipeline.keys import JobStatus
from docingest.pipeline.redis_errors import map_redis_errors
from docingest.pipeline.services import Services
from docingest.pipeline.store.fencing import DEFAULT_LOCK_TIMEOUT, KEEP_ALIVE_TIMEOUT

log = logging.getLogger(__name__)


class RetryJob(Exception):  # not named ...Error: an instruction to the task, not an error
    """The job met a transient error and was re-queued: run it again after `countdown` s."""

    def __init__(
        self, countdown: float, cause: TransientError, *, store_wait: StoreWait | None = None
    ) -> None:
        why = f"{cause.code}: {cause.message}"
        if store_wait is None:
            super().__init__(f"retry in {countdown:.1f}s: {why}")
        else:
            waited = time.time() - store_wait.since
            super().__init__(
                f"waiting for the store ({waited:.0f}s so far), next check in {countdown:.1f}s: "
                f"{why}"
            )
        self.countdown = countdown
        self.cause = cause
        self.store_wait = store_wait
        """The job's wait for the store so far, for the next run to go on counting."""


def retry_delay(attempt: int, error: TransientError, *, base: float, cap: float) -> float:
    """Exponential backoff with jitter, at least the provider's Retry-After."""
    delay = min(cap, base * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)
    if isinstance(error, ProviderRateLimited) and error.retry_after:
        delay = max(delay, error.retry_after)
    return delay


def run_job(
    services: Services,
    job_id: str,
    *,
    timeout_errors: tuple[type[BaseException], ...] = (),
    store_wait: StoreWait | None = None,
) -> str:
    """Run `job_id` once; return what happened (for the log). Raises `RetryJob`.

    `timeout_errors` are the exceptions a task's time limit raises (Celery's
    `SoftTimeLimitExceeded`); they fail the job with `timeout`. `store_wait`: how long the
    job has waited for the store so far (`docingest.pipeline.ingest.store_wait`).
    """
    with log_context.bound(job_id=job_id):
        carried = _wait_for_store(services, job_id, store_wait)
        try:
            outcome = _run_job(services, job_id, timeout_errors=timeout_errors)
        except RetryJob as retry:  # a wait that was spent stays spent
            retry.store_wait = retry.store_wait or carried
            raise
        log.info("job %s: %s", job_id, outcome)  # one line per run, with the job's fields
        if outcome == "exhausted":  # after the line: a dead holder's lock may hold this up
            _drop_unpublished(services, job_id)
        return outcome


def _wait_for_store(services: Services, job_id: str, wait: StoreWait | None) -> StoreWait | None:
    """Raise `RetryJob` while the store server does not answer and the queued job may still
    wait for it (see `docingest.pipeline.ingest.store_wait`); return the wait to carry on
    (None once the store answers)."""
    problem = store_problem(services)
    if problem is None:
        return None
    try:
        waits = services.jobs.get(job_id).status is JobStatus.QUEUED
    except JobNotFound:
        waits = False
    if not waits:
        return wait  # finished, gone or running elsewhere: the claim knows what to do
    now = time.time()
    wait = wait.again() if wait is not None else StoreWait(since=now)
    settings = services.settings
    left = settings.job_store_wait_seconds - (now - wait.since)
    if left <= 0:
        log.warning("job %s: the store has not answered for %.0f s; running the job's "
                    "attempts: %s", job_id, now - wait.since, problem.message)  # fmt: skip
        return wait
    delay = retry_delay(
        wait.checks, problem, base=settings.job_retry_base_seconds, cap=check_cap(services)
    )
    raise RetryJob(min(delay, left), problem, store_wait=wait) from problem


def _run_job(
    services: Services, job_id: str, *, timeout_errors: tuple[type[BaseException], ...]
) -> str:
    settings = services.settings
    jobs = services.jobs
    claim = jobs.claim(
        job_id,
        max_attempts=settings.job_max_attempts,
        stale_after=settings.heartbeat_timeout_seconds,
    )
    if claim.outcome != "claimed":
        return claim.outcome  # logged by run_job
    attempt = claim.attempt
    started = time.perf_counter()
    with Heartbeat(jobs, job_id, attempt, interval=settings.heartbeat_interval_seconds) as beat:
        attempts_usage = UsageMeter()  # this attempt's and the earlier ones' (re-queued)
        try:
            work = jobs.work(job_id)
            log_context.add(index=work.job.index, document_id=work.job.document_id)
            with metering() as attempts_usage:
                attempts_usage.absorb(work.usage_carried or {})
                result = _process(services, work, attempt, beat)
            if work.usage_carried:
                result = replace(result, usage=_with_earlier(services, work, attempts_usage))
        except LostJob:
            return _lost(job_id)
        except Cancelled:
            if beat.lost:
                return _lost(job_id)
            jobs.mark_cancelled(job_id, attempt)
            metrics.JOBS_FINISHED.labels("cancelled", "").inc()
            return "cancelled"
        except (Superseded, PermanentError, RequestError) as exc:
            return _fail(jobs, job_id, attempt, exc.to_dict())
        except TransientError as exc:
            if beat.lost:
                return _lost(job_id)
            usage = asdict(attempts_usage.usage())
            return _requeue_or_fail(services, job_id, attempt, exc, usage=usage)
        except timeout_errors:
            limit = settings.task_soft_time_limit_seconds
            message = f"The job ran past its {limit} s time limit."
            return _fail(jobs, job_id, attempt, {"code": "timeout", "message": message})
        except Exception:
            log.exception("job %s stopped by an unexpected error", job_id)
            message = (
                "An unexpected error stopped the job; the server log has the details under "
                f"job {job_id}."
            )
            return _fail(jobs, job_id, attempt, {"code": "internal_error", "message": message})
    if not jobs.complete(job_id, attempt, asdict(result), index=work.job.index):
        return _lost(job_id)
    metrics.JOBS_FINISHED.labels("completed", "").inc()
    metrics.JOB_SECONDS.observe(time.perf_counter() - started)
    services.staged_path(work.staged_name).unlink(missing_ok=True)
    return "completed"


def _with_earlier(services: Services, work: JobWork, attempts: UsageMeter) -> JobUsage:
    """The usage of every attempt of the job, priced as `ingest_file` prices one."""
    config = services.store.index_config(work.job.index)
    price = services.settings.price_per_million_tokens(config.embedding.model if config else "")
    return attempts.usage(price_per_million_tokens=price)


def _requeue_or_fail(
    services: Services,
    job_id: str,
    attempt: int,
    exc: TransientError,
    *,
    usage: dict[str, Any] | None = None,
) -> str:
    """Fail the job once its attempts are spent; else re-queue it, carrying `usage` (its
    attempts' so far) to the next attempt, and raise `RetryJob`."""
    settings = services.settings
    if attempt >= settings.job_max_attempts:
        message = f"{exc.message} (gave up after {attempt} attempts)"
        return _fail(services.jobs, job_id, attempt, {"code": exc.code, "message": message})
    services.jobs.requeue(job_id, attempt=attempt, note=exc.to_dict(), usage=usage)
    delay = retry_delay(
        attempt, exc, base=settings.job_retry_base_seconds, cap=settings.job_retry_max_seconds
    )
    raise RetryJob(delay, exc) from exc


def _fail(jobs: JobStore, job_id: str, attempt: int, error: dict[str, str]) -> str:
    """Record `attempt`'s failure with `error` ({"code", "message"}); return the outcome."""
    jobs.fail(job_id, attempt, error)
    metrics.JOBS_FINISHED.labels("failed", error["code"]).inc()
    return f"failed: {error['code']}"


def _drop_unpublished(services: Services, job_id: str) -> None:
    """Delete what the killed attempts of a job failed as exhausted left staged: its version,
    unless that version was published before the last kill (then it is the document).

    Staged points are invisible to search, but they would stay in the index for good: no
    attempt of this job runs again to overwrite or drop them. Under the document's store lock,
    so a stale attempt still writing cannot publish what is being dropped; a killed holder's
    lock lapses within `KEEP_ALIVE_TIMEOUT`.
    """
    try:
        work = services.jobs.work(job_id)
        if work.version is None:  # no attempt got as far as writing
            return
        index, document_id = work.job.index, work.job.document_id
        store = services.store
        with (
            map_redis_errors(),
            services.fence.lock(
                index,
                document_id,
                timeout=KEEP_ALIVE_TIMEOUT,
                blocking_timeout=DEFAULT_LOCK_TIMEOUT,
                keep_alive=True,
            ),
        ):
            live = store.live_document(index, document_id)
            if live is None or live.version != work.version:
                store.discard(index, document_id, work.version)
    except IngestError as exc:  # best effort: the job has failed either way
        log.warning("staged points of job %s not dropped: %s", job_id, exc)


def _lost(job_id: str) -> str:
    log.warning("job %s was taken over by another attempt; this one stopped", job_id)
    return "lost"


def _process(services: Services, work: JobWork, attempt: int, beat: Heartbeat) -> IndexResult:
    job = work.job
    jobs = services.jobs
    progress = JobProgress(beat)
    path = services.staged_path(work.staged_name)
    if not path.is_file():
        raise DependencyUnavailable(
            f"The staged upload is missing on this worker ({path}); the staging directory "
            "must be shared by the API and every worker."
        )

    def should_cancel() -> bool:
        if beat.lost:
            raise LostJob()
        try:
            return jobs.cancel_requested(job.job_id)
        except DependencyUnavailable:
            return False

    request = IngestRequest(
        path,
        index=job.index,
        document_id=job.document_id,
        filename=job.filename,
        content_type=work.content_type,
        user_metadata=job.metadata,
        force=job.force,
        access=job.access,
    )
    hooks = IngestHooks(
        on_stage=progress.stage,
        on_page=progress.page,
        index=IndexHooks(
            on_progress=progress.chunks,
            should_cancel=should_cancel,
            on_stored=progress.stored,
            on_held=progress.held,
        ),
        version=lambda: _version(services, work, attempt),
    )
    result = ingest_file(services, request, hooks)
    progress.update(
        chunks_total=result.chunks, chunks_embedded=result.chunks, chunks_done=result.chunks
    )
    return result


def _version(services: Services, work: JobWork, attempt: int) -> int:
    """The document version this job writes: allocated by its first attempt, then kept."""
    if work.version is not None:
        return work.version
    job = work.job
    version = services.next_version(job.index, job.document_id)
    if not services.jobs.set_version(job.job_id, attempt, version):
        raise LostJob()
    return version
