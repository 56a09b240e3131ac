"""`docingest sources` as a real command against a real `docingest serve`, whose own source
scheduler runs the source: put (the secret-free folder type), list, sync --wait, runs, show,
delete --delete-documents, and cancel (a crawl of the test website under way, an ended run)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import docingest
from tests.support.docingest_service import (
    DOCINGEST,
    LOADED_START_TIMEOUT,
    ServiceEnv,
    running_serve,
)
from tests.support.web_site import TestSite, page


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sources-cli-root")


@pytest.fixture(scope="module")
def serve_env(tmp_path_factory: pytest.TempPathFactory, root: Path) -> Iterator[ServiceEnv]:
    env = ServiceEnv(
        data_dir=tmp_path_factory.mktemp("sources-cli"),
        extra={
            "DOCINGEST_SOURCE_FOLDER_ROOTS": str(root),
            "DOCINGEST_SOURCE_POLL_SECONDS": "0.2",
            "DOCINGEST_SOURCES_ALLOW_PRIVATE": "true",  # the test website is on loopback
        },
    )
    with running_serve(env, timeout=LOADED_START_TIMEOUT):
        yield env


def sources(env: ServiceEnv, *argv: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("DOCINGEST_")}
    environ["DOCINGEST_URL"] = env.base_url
    return subprocess.run(
        [str(DOCINGEST), "sources", *argv], env=environ, capture_output=True, text=True, timeout=600
    )


def test_put_sync_runs_and_delete(serve_env: ServiceEnv, root: Path) -> None:
    folder = root / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# Alpacas\n\nAlpacas hum when they are content.")
    (folder / "b.txt").write_text("Llamas spit when annoyed.")
    config = json.dumps({"path": str(folder)})
    put = sources(serve_env, "put", "cli", "notes", "--type", "folder", "--config", config)
    assert put.returncode == 0, put.stderr
    assert json.loads(put.stdout)["type"] == "folder"

    synced = sources(serve_env, "sync", "cli", "notes", "--wait")
    assert synced.returncode == 0, synced.stderr
    assert "completed" in synced.stdout and "new 2" in synced.stdout, synced.stdout
    ended = sources(serve_env, "cancel", "cli", "notes", synced.stdout.split()[0])
    assert ended.returncode == 1 and "run_state_conflict" in ended.stderr, ended.stderr
    idle = sources(serve_env, "cancel", "cli", "notes")
    assert idle.returncode == 1 and "no run under way" in idle.stderr, idle.stderr

    listed = sources(serve_env, "list", "cli")
    assert "notes" in listed.stdout and "completed" in listed.stdout, listed.stdout
    runs = sources(serve_env, "runs", "cli", "notes")
    assert runs.stdout.count("run_") == 1, runs.stdout
    shown = json.loads(sources(serve_env, "show", "cli", "notes").stdout)
    assert shown["last_run"]["counts"]["new"] == 2

    with docingest.Client(serve_env.base_url) as client:
        assert {doc.document_id for doc in client.iter_documents("cli")} == {"a.md", "b.txt"}
        deleted = sources(serve_env, "delete", "cli", "notes", "--delete-documents")
        assert deleted.returncode == 0, deleted.stderr
        assert list(client.iter_documents("cli")) == []
    missing = sources(serve_env, "show", "cli", "notes")
    assert missing.returncode == 1 and "source_not_found" in missing.stderr


def test_cancel_stops_the_run_under_way(serve_env: ServiceEnv) -> None:
    pages = [f"/p{number}.html" for number in range(20)]
    with TestSite() as site:
        site.pages["/"] = page("Home", *pages)
        for path in pages:
            site.pages[path] = page(f"Page {path}")
            site.slow[path] = 0.5  # a crawl of 10 s at least
        config = json.dumps({"start_urls": [site.url + "/"], "delay_seconds": 0})
        put = sources(serve_env, "put", "cli", "crawl", "--type", "web", "--config", config)
        assert put.returncode == 0, put.stderr
        started = sources(serve_env, "sync", "cli", "crawl")
        assert started.returncode == 0 and "queued" in started.stdout, started.stdout
        cancelled = sources(serve_env, "cancel", "cli", "crawl", "--wait")
        assert cancelled.returncode == 0, cancelled.stderr
        assert cancelled.stdout.split()[:2] == [started.stdout.split()[0], "cancelled"], (
            cancelled.stdout
        )
        assert site.hits[pages[-1]] == 0, "the crawl went on after its cancel"
