"""The bulkhead between receivers: receivers that never answer hold only their own senders,
and a healthy receiver's delivery goes out meanwhile (RELIABILITY.md, "Webhooks")."""

from __future__ import annotations

from pathlib import Path

from tests.pipeline.webhooks.test_dispatcher import Deployment, settings_for
from tests.support.redis_db import TestRedis
from tests.support.waiting import wait_until
from tests.support.webhook_receiver import receiving

HANG_TIMEOUT = 60.0
"""Far beyond the test's waits: no attempt to a hung receiver ends while the test runs, so a
delivery that arrives went out beside them, not after them."""


def test_hung_receivers_hold_only_their_own_senders(tmp_path: Path, redis_db: TestRedis) -> None:
    settings = settings_for(
        tmp_path,
        redis_db,
        webhook_concurrency=6,
        webhook_target_concurrency=2,
        webhook_timeout_seconds=HANG_TIMEOUT,
    )
    deployment = Deployment(settings, redis_db)
    deployment.dispatcher.start()
    try:
        with receiving("hang") as first, receiving("hang") as second, receiving() as healthy:
            deployment.subscribe(first.url, name="first", events=["job.completed"])
            deployment.subscribe(second.url, name="second", events=["job.completed"])
            for number in range(6):  # a backlog for each hung receiver, ahead of the healthy
                deployment.complete(f"doc-{number}.txt")
            wait_until(
                lambda: len(first.received) == 2 and len(second.received) == 2,
                what="each hung receiver holding its two senders",
            )
            deployment.subscribe(healthy.url, name="healthy", events=["job.completed"])
            deployment.complete("fresh.txt")
            (got,) = healthy.wait_for(1, timeout=HANG_TIMEOUT / 2)
            assert got.payload["data"]["document_id"] == "fresh.txt"
            # Still two each: their backlogs waited, unclaimed, behind their limit.
            assert (len(first.received), len(second.received)) == (2, 2)
    finally:
        deployment.dispatcher.stop()
