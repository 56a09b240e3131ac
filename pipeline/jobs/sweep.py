"""The periodic sweep: re-queue jobs whose worker went silent, delete expired staged uploads.

A processing job whose heartbeat is older than `heartbeat_timeout_seconds` lost its worker
(killed, out of memory, host gone). The sweep puts it back to `queued` and sends it again; the
claim then either runs it as a new attempt or, past `job_max_attempts`, fails it with
`timeout`. A queued job whose message is in no broker queue (lost in a Redis failover, or
an enqueue that died half-way) is sent again once it has waited `lost_message_after_seconds`;
a duplicate message is harmless, the claim runs a job once. Staged uploads are kept while
their job exists (a failed job can be retried) and deleted once the job hash has expired.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pipeline.services import Services

log = logging.getLogger(__name__)

STAGED_GRACE_SECONDS = 3600
"""A staged file younger than this is never deleted: its job may be being recorded."""


@dataclass(frozen=True, slots=True)
class SweepReport:
    requeued: list[str]
    staged_deleted: int
    resent: list[str] = field(default_factory=list)


def sweep(
    services: Services,
    *,
    enqueue: Callable[[str], None],
    in_broker: Callable[[Sequence[str]], set[str]] | None = None,
) -> SweepReport:
    """Re-queue silent jobs (sending each with `enqueue`), re-send queued jobs whose message
    `in_broker` cannot find, and delete orphaned staged files."""
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
    return SweepReport(requeued=requeued, staged_deleted=_delete_orphans(services), resent=resent)


def _resend_lost(
    services: Services,
    enqueue: Callable[[str], None],
    in_broker: Callable[[Sequence[str]], set[str]],
) -> list[str]:
    waiting = services.jobs.waiting(older_than=services.settings.lost_message_after_seconds)
    if not waiting:
        return []
    present = in_broker(waiting)
    resent = []
    for job_id in waiting:
        if job_id not in present:
            log.warning("job %s: queued but in no broker queue; sent again", job_id)
            services.jobs.mark_resent(job_id)
            enqueue(job_id)
            resent.append(job_id)
    return resent


def _delete_orphans(services: Services) -> int:
    staging = services.settings.staging_dir
    if not staging.is_dir():
        return 0
    deleted = 0
    cutoff = time.time() - STAGED_GRACE_SECONDS
    for path in staging.iterdir():
        try:
            if not path.is_file() or path.stat().st_mtime > cutoff:
                continue
        except FileNotFoundError:
            continue
        if not services.redis.exists(services.keys.job(path.name)):
            path.unlink(missing_ok=True)
            deleted += 1
    return deleted
