"""Job state in Redis: one hash per job, changed only by atomic Lua scripts.

A job is `queued` until a worker claims it, `processing` while one works on it, then
`completed`, `failed` or `cancelled`. Every claim increments `attempts` and that number is
the attempt's fencing token: an update carries it and is ignored unless the job is still
`processing` under the same attempt, so a worker that was given up on (re-queued by the
sweep, or cancelled) can never move the job backwards or overwrite a newer attempt's state.
`progress` only grows within a run. Times come from Redis's clock, so workers on many hosts
with skewed clocks agree on which heartbeat is stale.

The claim refuses a job that another worker is still visibly working on (fresh heartbeat),
which turns a duplicate delivery into a no-op; and it fails a job whose attempts are used
up (each lost worker cost one) with `timeout`, so a document that kills its worker ends
`failed` instead of looping.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from docingest.pipeline.errors import JobNotFound, JobStateConflict
from docingest.pipeline.jobs.job import Claim, Job, JobSpec, JobWork, job_from_hash, work_from_hash
from docingest.pipeline.jobs.scripts import (
    CANCEL,
    CLAIM,
    COMPLETE,
    FINISH,
    REQUEUE,
    RETRY,
    UNQUEUEABLE,
    UPDATE,
)
from docingest.pipeline.jobs.usage import usage_fields
from docingest.pipeline.keys import JobStage, JobStatus, Keys
from docingest.pipeline.outbox import outbox_arg
from docingest.pipeline.redis_errors import map_redis_errors

if TYPE_CHECKING:
    from redis import Redis

STAGE_SPANS: dict[JobStage, tuple[float, float]] = {
    JobStage.DETECTING: (0.0, 0.02),
    JobStage.EXTRACTING: (0.02, 0.15),
    JobStage.CHUNKING: (0.15, 0.2),
    JobStage.EMBEDDING: (0.2, 0.85),
    JobStage.STORING: (0.85, 0.99),
}
"""Share of the overall progress each stage covers (embedding dominates real jobs)."""


def stage_progress(stage: JobStage, done: int = 0, total: int = 1) -> float:
    """Overall progress for `done` of `total` units through `stage`."""
    low, high = STAGE_SPANS[stage]
    fraction = min(max(done / total, 0.0), 1.0) if total > 0 else 1.0
    return round(low + (high - low) * fraction, 4)


OVERLAP_SPAN = (STAGE_SPANS[JobStage.EXTRACTING][0], STAGE_SPANS[JobStage.EMBEDDING][1])
"""The progress extraction and embedding share: they overlap on a long document, so one
estimate of their joint work (`overlap_fraction`) moves through both spans together."""

EXTRACTION_SHARE = 0.15
"""The share of that joint work credited to reading the pages (embedding is the rest)."""

UNSEEN_CHUNKS = 1024
"""Chunks assumed still to come while a document without pages is being read and its total
is unknown (about one window): progress moves with each chunk embedded, without a claim on
how far the document goes."""


def overlap_fraction(
    *,
    pages_done: int,
    pages_total: int | None,
    chunks_embedded: int,
    chunks_received: int,
    chunks_total: int | None,
) -> float:
    """The estimated share (0-1) of extraction and embedding done.

    Embedding's part is `chunks_embedded` of the total once it is known; before that, the
    chunks the worker has received stand for the pages read so far (the parsing child is
    held back by the worker's pace), so with pages the document's total is estimated from
    them; without pages, UNSEEN_CHUNKS more are assumed.
    """
    if chunks_total is not None:
        read = 1.0
        embedded = chunks_embedded / chunks_total if chunks_total else 1.0
    elif pages_total:
        read = min(pages_done / pages_total, 1.0)
        embedded = read * chunks_embedded / chunks_received if chunks_received else 0.0
    else:
        read = 0.0
        embedded = chunks_embedded / (max(chunks_received, chunks_embedded) + UNSEEN_CHUNKS)
    fraction = EXTRACTION_SHARE * read + (1 - EXTRACTION_SHARE) * min(embedded, 1.0)
    return min(max(fraction, 0.0), 1.0)


class OverlapProgress:
    """Progress through `OVERLAP_SPAN` from successive `overlap_fraction` estimates, moving
    with every increase and never back: when an estimate drops (a long document's total
    turns out larger than guessed), progress holds, and later increases cover what is left
    of the span in proportion to what is left of the work, so it reaches the span's end
    exactly when the work is done."""

    def __init__(self) -> None:
        self.progress = OVERLAP_SPAN[0]
        self._fraction = 0.0

    def floor(self, progress: float) -> None:
        """Take account of progress recorded by other means (a stage's start)."""
        self.progress = max(self.progress, min(progress, OVERLAP_SPAN[1]))

    def advance(self, fraction: float) -> float:
        """The progress once the work's estimated share done is `fraction`."""
        if fraction > self._fraction:
            share = (fraction - self._fraction) / (1.0 - self._fraction)
            self.progress += (OVERLAP_SPAN[1] - self.progress) * share
        self._fraction = fraction
        return round(self.progress, 4)


class JobStore:
    """Create, claim, advance, finish, cancel, retry and list jobs; one instance per process."""

    def __init__(
        self, redis: Redis, *, keys: Keys, ttl_seconds: int, webhook_log_size: int = 100
    ) -> None:
        """`redis` must decode responses (`decode_responses=True`); `webhook_log_size` is how
        many deliveries each webhook's log keeps (`docingest.pipeline.outbox`)."""
        self._redis = redis
        self.keys = keys
        self.ttl_seconds = ttl_seconds
        self.webhook_log_size = webhook_log_size
        self._unqueueable = redis.register_script(UNQUEUEABLE)
        self._claim = redis.register_script(CLAIM)
        self._update = redis.register_script(UPDATE)
        self._finish = redis.register_script(FINISH)
        self._complete = redis.register_script(COMPLETE)
        self._requeue = redis.register_script(REQUEUE)
        self._cancel = redis.register_script(CANCEL)
        self._retry = redis.register_script(RETRY)

    # --- the API side -------------------------------------------------------------------

    def create(self, spec: JobSpec) -> Job:
        """Record a new `queued` job."""
        keys = self.keys
        with map_redis_errors():
            now = self._now()
            fields = {
                "job_id": spec.job_id,
                "index": spec.index,
                "document_id": spec.document_id,
                "filename": spec.filename,
                "staged_name": spec.staged_name,
                "size_bytes": str(spec.size_bytes),
                "content_sha256": spec.content_sha256 or "",
                "content_type": spec.content_type or "",
                "metadata": json.dumps(dict(spec.metadata), separators=(",", ":")),
                "force": "1" if spec.force else "0",
                "callback_url": spec.callback_url or "",
                "callback_secret": spec.callback_secret or "",
                "access": "" if spec.access is None else json.dumps(list(spec.access)),
                "status": JobStatus.QUEUED.value,
                "progress": "0",
                "attempts": "0",
                "pages_done": "0",
                "chunks_embedded": "0",
                "chunks_done": "0",
                "created_at": repr(now),
                "queued_at": repr(now),
                "result": "null",
                "error": "null",
            }
            with self._redis.pipeline(transaction=True) as pipe:
                pipe.hset(keys.job(spec.job_id), mapping=fields)  # type: ignore[arg-type]
                pipe.zadd(keys.jobs, {spec.job_id: now})
                pipe.zadd(keys.index_jobs(spec.index), {spec.job_id: now})
                pipe.zadd(keys.queued, {spec.job_id: now})
                pipe.execute()
        return job_from_hash(fields)

    def get(self, job_id: str) -> Job:
        """Return the job, or raise `JobNotFound`."""
        return job_from_hash(self._raw(job_id))

    def work(self, job_id: str) -> JobWork:
        """Return the job with what a worker needs to run it."""
        return work_from_hash(self._raw(job_id))

    def recent(
        self, *, index: str | None = None, status: JobStatus | None = None, limit: int = 50
    ) -> list[Job]:
        """Return up to `limit` jobs, newest first, of one index and/or one status."""
        key = self.keys.index_jobs(index) if index else self.keys.jobs
        found: list[Job] = []
        start, page = 0, max(limit, 100)
        with map_redis_errors():
            while len(found) < limit:
                ids: list[str] = self._redis.zrevrange(key, start, start + page - 1)  # type: ignore[assignment]
                if not ids:
                    break
                start += page
                with self._redis.pipeline(transaction=False) as pipe:
                    for job_id in ids:
                        pipe.hgetall(self.keys.job(job_id))
                    raws = pipe.execute()
                expired = [job_id for job_id, raw in zip(ids, raws, strict=True) if not raw]
                if expired:  # finished jobs expire; drop them from the listings lazily
                    self._redis.zrem(self.keys.jobs, *expired)
                    if index:
                        self._redis.zrem(key, *expired)
                for raw in raws:
                    if raw and (status is None or raw["status"] == status.value):
                        found.append(job_from_hash(raw))
        return found[:limit]

    def cancel(self, job_id: str) -> Job:
        """Cancel a queued job at once, or ask its worker to stop; 409 once it finished."""
        keys = self.keys
        outcome = self._call(
            self._cancel,
            [keys.job(job_id), keys.queued, keys.finished],
            [job_id, self.ttl_seconds, self._outbox()],
        )
        if outcome == "missing":
            raise JobNotFound(f"Job '{job_id}' does not exist (or has expired).")
        if outcome not in ("stopped", "requested"):  # an already-cancelled job answers 409
            raise JobStateConflict(f"Job '{job_id}' is already {outcome}; it cannot be cancelled.")
        return self.get(job_id)

    def retry(self, job_id: str) -> Job:
        """Queue a failed or cancelled job again, from the start; 409 for any other state."""
        outcome = self._call(self._retry, [self.keys.job(job_id), self.keys.queued], [job_id])
        if outcome == "missing":
            raise JobNotFound(f"Job '{job_id}' does not exist (or has expired).")
        if outcome != "retried":  # a queued job answers "queued": nothing to retry
            raise JobStateConflict(
                f"Job '{job_id}' is {outcome}; only a failed or cancelled job can be retried."
            )
        return self.get(job_id)

    def mark_unqueueable(self, job_id: str, error: Mapping[str, str]) -> None:
        """Fail a job that could not be handed to the queue at all (the API answers 503)."""
        keys = self.keys
        self._call(
            self._unqueueable,
            [keys.job(job_id), keys.queued, keys.finished],
            [job_id, self.ttl_seconds, json.dumps(dict(error)), self._outbox()],
        )

    # --- the worker side ----------------------------------------------------------------

    def claim(self, job_id: str, *, max_attempts: int, stale_after: float) -> Claim:
        """Start an attempt at `job_id` (see the module docstring for when it refuses)."""
        keys = self.keys
        exhausted = json.dumps(
            {
                "code": "timeout",
                "message": f"The job's worker stopped during each of its {max_attempts} "
                "attempts; the document may be too large or hostile for the workers.",
            }
        )
        outcome, attempt = self._call(
            self._claim,
            [keys.job(job_id), keys.running, keys.queued],
            [job_id, max_attempts, stale_after, exhausted, self._outbox()],
        )
        if outcome in ("cancelled", "exhausted"):
            status = "cancelled" if outcome == "cancelled" else "failed"
            self._call_plain(lambda: self._finished_bookkeeping(job_id, status))
        return Claim(outcome=str(outcome), attempt=int(attempt))

    def update(
        self,
        job_id: str,
        attempt: int,
        *,
        stage: JobStage | None = None,
        progress: float | None = None,
        **counts: int,
    ) -> bool:
        """Record stage, progress and counters of `attempt`; False if it no longer owns the job.

        Every update is also a heartbeat.
        """
        args: list[str | int | float] = [job_id, attempt, "" if progress is None else progress]
        if stage is not None:
            args += ["stage", stage.value]
        for name, value in counts.items():
            args += [name, value]
        return bool(self._call(self._update, [self.keys.job(job_id), self.keys.running], args))

    def heartbeat(self, job_id: str, attempt: int) -> bool:
        """Record that `attempt` is alive; False if it no longer owns the job."""
        return self.update(job_id, attempt)

    def set_version(self, job_id: str, attempt: int, version: int) -> bool:
        """Remember the document version this job writes, for every later attempt."""
        return self.update(job_id, attempt, version=version)

    def complete(
        self, job_id: str, attempt: int, result: Mapping[str, Any], *, index: str | None = None
    ) -> bool:
        """Record `attempt`'s result; with `index`, add the result's `usage` to the index's
        (once per job, in the same step: `docingest.pipeline.jobs.usage`)."""
        if index is None:
            return self._finish_as(
                job_id, attempt, JobStatus.COMPLETED, progress="1.0", result=json.dumps(result)
            )
        keys = self.keys
        usage = usage_fields(result.get("usage") or {})
        args: list[str | int] = [job_id, attempt, self.ttl_seconds, index, len(usage)]
        for name, amount in usage.items():
            args += [name, amount]
        args += ["progress", "1.0", "result", json.dumps(result), self._outbox()]
        script_keys = [keys.job(job_id), keys.running, keys.queued, keys.finished]
        script_keys += [keys.index_usage(index), keys.usage_ranking, keys.usage_all]
        return bool(self._call(self._complete, script_keys, args))

    def fail(self, job_id: str, attempt: int, error: Mapping[str, str]) -> bool:
        return self._finish_as(job_id, attempt, JobStatus.FAILED, error=json.dumps(dict(error)))

    def mark_cancelled(self, job_id: str, attempt: int) -> bool:
        return self._finish_as(job_id, attempt, JobStatus.CANCELLED)

    def requeue(
        self,
        job_id: str,
        *,
        attempt: int | None = None,
        stale_after: float | None = None,
        note: Mapping[str, str] | None = None,
        usage: Mapping[str, Any] | None = None,
    ) -> bool:
        """Put a processing job back to `queued`: after a transient error (`attempt` given)
        or because its heartbeat is older than `stale_after` (the sweep). `usage` is what the
        job's attempts have used so far, carried to the one that completes it."""
        keys = self.keys
        args = [
            job_id,
            "" if attempt is None else attempt,
            "" if stale_after is None else stale_after,
            json.dumps(dict(note)) if note else "null",
            json.dumps(dict(usage)) if usage else "",
        ]
        return bool(self._call(self._requeue, [keys.job(job_id), keys.running, keys.queued], args))

    def cancel_requested(self, job_id: str) -> bool:
        return self._call_plain(
            lambda: self._redis.hget(self.keys.job(job_id), "cancel_requested") == "1"
        )

    def stale(self, *, older_than: float) -> list[str]:
        """Return processing jobs whose last heartbeat is more than `older_than` s old."""
        now = self._now()
        return self._call_plain(
            lambda: list(self._redis.zrangebyscore(self.keys.running, "-inf", now - older_than))
        )

    def running(self) -> list[str]:
        """Return the ids of the jobs being processed."""
        return self._call_plain(lambda: list(self._redis.zrange(self.keys.running, 0, -1)))

    def waiting(self, *, older_than: float) -> list[str]:
        """Return queued jobs that waited over `older_than` s since queued or last re-sent."""
        now = self._now()
        return self._call_plain(
            lambda: list(self._redis.zrangebyscore(self.keys.queued, "-inf", now - older_than))
        )

    def mark_resent(self, job_id: str) -> None:
        """Restart a queued job's wait (its message was sent again)."""
        now = self._now()
        self._call_plain(lambda: self._redis.zadd(self.keys.queued, {job_id: now}, xx=True))

    # --- numbers for /metrics -----------------------------------------------------------

    def counts(self) -> dict[str, int]:
        """Jobs queued and processing now, and jobs finished per status since Redis began."""
        keys = self.keys

        def read() -> dict[str, int]:
            with self._redis.pipeline(transaction=False) as pipe:
                pipe.zcard(keys.queued)
                pipe.zcard(keys.running)
                pipe.hgetall(keys.finished)
                queued, running, finished = pipe.execute()
            counts = {status.value: 0 for status in JobStatus}
            counts.update({name: int(value) for name, value in finished.items()})
            counts["queued"], counts["processing"] = int(queued), int(running)
            return counts

        return self._call_plain(read)

    def oldest_queued_age(self) -> float:
        """Seconds the longest-waiting queued job has waited (0 when none is queued)."""

        def read() -> float:
            oldest = self._redis.zrange(self.keys.queued, 0, 0, withscores=True)
            return max(0.0, self._now() - float(oldest[0][1])) if oldest else 0.0

        return self._call_plain(read)

    # --- internals ----------------------------------------------------------------------

    def _finish_as(self, job_id: str, attempt: int, status: JobStatus, **fields: str) -> bool:
        keys = self.keys
        args: list[str | int] = [job_id, attempt, status.value, self.ttl_seconds]
        for name, value in fields.items():
            args += [name, value]
        args.append(self._outbox())
        return bool(
            self._call(
                self._finish, [keys.job(job_id), keys.running, keys.queued, keys.finished], args
            )
        )

    def _finished_bookkeeping(self, job_id: str, status: str) -> None:
        with self._redis.pipeline(transaction=True) as pipe:
            pipe.hincrby(self.keys.finished, status, 1)
            pipe.expire(self.keys.job(job_id), self.ttl_seconds)
            pipe.execute()

    def _outbox(self) -> str:
        """The last argument of a script that may end a job
        (`docingest.pipeline.outbox.scripts`)."""
        return outbox_arg(self.keys, log_size=self.webhook_log_size)

    def _raw(self, job_id: str) -> dict[str, str]:
        raw = self._call_plain(lambda: self._redis.hgetall(self.keys.job(job_id)))
        if not raw:
            raise JobNotFound(f"Job '{job_id}' does not exist (or has expired).")
        return raw

    def _now(self) -> float:
        seconds, micros = self._redis.time()
        return seconds + micros / 1_000_000

    def _call(self, script: Any, keys: list[str], args: list[Any]) -> Any:
        with map_redis_errors():
            return script(keys=keys, args=args)

    def _call_plain(self, read: Any) -> Any:
        with map_redis_errors():
            return read()
