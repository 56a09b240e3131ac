"""The dispatcher against real local HTTP receivers: signed deliveries, retries with backoff
from a receiver that fails, one that hangs and one that comes back after a restart, per-document
order, giving up after the retry period, and a removed webhook's deliveries dropped."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from docingest import InvalidSignature, verify_signature
from docingest.pipeline.jobs.state import JobStore
from docingest.pipeline.keys import Keys
from docingest.pipeline.outbox import Outbox, Subscription
from docingest.pipeline.settings import Settings
from docingest.pipeline.webhooks.dispatcher import Dispatcher, backoff
from tests.support.jobs import job_spec
from tests.support.redis_db import TestRedis
from tests.support.settings import service_settings
from tests.support.waiting import wait_until
from tests.support.webhook_receiver import WebhookReceiver, receiving

SECRET = "test-secret-0123456789"


def settings_for(tmp_path: Path, redis_db: TestRedis, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "webhook_allow_private": True,  # the receiver is on 127.0.0.1
        "webhook_timeout_seconds": 1.0,
        "webhook_backoff_base_seconds": 0.05,
        "webhook_backoff_max_seconds": 0.2,
    }
    return service_settings(tmp_path, redis_db.prefix, None, **(values | overrides))


class Deployment:
    """The job store, outbox and a running dispatcher on the test's Redis prefix."""

    def __init__(self, settings: Settings, redis_db: TestRedis) -> None:
        keys = Keys(redis_db.prefix)
        self.jobs = JobStore(redis_db.client, keys=keys, ttl_seconds=3600)
        self.outbox = Outbox(redis_db.client, keys=keys, log_size=100, keep_seconds=3600)
        self.dispatcher = Dispatcher(self.outbox, settings)

    def subscribe(self, url: str, name: str = "hook", events: list[str] | None = None) -> None:
        now = time.time()
        subscription = Subscription(
            name=name,
            index="docs",
            url=url,
            events=events or ["job.completed", "job.failed", "document.deleted"],
            secret=SECRET,
            created_at=now,
            updated_at=now,
        )
        self.outbox.put(subscription)

    def complete(self, document_id: str = "notes.txt", **fields: Any) -> str:
        job_id = self.jobs.create(job_spec(document_id=document_id, **fields)).job_id
        claim = self.jobs.claim(job_id, max_attempts=3, stale_after=60.0)
        assert self.jobs.complete(job_id, claim.attempt, {"chunks": 1}, index="docs")
        return job_id

    def log(self, name: str = "hook") -> list[dict[str, str]]:
        return self.outbox.recent("docs", name, 100)


@pytest.fixture
def deployment(tmp_path: Path, redis_db: TestRedis) -> Iterator[Deployment]:
    deployment = Deployment(settings_for(tmp_path, redis_db), redis_db)
    deployment.dispatcher.start()
    yield deployment
    deployment.dispatcher.stop()


def test_a_delivery_is_signed_and_carries_the_job(deployment: Deployment) -> None:
    with receiving() as receiver:
        deployment.subscribe(receiver.url)
        job_id = deployment.complete()
        (got,) = receiver.wait_for(1)
    verify_signature(got.body, got.headers, SECRET)  # raises if it does not match
    with pytest.raises(InvalidSignature):
        verify_signature(got.body + b" ", got.headers, SECRET)
    assert got.headers["x-docingest-event"] == "job.completed"
    assert got.payload["id"] == got.headers["x-docingest-delivery"]
    assert got.payload["event"] == "job.completed"
    assert (got.payload["data"]["job_id"], got.payload["data"]["status"]) == (job_id, "completed")
    assert (
        deployment.jobs.get(job_id).model_dump(mode="json")["result"]
        == (got.payload["data"]["result"])
    )
    (entry,) = wait_until(
        lambda: [r for r in deployment.log() if r["status"] == "delivered"], what="the log"
    )
    assert (entry["attempts"], entry["last_code"]) == ("1", "200")


def test_a_failing_receiver_is_retried_with_the_same_body_until_it_takes_it(
    deployment: Deployment,
) -> None:
    with receiving("fail") as receiver:
        deployment.subscribe(receiver.url)
        deployment.complete()
        wait_until(lambda: len(receiver.received) >= 3, what="three attempts", timeout=60)
        receiver.mode = "ok"
        receiver.wait_for(1)
    attempts = receiver.received
    assert len({r.body for r in attempts}) == 1  # every attempt sends the same bytes
    assert len({r.delivery_id for r in attempts}) == 1
    numbers = [int(r.headers["x-docingest-attempt"]) for r in attempts]
    assert numbers == list(range(1, len(attempts) + 1))

    def recorded() -> dict[str, int] | None:  # the receiver answers before it is recorded
        stats = deployment.outbox.stats()
        return stats if stats["delivered"] == 1 else None

    stats = wait_until(recorded, what="the delivery recorded")
    assert stats["retried"] >= 3 and stats["pending"] == 0


def test_a_hanging_receiver_costs_a_timeout_and_a_retry(deployment: Deployment) -> None:
    with receiving("hang") as hanging:
        deployment.subscribe(hanging.url)
        deployment.complete()
        wait_until(lambda: len(hanging.received) >= 2, what="a retry after a hang", timeout=60)
        entry = wait_until(
            lambda: [r for r in deployment.log() if r.get("last_error")], what="an error logged"
        )[0]
        hanging.release()
    assert entry["last_error"].startswith("timeout")
    assert entry["status"] == "pending"


def test_a_receiver_that_comes_back_after_a_restart_gets_everything(
    deployment: Deployment,
) -> None:
    receiver = WebhookReceiver().start()
    deployment.subscribe(receiver.url)
    receiver.stop()  # down: connections refused
    try:
        for number in range(3):
            deployment.complete(f"doc-{number}")
        wait_until(
            lambda: deployment.outbox.stats()["retried"] >= 3, what="failed attempts", timeout=60
        )
        receiver.start()  # the same port again
        got = receiver.wait_for(3)
    finally:
        receiver.stop()
    assert sorted(r.payload["data"]["document_id"] for r in got) == ["doc-0", "doc-1", "doc-2"]


def test_events_of_one_document_arrive_in_order_through_failures(
    deployment: Deployment,
) -> None:
    with receiving("flaky") as receiver:
        deployment.subscribe(receiver.url)
        expected: dict[str, list[str]] = {}
        for _ in range(4):
            for document in ("a", "b", "c"):
                expected.setdefault(document, []).append(deployment.complete(document))
        for document in ("a", "b"):
            deployment.outbox.emit_deleted("docs", document, time.time())
        got = receiver.wait_for(14)
    assert any(r.status == 500 for r in receiver.received)  # the flaky receiver did refuse
    seen: dict[str, list[str]] = {}
    for received in got:
        data = received.payload["data"]
        seen.setdefault(data["document_id"], []).append(data.get("job_id", "deleted"))
    assert seen == {
        "a": [*expected["a"], "deleted"],
        "b": [*expected["b"], "deleted"],
        "c": expected["c"],
    }


def test_a_delivery_is_given_up_after_the_retry_period(tmp_path: Path, redis_db: TestRedis) -> None:
    deployment = Deployment(
        settings_for(tmp_path, redis_db, webhook_retry_hours=1.0 / 3600), redis_db
    )
    deployment.dispatcher.start()
    try:
        with receiving("fail") as receiver:
            deployment.subscribe(receiver.url)
            deployment.complete("first")
            deployment.complete("first")
            wait_until(
                lambda: deployment.outbox.stats()["failed"] == 2, what="both given up", timeout=60
            )
            failed = [r for r in deployment.log() if r["status"] == "failed"]
            assert len(failed) == 2
            assert all(r["last_error"].startswith("HTTP 500") for r in failed)
            # The chain's head was tried again within the period; the delivery behind it may
            # reach its first attempt only once the period is over, and then gets just one.
            assert max(int(r["attempts"]) for r in failed) >= 2
    finally:
        deployment.dispatcher.stop()
    assert deployment.outbox.stats()["pending"] == 0


def test_a_removed_webhooks_deliveries_are_dropped(deployment: Deployment) -> None:
    with receiving("fail") as receiver:
        deployment.subscribe(receiver.url)
        deployment.complete()
        wait_until(lambda: receiver.received, what="an attempt")
        deployment.outbox.delete("docs", "hook")
        wait_until(lambda: deployment.outbox.stats()["dropped"] == 1, what="the drop")
    assert deployment.outbox.stats()["pending"] == 0


def test_a_callback_is_signed_with_its_own_secret(deployment: Deployment) -> None:
    with receiving() as receiver:
        job_id = deployment.complete(callback_url=receiver.url, callback_secret="cb-" + "x" * 20)
        (got,) = receiver.wait_for(1)
    verify_signature(got.body, got.headers, "cb-" + "x" * 20)
    assert got.payload["data"]["job_id"] == job_id
    assert got.payload["data"]["callback_url"] == receiver.url


def test_a_redirect_is_a_failed_attempt_never_followed(deployment: Deployment) -> None:
    with receiving() as target, receiving("redirect", redirect_to=target.url) as redirecting:
        deployment.subscribe(redirecting.url)
        deployment.complete()
        entry = wait_until(
            lambda: [r for r in deployment.log() if r.get("last_code") == "302"],
            what="the redirect logged",
        )[0]
    assert "not followed" in entry["last_error"]
    assert target.received == []


def test_backoff_doubles_with_jitter_up_to_the_cap(tmp_path: Path, redis_db: TestRedis) -> None:
    settings = settings_for(
        tmp_path, redis_db, webhook_backoff_base_seconds=10, webhook_backoff_max_seconds=3600
    )
    for attempt, full in ((1, 10), (2, 20), (5, 160), (30, 3600)):
        delays = [backoff(settings, attempt) for _ in range(50)]
        assert all(full / 2 <= delay <= full for delay in delays)
        assert len(set(delays)) > 1  # jittered


def test_the_payload_is_compact_json(deployment: Deployment) -> None:
    with receiving() as receiver:
        deployment.subscribe(receiver.url)
        deployment.complete()
        (got,) = receiver.wait_for(1)
    assert got.body == json.dumps(got.payload, separators=(",", ":"), ensure_ascii=False).encode()
