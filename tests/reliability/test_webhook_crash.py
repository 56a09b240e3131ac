"""Webhooks across a kill -9 of `docingest serve` mid-delivery: the outbox is in Redis beside the
job state, and a restarted dispatcher claims again what the dead one had leased, so every
event is delivered (at least once) and each document's in order."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import httpx

from docingest import verify_signature
from tests.support.crash import deployment_env, notes
from tests.support.docingest_service import (
    ServiceEnv,
    start,
    wait_for_job,
    wait_until_up,
)
from tests.support.embedding_server import FakeEmbeddingServer
from tests.support.redis_db import purge_keys
from tests.support.settings import FAKE_DIMENSIONS
from tests.support.waiting import wait_until
from tests.support.webhook_receiver import WebhookReceiver

SECRET = "crash-test-secret-0123"
RECORD_TO = os.environ.get("DOCINGEST_RECORD_DELIVERY")
"""Set to a path to save one delivery from this real service (the SDK's signature test reads
the one saved in tests/cli/recorded_delivery.json)."""


def webhook_env(fake: FakeEmbeddingServer) -> dict[str, str]:
    return deployment_env(fake) | {
        "DOCINGEST_WEBHOOK_ALLOW_PRIVATE": "true",  # the receiver is on 127.0.0.1
        "DOCINGEST_WEBHOOK_TIMEOUT_SECONDS": "2",
        "DOCINGEST_WEBHOOK_BACKOFF_BASE_SECONDS": "0.2",
        "DOCINGEST_WEBHOOK_BACKOFF_MAX_SECONDS": "1",
        "DOCINGEST_WORKER_CONCURRENCY": "2",
    }


def test_a_kill_9_mid_delivery_then_a_restart_delivers_everything(tmp_path: Path) -> None:
    receiver = WebhookReceiver("hang").start()
    with FakeEmbeddingServer(dimensions=FAKE_DIMENSIONS) as fake:
        env = ServiceEnv(data_dir=tmp_path / "serve", extra=webhook_env(fake))
        serve = start(["serve"], env, name="serve")
        try:
            wait_until_up(serve, env.base_url)
            with httpx.Client(base_url=env.base_url, timeout=60) as client:
                hook = {"url": receiver.url, "secret": SECRET,
                        "events": ["job.completed", "document.deleted"]}  # fmt: skip
                client.put("/v1/indexes/docs/webhooks/hook", json=hook).raise_for_status()
                jobs: dict[str, list[str]] = {}
                for number in range(6):
                    document = f"doc-{number % 3}"
                    response = client.post(
                        "/v1/indexes/docs/documents",
                        files={"file": (f"{document}.txt", notes(number), "text/plain")},
                        data={"document_id": document},
                    ).raise_for_status()
                    job_id = response.json()["job_id"]
                    assert wait_for_job(client, job_id)["status"] == "completed"
                    jobs.setdefault(document, []).append(job_id)
                client.delete("/v1/indexes/docs/documents/doc-0").raise_for_status()
                wait_until(lambda: receiver.received, what="a delivery under way", timeout=120)
            assert serve.stop(signal.SIGKILL) == -signal.SIGKILL  # mid-delivery: it hangs
            receiver.mode = "ok"
            receiver.release()
            serve = start(["serve"], env, name="serve-again")
            wait_until_up(serve, env.base_url)
            got = receiver.wait_for(7, timeout=240)
        finally:
            serve.stop()
            receiver.stop()
            purge_keys(env.key_prefix)
    per_document: dict[str, list[str]] = {}
    for received in got:
        verify_signature(received.body, received.headers, SECRET, tolerance=3600)
        data = received.payload["data"]
        entry = data.get("job_id", received.payload["event"])
        if entry not in per_document.get(data["document_id"], []):
            per_document.setdefault(data["document_id"], []).append(entry)
    assert per_document == {
        "doc-0": [*jobs["doc-0"], "document.deleted"],
        "doc-1": jobs["doc-1"],
        "doc-2": jobs["doc-2"],
    }
    if RECORD_TO:
        first = got[0]
        record = {"body": first.body.decode(), "headers": first.headers, "secret": SECRET}
        Path(RECORD_TO).write_text(json.dumps(record, indent=2) + "\n")
