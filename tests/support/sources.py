"""A whole deployment with the source scheduler: the app, an embedded worker and a
`SourceScheduler` sharing one `Services` (as `docingest serve` runs them)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
from celery import Celery

from docingest.pipeline.keys import INGEST_QUEUE, INGEST_TASK
from docingest.pipeline.services import Services
from docingest.pipeline.settings import Settings
from docingest.workers import context
from docingest.workers.app import create_celery_app
from docingest.workers.embedded import EmbeddedWorker
from docingest.workers.sources import SourceScheduler
from tests.support.api_app import api_client
from tests.support.waiting import wait_until


@dataclass
class Deployment:
    client: httpx.Client
    services: Services
    celery: Celery

    def submit(self, job_id: str) -> None:
        """Hand a job to the ingest queue, as the scheduler does."""
        self.celery.send_task(INGEST_TASK, args=[job_id], queue=INGEST_QUEUE)


@contextmanager
def deployment_with_sources(
    settings: Settings, *, name: str, concurrency: int = 2, scheduler: bool = True
) -> Iterator[Deployment]:
    services = Services(settings, owns_store=True)
    celery = create_celery_app(settings)
    context.install(services)
    worker = EmbeddedWorker(celery, concurrency=concurrency, hostname=f"{name}@%h")
    runs = SourceScheduler(celery, services) if scheduler else None
    worker.start()
    if runs is not None:
        runs.start()
    try:
        with api_client(settings, services=services, celery=celery) as client:
            yield Deployment(client, services, celery)
    finally:
        if runs is not None:
            runs.stop()
        worker.stop(timeout=30)
        context.forget()
        services.close()


def sync_and_wait(
    client: httpx.Client, index: str, name: str, *, timeout: float = 120.0
) -> dict[str, Any]:
    """Request a run and wait for it to end; the ended run."""
    answer = client.post(f"/v1/indexes/{index}/sources/{name}/sync")
    assert answer.status_code == 202, answer.text
    run_id = answer.json()["run_id"]
    return wait_for_run(client, index, name, run_id, timeout=timeout)


def wait_for_run(
    client: httpx.Client, index: str, name: str, run_id: str, *, timeout: float = 120.0
) -> dict[str, Any]:
    def ended() -> dict[str, Any] | None:
        runs = client.get(f"/v1/indexes/{index}/sources/{name}/runs").raise_for_status().json()
        for run in runs["runs"]:
            if run["run_id"] == run_id and run["status"] in ("completed", "failed", "cancelled"):
                return dict(run)
        return None

    return wait_until(ended, timeout=timeout, what=f"run {run_id} of {index}/{name} to end")
