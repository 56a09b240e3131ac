"""The periodic sweep: re-queue jobs whose worker went silent, delete expired staged uploads.

A processing job whose heartbeat is older than `heartbeat_timeout_seconds` lost its worker
(killed, out of memory, host gone). The sweep puts it back to `queued` and sends it again; the
claim then either runs it as a new attempt or, past `job_max_attempts`, fails it with
`timeout`. A queued job whose message is in no broker queue (lost in a Redis failover, or
an enqueue that died half-way) is sent again once it has waited `lost_message_after_seconds`;
so is a never-claimed one whose message was delivered that long ago and never acknowledged
(stranded by a worker that lost Redis, see `_resend_lost`). A duplicate message is harmless,
the claim runs a job once. Staged uploads are deleted once the job hash has expired, and a
failed or cancelled job's after `staging_failed_ttl_hours` (until then the job can be
retried), so failing uploads cannot fill the staging quota for the job's whole lifetime. A
document delete whose process died before its `document.deleted` event was written is
finished: the event is written if the store no longer holds the document's deleted version.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from docingest.pipeline.errors import DependencyUnavailable
from docingest.pipeline.keys import JobStatus
from docingest.pipeline.services import Services
from docingest.pipeline.store.fencing import KEEP_ALIVE_TIMEOUT

log = logging.getLogger(__name__)

STAGED_GRACE_SECONDS = 3600
"""A staged file younger than this is never deleted: its job may be being recorded."""
DELETE_GRACE_SECONDS = 2 * KEEP_ALIVE_TIMEOUT
"""A delete begun less long ago is left to its own process (it holds the document's lock;
a dead holder's lock lapses within `KEEP_ALIVE_TIMEOUT`)."""


class InBroker(NamedTuple):
    """What the broker holds for some jobs (`docingest.workers.broker.job_ids_in_broker`)."""

    present: set[str]
    """Jobs with a message waiting in a queue, or delivered to a consumer recently."""
    overdue: set[str]
    """The others with a message delivered long ago and never acknowledged."""


@dataclass(frozen=True, slots=True)
class SweepReport:
    requeued: list[str]
    staged_deleted: int
    resent: list[str] = field(default_factory=list)
    deletes_finished: int = 0
    """Interrupted document deletes whose `document.deleted` event the sweep wrote."""


def sweep(
    services: Services,
    *,
    enqueue: Callable[[str], None],
    in_broker: Callable[[Sequence[str], float], InBroker] | None = None,
    delete_grace_seconds: float = DELETE_GRACE_SECONDS,
) -> SweepReport:
    """Re-queue silent jobs (sending each with `enqueue`), re-send queued jobs whose message
    `in_broker` cannot find or finds overdue, delete orphaned staged files, and finish the
    document deletes interrupted over `delete_grace_seconds` ago.

    `in_broker(job_ids, overdue_after)` counts a message delivered over `overdue_after` s ago
    and still unacknowledged as overdue rather than present."""
    settings = services.settings
    requeued: list[str] = []
    for job_id in services.jobs.stale(older_than=settings.heartbeat_timeout_seconds):
        note = {
            "code": "worker_lost",
            "message": "The worker running this job stopped sending heartbeats.",
        }
        if services.jobs.requeue(job_id, stale_after=settings.heartbeat_timeout_seconds, note=note):
            log.warning("job %s: its worker went silent; re-queued", job_id)
            enqueue(job_id)
            requeued.append(job_id)
    resent = _resend_lost(services, enqueue, in_broker) if in_broker is not None else []
    return SweepReport(
        requeued=requeued,
        staged_deleted=_delete_orphans(services),
        resent=resent,
        deletes_finished=_finish_interrupted_deletes(services, delete_grace_seconds),
    )


def _finish_interrupted_deletes(services: Services, grace_seconds: float) -> int:
    """Finish the document deletes begun over `grace_seconds` ago whose process died before
    writing their event (`Services.finish_interrupted_delete`); how many emitted."""
    emitted = 0
    cutoff = time.time() - grace_seconds
    for delete in services.outbox.deletes_under_way():
        if delete.at > cutoff:
            continue
        try:
            outcome = services.finish_interrupted_delete(delete)
        except DependencyUnavailable as exc:  # Redis or the store: the next sweep tries again
            log.warning("interrupted delete of %r left for later: %s", delete.document_id, exc)
            continue
        if outcome:
            what = (delete.document_id, delete.index)
            log.warning("document %r of index %r: delete interrupted; event written now", *what)
            emitted += 1
        elif outcome is False:
            what = (delete.document_id, delete.index)
            log.info("document %r of index %r: an interrupted delete removed nothing", *what)
    return emitted


def _resend_lost(
    services: Services,
    enqueue: Callable[[str], None],
    in_broker: Callable[[Sequence[str], float], InBroker],
) -> list[str]:
    lost_after = services.settings.lost_message_after_seconds
    waiting = services.jobs.waiting(older_than=lost_after)
    if not waiting:
        return []
    found = in_broker(waiting, lost_after)
    resent = []
    for job_id in waiting:
        if job_id in found.present:
            continue
        if job_id in found.overdue:
            # A worker that loses Redis cannot put back the messages it prefetched, and kombu
            # restores them only after the visibility timeout (2 h by default): re-send now.
            # A message a busy worker has held this long gets a copy too; whichever copy
            # comes first wins the claim. Never-claimed jobs only: a claimed job's message
            # may be a Celery retry held until its countdown (a first send has none), which
            # must not run early.
            job = services.jobs.get(job_id)
            if job.status is not JobStatus.QUEUED or job.attempts:
                continue
            log.warning("job %s: its message was delivered but not started; sent again", job_id)
        else:
            log.warning("job %s: queued but in no broker queue; sent again", job_id)
        services.jobs.mark_resent(job_id)
        enqueue(job_id)
        resent.append(job_id)
    return resent


_KEPT_FOR_RETRY = (JobStatus.FAILED.value, JobStatus.CANCELLED.value)


def _delete_orphans(services: Services) -> int:
    """Delete the staged files whose job has expired (older than STAGED_GRACE_SECONDS: a
    younger one's job may be being recorded) and those of jobs failed or cancelled more than
    `staging_failed_ttl_hours` ago."""
    settings = services.settings
    staging = settings.staging_dir
    if not staging.is_dir():
        return 0
    deleted = 0
    now = time.time()
    orphan_cutoff = now - STAGED_GRACE_SECONDS
    retry_cutoff = now - settings.staging_failed_ttl_hours * 3600
    for path in staging.iterdir():
        try:
            if not path.is_file():
                continue
            modified = path.stat().st_mtime
        except FileNotFoundError:
            continue
        status, finished_at = services.redis.hmget(
            services.keys.job(path.name), ["status", "finished_at"]
        )
        expired = status is None and modified <= orphan_cutoff
        given_up = status in _KEPT_FOR_RETRY and float(finished_at or now) <= retry_cutoff
        if expired or given_up:
            path.unlink(missing_ok=True)
            deleted += 1
    return deleted
