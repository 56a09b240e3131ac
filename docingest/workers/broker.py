"""Look into the Redis broker: which jobs still have an ingest message waiting or in flight.

Kombu's Redis transport keeps waiting messages in a list per queue (and one more per
priority step) and delivered-but-unacknowledged ones in the `unacked` hash (by delivery tag),
with each tag's delivery time (the consumer's clock) in the `unacked_index` sorted set, all
under Celery's `global_keyprefix` (kombu/transport/redis.py: `QoS.append`). A job id appears
verbatim in its message (Celery's `argsrepr` header), so a substring test finds it without
decoding every message.
"""

from __future__ import annotations

from collections.abc import Sequence

from docingest.pipeline.ingest.sweep import InBroker
from docingest.pipeline.keys import INGEST_QUEUE
from docingest.pipeline.services import Services
from docingest.workers.app import broker_prefix

PRIORITY_SEPARATOR = "\x06\x16"
"""Kombu's separator between a queue name and its priority step."""
UNACKED = "unacked"
"""Kombu's hash of delivered, unacknowledged messages (`Channel.unacked_key`)."""
UNACKED_INDEX = "unacked_index"
"""Kombu's sorted set of their delivery times (`Channel.unacked_index_key`)."""


def job_ids_in_broker(
    services: Services, job_ids: Sequence[str], *, overdue_after: float
) -> InBroker:
    """Sort `job_ids` by their messages: present when one waits in a queue or was delivered
    less than `overdue_after` s ago, overdue when all were delivered earlier and none is
    acknowledged yet; a job with no message is in neither set."""
    redis = services.redis
    prefix = broker_prefix(services.settings)
    queue = f"{prefix}{INGEST_QUEUE}"
    lists = [queue, *redis.scan_iter(match=f"{queue}{PRIORITY_SEPARATOR}*", count=100)]
    with redis.pipeline(transaction=False) as pipe:
        for key in lists:
            pipe.lrange(key, 0, -1)
        pipe.hgetall(f"{prefix}{UNACKED}")
        pipe.zrange(f"{prefix}{UNACKED_INDEX}", 0, -1, withscores=True)
        pipe.time()
        *replies, unacked, delivered_at, (seconds, microseconds) = pipe.execute()
    # Redis's clock, as for the job state; delivery times come from the consumers' clocks,
    # whose skew of seconds is small against `overdue_after` (minutes in production).
    now = seconds + microseconds / 1e6
    delivered = dict(delivered_at)
    fresh = [message for reply in replies for message in reply]
    stale = []
    for tag, message in unacked.items():
        # A tag not (or no longer) indexed counts as just delivered: never re-send on doubt.
        if now - delivered.get(tag, now) < overdue_after:
            fresh.append(message)
        else:
            stale.append(message)
    present = {job_id for job_id in job_ids if any(job_id in message for message in fresh)}
    overdue = {
        job_id
        for job_id in job_ids
        if job_id not in present and any(job_id in message for message in stale)
    }
    return InBroker(present=present, overdue=overdue)
