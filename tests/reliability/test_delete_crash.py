"""A document delete killed (SIGKILL) half-way never loses its `document.deleted` event, nor
invents one: the delete is recorded in Redis before the store is touched and ended by the
script that writes its event, and the sweep finishes what a dead process left.

A child process runs `Services.delete_document` on the embedded store and kills itself at
one step: just before the event is written (the store has deleted the document) or just
before the store is asked to delete (nothing was deleted)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from docingest.pipeline.errors import DocumentNotFound
from docingest.pipeline.ingest.sweep import sweep
from docingest.pipeline.outbox import Subscription
from docingest.pipeline.services import Services
from docingest.pipeline.settings import Settings
from tests.pipeline.store.test_store import CONFIG, records
from tests.support.paths import REPO_DIR
from tests.support.redis_db import private_redis, unique_prefix
from tests.support.settings import service_settings
from tests.support.waiting import wait_until

INDEX, DOCUMENT = "docs", "report.txt"

CHILD = """
import json, os, signal, sys
from pathlib import Path
from docingest.pipeline.services import Services
from tests.support.settings import service_settings

args = json.loads(sys.argv[1])
settings = service_settings(Path(args["data_dir"]), args["prefix"], None, qdrant_url=None)
services = Services(settings, owns_store=True)

def killed(*_args, **_kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

if args["at"] == "event":
    services.outbox.emit_deleted = killed  # the store has deleted; the event is next
else:
    services.store.delete_document = killed  # the delete is recorded; the store is next
services.delete_document(args["index"], args["document"])
"""


@pytest.fixture
def settings(tmp_path: Path) -> Iterator[Settings]:
    prefix = unique_prefix("delete-crash")
    with private_redis(prefix):
        yield service_settings(tmp_path / "data", prefix, None, qdrant_url=None)


def stored_with_a_subscriber(settings: Settings) -> None:
    """Store version 1 of the document and subscribe a webhook to deletes, then close."""
    services = Services(settings, owns_store=True)
    try:
        services.store.create_index(INDEX, CONFIG)
        version = services.next_version(INDEX, DOCUMENT)
        services.store.write_chunks(INDEX, records(DOCUMENT, version, ["alpha beta", "gamma"]))
        services.store.publish(INDEX, DOCUMENT, version)
        now = time.time()
        hook = Subscription(name="hook", index=INDEX, url="https://example.invalid/hook",
                            events=["document.deleted"], secret="s" * 16, created_at=now,
                            updated_at=now)  # fmt: skip
        services.outbox.put(hook)
    finally:
        services.close()


def delete_killed_at(settings: Settings, at: str) -> None:
    args = {"data_dir": str(settings.data_dir), "prefix": settings.redis_key_prefix,
            "index": INDEX, "document": DOCUMENT, "at": at}  # fmt: skip
    command = [sys.executable, "-c", CHILD, json.dumps(args)]
    child = subprocess.run(command, cwd=REPO_DIR, capture_output=True, timeout=120)
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()[-2000:]


def finish_by_sweep(services: Services) -> int:
    """Sweep until no delete is under way (the dead child's lock lapses first); the events
    the sweeps wrote."""
    written = 0

    def swept() -> bool:
        nonlocal written
        report = sweep(services, enqueue=lambda _job: None, delete_grace_seconds=0)
        written += report.deletes_finished
        return not services.outbox.deletes_under_way()

    wait_until(swept, what="the interrupted delete finished", timeout=90, poll=0.5)
    return written


@contextmanager
def reopened_after_a_delete_killed_at(settings: Settings, at: str | None) -> Iterator[Services]:
    """Store the document, run its delete in a child killed at step `at` (None: no delete),
    then yield this process's services over what the child left."""
    stored_with_a_subscriber(settings)
    if at is not None:
        delete_killed_at(settings, at)
    services = Services(settings, owns_store=True)
    try:
        yield services
    finally:
        services.close()


def deleted_events(services: Services) -> list[dict[str, str]]:
    return [row for row in services.outbox.recent(INDEX, "hook", 10)
            if row["event"] == "document.deleted"]  # fmt: skip


def test_killed_after_the_store_deleted_the_event_is_written_by_the_sweep(
    settings: Settings,
) -> None:
    with reopened_after_a_delete_killed_at(settings, "event") as services:
        assert services.store.live_document(INDEX, DOCUMENT) is None  # the store did delete
        (under_way,) = services.outbox.deletes_under_way()
        assert (under_way.index, under_way.document_id) == (INDEX, DOCUMENT)
        assert deleted_events(services) == []  # the kill came before the event

        assert finish_by_sweep(services) == 1
        (event,) = deleted_events(services)
        assert event["document_id"] == DOCUMENT and event["status"] == "pending"
        assert json.loads(event["data"])["document_id"] == DOCUMENT
        assert finish_by_sweep(services) == 0  # once only


def test_killed_before_the_store_was_asked_no_event_and_the_document_stays(
    settings: Settings,
) -> None:
    with reopened_after_a_delete_killed_at(settings, "store") as services:
        assert services.outbox.deletes_under_way()
        assert finish_by_sweep(services) == 0
        assert deleted_events(services) == []
        live = services.store.live_document(INDEX, DOCUMENT)
        assert live is not None and live.version == 1


def test_a_document_uploaded_again_after_the_killed_delete_still_gets_the_event(
    settings: Settings,
) -> None:
    with reopened_after_a_delete_killed_at(settings, "event") as services:
        version = services.next_version(INDEX, DOCUMENT)  # an upload after the delete
        services.store.write_chunks(INDEX, records(DOCUMENT, version, ["new text"]))
        services.store.publish(INDEX, DOCUMENT, version)

        assert finish_by_sweep(services) == 1
        assert len(deleted_events(services)) == 1
        live = services.store.live_document(INDEX, DOCUMENT)
        assert live is not None and live.version == version  # the new upload is untouched


def test_a_delete_that_ends_leaves_nothing_under_way(settings: Settings) -> None:
    with reopened_after_a_delete_killed_at(settings, None) as services:
        services.delete_document(INDEX, DOCUMENT)
        assert services.outbox.deletes_under_way() == []
        assert len(deleted_events(services)) == 1
        with pytest.raises(DocumentNotFound):
            services.delete_document(INDEX, DOCUMENT)  # nothing to delete: no event
        assert services.outbox.deletes_under_way() == []
        assert len(deleted_events(services)) == 1


def test_a_killed_delete_whose_index_went_since_still_gets_its_event(settings: Settings) -> None:
    with reopened_after_a_delete_killed_at(settings, "event") as services:
        assert services.delete_index(INDEX)
        assert finish_by_sweep(services) == 1  # the document went with its index
        assert len(deleted_events(services)) == 1
