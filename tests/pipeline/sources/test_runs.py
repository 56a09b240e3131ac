"""Runs under their lease: one process at a time per source, a run left half-way carried on
from its checkpoint (without fetching again what it compared), the run's webhook event
written with its end, and cancels (of a run under way, of a queued run, of a run whose
process died, of a run that ended). A real deployment (worker, Redis, store) and the test
website."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from docingest.pipeline.errors import RunNotFound, RunStateConflict
from docingest.pipeline.keys import JobStatus
from docingest.pipeline.sources import COMPLETED_EVENT, SourceRunner, source_store
from docingest.pipeline.sources.runner import CANCEL_CHECK_SECONDS
from tests.support.embedding_server import FakeEmbeddingServer
from tests.support.redis_db import private_redis, unique_prefix
from tests.support.settings import FAKE_DIMENSIONS, service_settings
from tests.support.sources import Deployment, deployment_with_sources
from tests.support.waiting import wait_until
from tests.support.web_site import TestSite, page

PAGES = [f"/p{number}.html" for number in range(8)]


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeEmbeddingServer]:
    with FakeEmbeddingServer(dimensions=FAKE_DIMENSIONS) as server:
        yield server


@pytest.fixture(scope="module")
def deployment(
    tmp_path_factory: pytest.TempPathFactory, fake: FakeEmbeddingServer
) -> Iterator[Deployment]:
    prefix = unique_prefix("source-runs")
    with private_redis(prefix):
        settings = service_settings(
            tmp_path_factory.mktemp("source-runs"),
            prefix,
            fake,
            sources_allow_private=True,
            webhook_allow_private=True,
            webhook_dispatcher=False,
            source_lease_seconds=5,
        )
        with deployment_with_sources(settings, name="source-runs", scheduler=False) as running:
            yield running


@pytest.fixture
def site() -> Iterator[TestSite]:
    with TestSite() as site:
        site.pages["/"] = page("Home", *PAGES)
        for path in PAGES:
            site.pages[path] = page(f"Page {path}")
        yield site


def _put_web_source(deployment: Deployment, index: str, site: TestSite) -> None:
    body = {"type": "web", "config": {"start_urls": [site.url + "/"], "delay_seconds": 0}}
    answer = deployment.client.put(f"/v1/indexes/{index}/sources/site", json=body)
    assert answer.status_code == 201, answer.text


def test_a_run_left_half_way_is_carried_on_without_fetching_again(
    deployment: Deployment, site: TestSite
) -> None:
    _put_web_source(deployment, "resume", site)
    store = source_store(deployment.services)
    queued, run = store.request_run("resume", "site", trigger="manual")
    assert queued
    checks = iter(range(1000))

    def dies_after_four_items() -> bool:
        return next(checks) >= 4  # the process "dies" at its fifth item

    first = SourceRunner(
        deployment.services, submit=deployment.submit, stopping=dies_after_four_items
    )
    assert first.try_run("resume", "site")
    left = store.current("resume", "site")
    assert left is not None and left.run_id == run.run_id
    assert left.counts.listed == 4 and left.counts.new == 4, left
    assert len(store.seen("resume", "site")) == 4

    second = SourceRunner(deployment.services, submit=deployment.submit)
    assert second.try_run("resume", "site")
    assert store.current("resume", "site") is None
    ended = store.runs("resume", "site", 1)[0]
    assert ended.run_id == run.run_id and ended.status == "completed", ended
    assert ended.counts.new == len(PAGES) + 1 and ended.counts.listed == len(PAGES) + 1
    full_answers = {path: site.hits[path] - site.not_modified[path] for path in ["/", *PAGES]}
    # The four compared pages were not fetched again (a 304 at most, to read their links);
    # only the page the crawler had in hand when the process died was fetched twice.
    assert sorted(full_answers.values()) == [1] * len(PAGES) + [2], full_answers
    jobs = deployment.client.get("/v1/jobs", params={"index": "resume", "limit": 100}).json()
    assert len(jobs["jobs"]) == len(PAGES) + 1  # one job per page, none sent twice


def test_only_the_lease_holder_runs_a_source(deployment: Deployment, site: TestSite) -> None:
    _put_web_source(deployment, "lease", site)
    store = source_store(deployment.services)
    store.request_run("lease", "site", trigger="manual")
    assert store.take_lease("lease", "site", "another-process", 5)
    runner = SourceRunner(deployment.services, submit=deployment.submit)
    assert not runner.try_run("lease", "site")
    assert site.hits["/"] == 0
    store.release_lease("lease", "site", "another-process")

    started = threading.Barrier(2)
    outcomes: list[bool] = []

    def run() -> None:
        competitor = SourceRunner(deployment.services, submit=deployment.submit)
        started.wait()
        outcomes.append(competitor.try_run("lease", "site"))

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert sorted(outcomes) == [False, True]  # both tried at once; one ran
    assert site.hits["/"] == 1
    assert store.runs("lease", "site", 5)[0].status == "completed"


def test_the_run_writes_its_webhook_event(deployment: Deployment, site: TestSite) -> None:
    services = deployment.services
    hook = {"url": "http://127.0.0.1:9/hook", "events": ["source.sync.completed"]}
    assert deployment.client.put("/v1/indexes/events/webhooks/h", json=hook).status_code == 201
    _put_web_source(deployment, "events", site)
    store = source_store(services)
    _, run = store.request_run("events", "site", trigger="manual")
    assert SourceRunner(services, submit=deployment.submit).try_run("events", "site")
    ids = services.redis.lrange(services.keys.webhook_log("events", "h"), 0, -1)
    assert len(ids) == 1
    delivery = services.redis.hgetall(services.keys.webhook_delivery(str(ids[0])))
    assert delivery["event"] == "source.sync.completed"
    data = json.loads(delivery["data"])
    assert data["run_id"] == run.run_id and data["source"] == "site"
    assert data["counts"]["new"] == len(PAGES) + 1


def _delivered_events(deployment: Deployment, index: str, hook: str) -> list[dict[str, str]]:
    redis: Any = deployment.services.redis  # decodes responses: every answer is str
    keys = deployment.services.keys
    ids = redis.lrange(keys.webhook_log(index, hook), 0, -1)
    return [redis.hgetall(keys.webhook_delivery(str(each))) for each in ids]


def test_a_cancelled_run_stops_listing_cancels_its_jobs_and_the_next_run_brings_them(
    deployment: Deployment, site: TestSite
) -> None:
    services = deployment.services
    store = source_store(services)
    _put_web_source(deployment, "cancel", site)
    _, run = store.request_run("cancel", "site", trigger="manual")
    # Each page takes longer than a run waits between two reads of its cancel flag, so the
    # cancel asked while the second page is fetched is seen before the third is asked for.
    for path in ["/", *PAGES]:
        site.slow[path] = CANCEL_CHECK_SECONDS + 0.2
    site.on_request = lambda path: (
        store.cancel_run("cancel", "site", run.run_id) if path == PAGES[1] else None
    )
    held: list[str] = []  # jobs recorded but not yet taken by a worker: a queue's backlog
    assert SourceRunner(services, submit=held.append).try_run("cancel", "site")

    ended = store.runs("cancel", "site", 1)[0]
    assert (ended.run_id, ended.status, ended.error) == (run.run_id, "cancelled", None), ended
    assert site.hits[PAGES[2]] == 0 and site.hits[PAGES[-1]] == 0, "the listing went on"
    assert len(held) == ended.counts.listed >= 1, (held, ended)
    # Its jobs were cancelled and their items left `new` without counting as failed.
    assert {services.jobs.get(job_id).status for job_id in held} == {JobStatus.CANCELLED}
    assert (ended.counts.new, ended.counts.failed, ended.counts.deleted) == (0, 0, 0), ended
    assert store.known("cancel", "site") == {} and store.current("cancel", "site") is None
    with pytest.raises(RunStateConflict):
        store.cancel_run("cancel", "site", run.run_id)
    assert store.current("cancel", "site") is None, "a late cancel brought the run back"

    site.slow.clear()
    site.on_request = None
    store.request_run("cancel", "site", trigger="manual")
    assert SourceRunner(services, submit=deployment.submit).try_run("cancel", "site")
    again = store.runs("cancel", "site", 1)[0]
    assert again.status == "completed" and again.counts.new == len(PAGES) + 1, again


def test_a_queued_run_cancelled_ends_when_a_scheduler_takes_it_with_its_event(
    deployment: Deployment, site: TestSite
) -> None:
    hook = {"url": "http://127.0.0.1:9/hook", "events": ["source.sync.cancelled"]}
    assert deployment.client.put("/v1/indexes/qcancel/webhooks/h", json=hook).status_code == 201
    _put_web_source(deployment, "qcancel", site)
    store = source_store(deployment.services)
    _, run = store.request_run("qcancel", "site", trigger="manual")
    assert store.cancel_run("qcancel", "site", run.run_id).status == "cancelling"
    assert store.cancel_run("qcancel", "site", run.run_id).status == "cancelling"  # again: same
    assert store.runs("qcancel", "site", 5)[0].status == "cancelling"
    with pytest.raises(RunNotFound):
        store.cancel_run("qcancel", "site", "run_unknown")

    assert SourceRunner(deployment.services, submit=deployment.submit).try_run("qcancel", "site")
    assert sum(site.hits.values()) == 0, "a cancelled queued run read the site"
    ended = store.runs("qcancel", "site", 5)
    assert [(each.run_id, each.status) for each in ended] == [(run.run_id, "cancelled")]
    events = _delivered_events(deployment, "qcancel", "h")
    assert [event["event"] for event in events] == ["source.sync.cancelled"]
    data = json.loads(events[0]["data"])
    assert (data["run_id"], data["status"], data["source"]) == (run.run_id, "cancelled", "site")


def test_a_cancel_while_the_lease_holder_is_dead_is_honoured_by_the_next(
    deployment: Deployment, site: TestSite
) -> None:
    services = deployment.services
    store = source_store(services)
    _put_web_source(deployment, "deadcancel", site)
    _, run = store.request_run("deadcancel", "site", trigger="manual")
    checks = iter(range(1000))
    held: list[str] = []
    dying = SourceRunner(services, submit=held.append, stopping=lambda: next(checks) >= 3)
    assert dying.try_run("deadcancel", "site")
    assert store.current("deadcancel", "site") is not None and len(held) == 3
    hits = sum(site.hits.values())

    assert store.cancel_run("deadcancel", "site", run.run_id).status == "cancelling"
    assert SourceRunner(services, submit=deployment.submit).try_run("deadcancel", "site")
    ended = store.runs("deadcancel", "site", 1)[0]
    assert (ended.run_id, ended.status) == (run.run_id, "cancelled"), ended
    assert sum(site.hits.values()) == hits, "the run went on reading after its cancel"
    assert {services.jobs.get(job_id).status for job_id in held} == {JobStatus.CANCELLED}
    assert ended.counts.listed == 3 and ended.counts.new == 0, ended


def test_a_cancel_stops_the_runs_job_under_way_and_the_run_waits_for_it(
    deployment: Deployment, fake: FakeEmbeddingServer, site: TestSite
) -> None:
    services = deployment.services
    store = source_store(services)
    site.pages[PAGES[0]] = page("Stall", body="A page about stalling okapis.")
    # Its job stalls in embedding (within the embedding timeout), so it is under way when
    # the run is cancelled: it is asked to stop, as `DELETE /v1/jobs/{id}` asks.
    fake.fail_inputs_containing("stalling okapis", {"delay": 3.0}, times=1)
    _put_web_source(deployment, "jobcancel", site)
    _, run = store.request_run("jobcancel", "site", trigger="manual")
    runner = SourceRunner(services, submit=deployment.submit)
    running = threading.Thread(target=runner.try_run, args=("jobcancel", "site"))
    running.start()

    def stalled_job() -> str | None:
        jobs = services.jobs.recent(index="jobcancel", status=JobStatus.PROCESSING, limit=20)
        return next((job.job_id for job in jobs if job.document_id.endswith(PAGES[0])), None)

    job_id = wait_until(stalled_job, timeout=120, what="the stalled page's job to be under way")
    assert store.cancel_run("jobcancel", "site", run.run_id).status == "cancelling"
    running.join(timeout=300)
    assert not running.is_alive()

    ended = store.runs("jobcancel", "site", 1)[0]
    assert (ended.status, ended.error) == ("cancelled", None), ended
    assert services.jobs.get(job_id).status is JobStatus.CANCELLED
    jobs = services.jobs.recent(index="jobcancel", limit=100)
    assert {job.status for job in jobs} <= {JobStatus.COMPLETED, JobStatus.CANCELLED}, jobs
    completed = [job for job in jobs if job.status is JobStatus.COMPLETED]
    assert ended.counts.new == len(completed) and ended.counts.failed == 0, ended
    assert set(store.known("jobcancel", "site")) == {job.document_id for job in completed}


def test_a_cancel_racing_the_runs_end_never_brings_the_run_back(
    deployment: Deployment, site: TestSite
) -> None:
    """The cancel's flag goes on the run under way only while it is that run: a plain HSET
    that lands just after the finish deleted the hash would leave a run no process ends."""
    _put_web_source(deployment, "race", site)
    store = source_store(deployment.services)
    source = store.get("race", "site")
    assert source is not None
    answers: list[str] = []
    for _ in range(40):
        _, run = store.request_run("race", "site", trigger="manual")
        assert store.take_lease("race", "site", "holder", 5)
        started = store.start("race", "site", trigger="manual")
        ended = started.model_copy(update={"status": "completed"})
        both = threading.Barrier(2)

        def cancel(run_id: str = run.run_id, both: threading.Barrier = both) -> None:
            both.wait()
            try:
                answers.append(store.cancel_run("race", "site", run_id).status)
            except RunStateConflict:
                answers.append("ended")

        canceller = threading.Thread(target=cancel)
        canceller.start()
        both.wait()
        assert store.finish(source, ended, token="holder", next_due=None, event=COMPLETED_EVENT)
        canceller.join(timeout=60)
        store.release_lease("race", "site", "holder")
        assert store.current("race", "site") is None, answers
        assert store.runs("race", "site", 1)[0].status == "completed"
    assert set(answers) <= {"cancelling", "ended"} and len(answers) == 40, answers
