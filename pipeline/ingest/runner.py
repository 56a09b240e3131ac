"""Run one ingestion job: claim it, prepare the staged upload, index it, record the outcome.

This is everything an ingest task does; the Celery task only turns `RetryJob` into a retry.
Each attempt owns the job through its attempt number (see `pipeline.jobs.state`); if the sweep gives
the job to another attempt meanwhile, this one notices at its next heartbeat or update and
stops without recording anything. The document version is allocated once per job and kept in
the job, so a redelivered job rewrites the same deterministic points instead of adding more.
"""

from __future__ import annotations

import contextvars
import logging
import random
import threading
import time
from dataclasses import asdict
from types import TracebackType
from typing import Any

from pipeline import log as log_context
from pipeline import metrics
from pipeline.errors import (
    Cancelled,
    DependencyUnavailable,
    PermanentError,
    ProviderRateLimited,
    TransientError,
)
from pipeline.indexing.run import (
    TIMED_STAGES,
    IndexHooks,
    IndexRequest,
    IndexResult,
    index_document,
)
from pipeline.isolation.parent import open_prepared
from pipeline.jobs.job import JobWork
from pipeline.jobs.state import JobStore, stage_progress
from pipeline.keys import JobStage
from pipeline.redis_errors import map_redis_errors
from pipeline.services import Services

log = logging.getLogger(__name__)


class RetryJob(Exception):  # not named ...Error: an instruction to the task, not an error
    """The job met a transient error and was re-queued: run it again after `countdown` s."""

    def __init__(self, countdown: float, cause: TransientError) -> None:
        super().__init__(f"retry in {countdown:.1f}s: {cause.code}: {cause.message}")
        self.countdown = countdown
        self.cause = cause


class LostJob(Exception):
    """This attempt no longer owns the job (re-queued by the sweep, or finished elsewhere)."""


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
) -> str:
    """Run `job_id` once; return what happened (for the log). Raises `RetryJob`.

    `timeout_errors` are the exceptions a task's time limit raises (Celery's
    `SoftTimeLimitExceeded`); they fail the job with `timeout`.
    """
    with log_context.bound(job_id=job_id):
        outcome = _run_job(services, job_id, timeout_errors=timeout_errors)
        log.info("job %s: %s", job_id, outcome)  # one line per run, with the job's fields
        return outcome


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
        try:
            work = jobs.work(job_id)
            log_context.add(index=work.job.index, document_id=work.job.document_id)
            result = _process(services, work, attempt, beat)
        except LostJob:
            return _lost(job_id)
        except Cancelled:
            if beat.lost:
                return _lost(job_id)
            jobs.mark_cancelled(job_id, attempt)
            metrics.JOBS_FINISHED.labels("cancelled", "").inc()
            return "cancelled"
        except PermanentError as exc:
            return _fail(jobs, job_id, attempt, exc.to_dict())
        except TransientError as exc:
            if beat.lost:
                return _lost(job_id)
            return _requeue_or_fail(services, job_id, attempt, exc)
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
    if not jobs.complete(job_id, attempt, asdict(result)):
        return _lost(job_id)
    metrics.JOBS_FINISHED.labels("completed", "").inc()
    metrics.JOB_SECONDS.observe(time.perf_counter() - started)
    services.staged_path(work.staged_name).unlink(missing_ok=True)
    return "completed"


def _requeue_or_fail(services: Services, job_id: str, attempt: int, exc: TransientError) -> str:
    """Fail the job once its attempts are spent; else re-queue it and raise `RetryJob`."""
    settings = services.settings
    if attempt >= settings.job_max_attempts:
        message = f"{exc.message} (gave up after {attempt} attempts)"
        return _fail(services.jobs, job_id, attempt, {"code": exc.code, "message": message})
    services.jobs.requeue(job_id, attempt=attempt, note=exc.to_dict())
    delay = retry_delay(
        attempt, exc, base=settings.job_retry_base_seconds, cap=settings.job_retry_max_seconds
    )
    raise RetryJob(delay, exc) from exc


def _fail(jobs: JobStore, job_id: str, attempt: int, error: dict[str, str]) -> str:
    """Record `attempt`'s failure with `error` ({"code", "message"}); return the outcome."""
    jobs.fail(job_id, attempt, error)
    metrics.JOBS_FINISHED.labels("failed", error["code"]).inc()
    return f"failed: {error['code']}"


def _lost(job_id: str) -> str:
    log.warning("job %s was taken over by another attempt; this one stopped", job_id)
    return "lost"


class _Reporter:
    """Turns stage and count callbacks into job updates, posted to the attempt's heartbeat
    thread; raises `LostJob` once a write has found the job fenced."""

    def __init__(self, beat: Heartbeat) -> None:
        self._beat = beat
        self._stage: JobStage | None = None
        self._stage_started = time.perf_counter()

    def update(self, *, stage: JobStage | None = None, **fields: Any) -> None:
        if stage is not None and stage is not self._stage:
            now = time.perf_counter()
            self._observe(now)
            self._stage, self._stage_started = stage, now
        if self._beat.lost:
            raise LostJob()
        if stage is not None:
            fields["stage"] = stage
        self._beat.post(**fields)

    def stage(self, name: str) -> None:
        stage = JobStage(name)
        self.update(stage=stage, progress=stage_progress(stage))

    def page(self, done: int, total: int) -> None:
        stage = JobStage.EXTRACTING
        progress = stage_progress(stage, done, total)
        self.update(stage=stage, progress=progress, pages_done=done, pages_total=total)

    def chunks(self, name: str, done: int, total: int | None) -> None:
        """Chunks embedded or stored; with no total yet (the parsing child is still reading
        later pages), the counts only: stage and progress stay extraction's until it ends."""
        stage = JobStage(name)
        counts: dict[str, Any] = {
            "chunks_embedded" if stage is JobStage.EMBEDDING else "chunks_done": done
        }
        if total is None:
            self.update(**counts)
            return
        progress = stage_progress(stage, done, total)
        self.update(stage=stage, progress=progress, chunks_total=total, **counts)

    def stored(self, done: int, total: int | None) -> None:
        """Chunks written (staged) while later ones are still being embedded."""
        if total is None:
            self.update(chunks_done=done)
        else:
            self.update(chunks_total=total, chunks_done=done)

    def finish_stage(self) -> None:
        self._observe(time.perf_counter())
        self._stage = None

    def _observe(self, now: float) -> None:
        """Record the time spent in the stage ending now (indexing times its own stages,
        which overlap)."""
        if self._stage is not None and self._stage.value not in TIMED_STAGES:
            metrics.STAGE_SECONDS.labels(self._stage.value).observe(now - self._stage_started)


def _process(services: Services, work: JobWork, attempt: int, beat: Heartbeat) -> IndexResult:
    job = work.job
    jobs = services.jobs
    report = _Reporter(beat)
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

    config = services.ensure_index(job.index)
    with open_prepared(  # the child streams the chunks while they are embedded and stored
        path,
        filename=job.filename,
        settings=services.settings,
        content_type=work.content_type,
        chunking=config.chunking,
        on_stage=report.stage,
        on_page=report.page,
    ) as prepared:
        if should_cancel():
            raise Cancelled()
        embedder = services.embedder_for(config.embedding)
        request = IndexRequest(
            prepared,
            index=job.index,
            document_id=job.document_id,
            version=_version(services, work, attempt),
            user_metadata=dict(job.metadata),
            force=job.force,
        )
        with map_redis_errors():  # the fence's Redis calls, which the store phase makes
            result = index_document(
                request,
                store=services.store,
                embedder=embedder,
                fence=services.fence,
                hooks=IndexHooks(
                    on_progress=report.chunks, should_cancel=should_cancel, on_stored=report.stored
                ),
                window=services.settings.indexing_window_chunks,
            )
    report.finish_stage()
    report.update(
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
