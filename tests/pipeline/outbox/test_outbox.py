"""The outbox in the real Redis: the job scripts write a delivery per subscriber in the same
step as the state change, deliveries of one document to one target go out in order, and a
claim's lease hands a dead dispatcher's delivery to the next."""

from __future__ import annotations

import json
import time

import pytest

from docingest.pipeline.jobs.state import JobStore
from docingest.pipeline.keys import Keys
from docingest.pipeline.outbox import Outbox, Subscription
from tests.support.jobs import job_spec
from tests.support.redis_db import TestRedis
from tests.support.waiting import wait_until

FRESH = 60.0
LEASE = 60.0


@pytest.fixture
def jobs(redis_db: TestRedis) -> JobStore:
    return JobStore(
        redis_db.client, keys=Keys(redis_db.prefix), ttl_seconds=3600, webhook_log_size=5
    )


@pytest.fixture
def outbox(redis_db: TestRedis) -> Outbox:
    return Outbox(redis_db.client, keys=Keys(redis_db.prefix), log_size=5, keep_seconds=3600)


def subscribe(outbox: Outbox, name: str, events: list[str], index: str = "docs") -> None:
    now = time.time()
    outbox.put(
        Subscription(
            name=name,
            index=index,
            url=f"http://example.com/{name}",
            events=events,
            secret="s" * 32,
            created_at=now,
            updated_at=now,
        )
    )


def complete(jobs: JobStore, document_id: str = "notes.txt", **fields: str) -> str:
    job_id = jobs.create(job_spec(document_id=document_id, **fields)).job_id  # type: ignore[arg-type]
    claim = jobs.claim(job_id, max_attempts=3, stale_after=FRESH)
    assert jobs.complete(job_id, claim.attempt, {"chunks": 1}, index="docs")
    return job_id


def test_a_completion_writes_one_delivery_per_subscribed_webhook(
    jobs: JobStore, outbox: Outbox
) -> None:
    subscribe(outbox, "all", ["job.completed", "job.failed"])
    subscribe(outbox, "failures", ["job.failed"])
    subscribe(outbox, "other-index", ["job.completed"], index="elsewhere")
    job_id = complete(jobs)
    claimed = outbox.claim(10, lease_seconds=LEASE)
    assert [(d.webhook, d.event) for d in claimed] == [("all", "job.completed")]
    snapshot = json.loads(claimed[0].fields["job"])
    assert (snapshot["job_id"], snapshot["status"]) == (job_id, "completed")
    assert outbox.stats()["pending"] == 1


def test_no_subscriber_no_delivery(jobs: JobStore, outbox: Outbox) -> None:
    complete(jobs)
    assert outbox.claim(10, lease_seconds=LEASE) == []
    assert outbox.stats()["pending"] == 0


def test_a_replayed_completion_writes_nothing_more(jobs: JobStore, outbox: Outbox) -> None:
    subscribe(outbox, "hook", ["job.completed"])
    job_id = jobs.create(job_spec()).job_id
    claim = jobs.claim(job_id, max_attempts=3, stale_after=FRESH)
    assert jobs.complete(job_id, claim.attempt, {}, index="docs")
    assert not jobs.complete(job_id, claim.attempt, {}, index="docs")  # already completed
    assert outbox.stats()["pending"] == 1


def test_failure_cancellation_and_unqueueable_jobs_have_their_events(
    jobs: JobStore, outbox: Outbox
) -> None:
    subscribe(outbox, "hook", ["job.failed", "job.cancelled"])
    failed = jobs.create(job_spec(document_id="a")).job_id
    claim = jobs.claim(failed, max_attempts=3, stale_after=FRESH)
    jobs.fail(failed, claim.attempt, {"code": "corrupt_document", "message": "bad"})
    cancelled = jobs.create(job_spec(document_id="b")).job_id
    jobs.cancel(cancelled)  # queued: cancelled at once
    lost = jobs.create(job_spec(document_id="c")).job_id
    jobs.mark_unqueueable(lost, {"code": "dependency_unavailable", "message": "down"})
    exhausted = jobs.create(job_spec(document_id="d")).job_id
    jobs.claim(exhausted, max_attempts=1, stale_after=0.0)
    jobs.claim(exhausted, max_attempts=1, stale_after=0.0)  # its one attempt is used up
    events = {
        json.loads(d.fields["job"])["job_id"]: d.event
        for d in outbox.claim(10, lease_seconds=LEASE)
    }
    assert events == {
        failed: "job.failed",
        cancelled: "job.cancelled",
        lost: "job.failed",
        exhausted: "job.failed",
    }


def test_a_documents_later_event_waits_for_its_earlier_one(jobs: JobStore, outbox: Outbox) -> None:
    subscribe(outbox, "hook", ["job.completed", "document.deleted"])
    subscribe(outbox, "second", ["job.completed"])
    first = complete(jobs, "report.pdf")
    complete(jobs, "report.pdf")
    outbox.emit_deleted("docs", "report.pdf", time.time())
    complete(jobs, "other.pdf")
    heads = outbox.claim(10, lease_seconds=LEASE)
    # One head per document and webhook: report.pdf's first job for each webhook, other.pdf's.
    assert sorted((d.webhook, d.document_id) for d in heads) == [
        ("hook", "other.pdf"), ("hook", "report.pdf"),
        ("second", "other.pdf"), ("second", "report.pdf"),
    ]  # fmt: skip
    head = next(d for d in heads if (d.webhook, d.document_id) == ("hook", "report.pdf"))
    assert json.loads(head.fields["job"])["job_id"] == first
    assert outbox.claim(10, lease_seconds=LEASE) == []  # the rest wait behind them
    assert outbox.resolve(head, "retry", retry_in=0.0, code=500, error="HTTP 500")
    again = outbox.claim(10, lease_seconds=LEASE)
    assert [d.id for d in again] == [head.id]  # a retry keeps its place at the head
    assert outbox.resolve(again[0], "delivered", code=200)
    following = outbox.claim(10, lease_seconds=LEASE)
    assert [(d.webhook, d.event) for d in following] == [("hook", "job.completed")]
    assert json.loads(following[0].fields["job"])["job_id"] != first
    assert outbox.resolve(following[0], "failed", code=500, error="gave up")
    deleted = outbox.claim(10, lease_seconds=LEASE)  # a failure moves the chain on too
    assert [d.event for d in deleted] == ["document.deleted"]
    assert json.loads(deleted[0].fields["data"])["document_id"] == "report.pdf"


def test_a_lapsed_lease_hands_the_delivery_over_and_fences_the_old_attempt(
    jobs: JobStore, outbox: Outbox
) -> None:
    subscribe(outbox, "hook", ["job.completed"])
    complete(jobs)
    (first,) = outbox.claim(10, lease_seconds=LEASE)
    assert outbox.claim(10, lease_seconds=LEASE) == []  # leased
    short = Outbox(outbox._redis, keys=outbox.keys, log_size=5, keep_seconds=3600)
    assert short.resolve(first, "retry", retry_in=0.0, error="HTTP 500")
    (first,) = short.claim(10, lease_seconds=0.05)  # a dispatcher that then dies
    time.sleep(0.1)
    (second,) = wait_until(lambda: outbox.claim(10, lease_seconds=LEASE), what="a re-claim")
    assert (second.id, second.attempt) == (first.id, first.attempt + 1)
    assert not outbox.resolve(first, "retry", retry_in=0.0, error="late")  # fenced
    assert outbox.resolve(first, "delivered", code=200)  # but a late success counts
    assert not outbox.resolve(second, "delivered", code=200)
    assert outbox.stats() | {"due": 0} == {
        "pending": 0, "delivered": 1, "retried": 1, "failed": 0, "dropped": 0, "due": 0,
    }  # fmt: skip


def test_the_callback_gets_its_jobs_events_and_its_secret_never_leaks(
    jobs: JobStore, outbox: Outbox
) -> None:
    complete(jobs, callback_url="http://example.com/cb", callback_secret="c" * 20)
    (delivery,) = outbox.claim(10, lease_seconds=LEASE)
    assert (delivery.webhook, delivery.url, delivery.secret) == ("", "http://example.com/cb",
                                                                 "c" * 20)  # fmt: skip
    assert "callback_secret" not in json.loads(delivery.fields["job"])
    assert jobs.get(json.loads(delivery.fields["job"])["job_id"]).callback_url == (
        "http://example.com/cb"
    )


def test_the_log_keeps_the_most_recent_deliveries(jobs: JobStore, outbox: Outbox) -> None:
    subscribe(outbox, "hook", ["job.completed"])
    for number in range(7):
        complete(jobs, f"doc-{number}")
    recent = outbox.recent("docs", "hook", 100)
    assert len(recent) == 5  # log_size
    assert [json.loads(row["job"])["document_id"] for row in recent] == [
        f"doc-{number}" for number in (6, 5, 4, 3, 2)
    ]


@pytest.mark.parametrize(
    ("url", "target"),
    [
        ("http://Example.com/cb", "http://example.com"),
        ("http://example.com:80/cb", "http://example.com"),
        ("https://user:pw@example.com:443/cb?x=1", "https://example.com"),
        ("http://example.com:8080/cb", "http://example.com:8080"),
        ("https://example.com:80/cb", "https://example.com:80"),
    ],
)
def test_a_receiver_is_one_target_however_its_url_is_spelt(
    jobs: JobStore, outbox: Outbox, url: str, target: str
) -> None:
    complete(jobs, callback_url=url, callback_secret="c" * 20)
    (delivery,) = outbox.claim(10, lease_seconds=LEASE)
    assert delivery.target == target
