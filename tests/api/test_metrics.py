"""`/metrics` through real uvicorn, with an embedded Celery worker sharing the API's services
(the `docingest serve` topology) on a private Redis prefix, and the fake embedding server."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from docingest.pipeline.keys import TERMINAL_STATUSES
from docingest.pipeline.services import Services
from docingest.workers import context
from docingest.workers.app import create_celery_app
from docingest.workers.embedded import EmbeddedWorker
from tests.support.api_app import api_client, upload
from tests.support.embedding_server import FakeEmbeddingServer
from tests.support.redis_db import TestRedis
from tests.support.settings import service_settings
from tests.support.waiting import wait_until

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
DOC = "\n\n".join(
    f"Metrics note {n}: the lighthouse logbook records every storm surge of the winter."
    for n in range(6)
).encode()


def scrape(client: httpx.Client) -> Samples:
    response = client.get("/metrics").raise_for_status()
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def test_one_ingestion_moves_the_metrics(
    tmp_path: Path, embedding_server: FakeEmbeddingServer, redis_db: TestRedis
) -> None:
    prefix = redis_db.prefix
    settings = service_settings(tmp_path, prefix, embedding_server)
    services = Services(settings, owns_store=True)
    celery = create_celery_app(settings)
    context.install(services)
    worker = EmbeddedWorker(celery, concurrency=1, hostname=f"metrics-{prefix}@%h")
    worker.start()
    try:
        with api_client(settings, services=services, celery=celery) as client:
            before = scrape(client)
            accepted = upload(client, "metrics", DOC).raise_for_status().json()

            def finished() -> bool:
                job = client.get(accepted["status_url"]).raise_for_status().json()
                return job["status"] in TERMINAL_STATUSES

            wait_until(finished, what="the job to finish")
            assert client.get(accepted["status_url"]).json()["status"] == "completed"
            after = scrape(client)
    finally:
        worker.stop(timeout=30)
        context.forget()
        services.close()

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("docingest_jobs_finished_total", status="completed") == 1
    assert moved("docingest_jobs_finished_total", status="failed") == 0
    assert moved("docingest_upload_bytes_total") == len(DOC)
    assert moved("docingest_uploads_total") == 1
    assert moved("docingest_stage_duration_seconds_count", stage="embedding") >= 1
    assert moved("docingest_embedding_requests_total") >= 1
    assert value(after, "docingest_queue_depth") == 0
    assert value(after, "docingest_oldest_queued_seconds") == 0
    assert value(after, "docingest_jobs", status="processing") == 0
    assert value(after, "docingest_redis_up") == 1


def test_a_job_no_worker_picks_up_shows_in_the_queue(
    tmp_path: Path, embedding_server: FakeEmbeddingServer, redis_db: TestRedis
) -> None:
    settings = service_settings(tmp_path, redis_db.prefix, embedding_server)
    with api_client(settings) as client:
        idle = scrape(client)
        assert value(idle, "docingest_queue_depth") == 0
        assert upload(client, "metrics", DOC).status_code == 202
        time.sleep(0.2)
        samples = scrape(client)
    assert value(samples, "docingest_queue_depth") == 1
    assert value(samples, "docingest_jobs", status="queued") == 1
    assert value(samples, "docingest_oldest_queued_seconds") >= 0.2
