"""Look into the Redis broker: which jobs still have an ingest message waiting or in flight.

Kombu's Redis transport keeps waiting messages in a list per queue (and one more per
priority step) and delivered-but-unacknowledged ones in the `unacked` hash, all under
Celery's `global_keyprefix`. A job id appears verbatim in its message (Celery's `argsrepr`
header), so a substring test finds it without decoding every message.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.keys import INGEST_QUEUE
from pipeline.services import Services
from workers.app import broker_prefix

PRIORITY_SEPARATOR = "\x06\x16"
"""Kombu's separator between a queue name and its priority step."""


def job_ids_in_broker(services: Services, job_ids: Sequence[str]) -> set[str]:
    """Return those of `job_ids` that have a message queued or unacknowledged."""
    redis = services.redis
    prefix = broker_prefix(services.settings)
    queue = f"{prefix}{INGEST_QUEUE}"
    lists = [queue, *redis.scan_iter(match=f"{queue}{PRIORITY_SEPARATOR}*", count=100)]
    with redis.pipeline(transaction=False) as pipe:
        for key in lists:
            pipe.lrange(key, 0, -1)
        pipe.hvals(f"{prefix}unacked")
        replies = pipe.execute()
    messages = [message for reply in replies for message in reply]
    return {job_id for job_id in job_ids if any(job_id in message for message in messages)}
