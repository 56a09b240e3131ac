"""Sources scaled out: `docingest api` and two `docingest worker` processes share one Redis
prefix, each worker with its own source scheduler. A scheduled web source runs again and
again, always in exactly one process at a time: runs never overlap, and each run asks the
site for each page once."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

import httpx
import pytest

from tests.support.docingest_service import Process, ServiceEnv, start, wait_until_up
from tests.support.embedding_server import FakeEmbeddingServer
from tests.support.redis_db import purge_keys
from tests.support.settings import FAKE_DIMENSIONS, FAKE_MODEL
from tests.support.waiting import wait_until
from tests.support.web_site import TestSite, page

RUNS = 4


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceEnv]:
    with FakeEmbeddingServer(dimensions=FAKE_DIMENSIONS) as fake:
        env = ServiceEnv(
            data_dir=tmp_path_factory.mktemp("scaled-sources"),
            extra={
                # Each process its own in-memory store: what is counted here is who runs.
                "DOCINGEST_QDRANT_URL": ":memory:",
                "DOCINGEST_EMBEDDING_PROVIDER": "openai",
                "DOCINGEST_EMBEDDING_MODEL": FAKE_MODEL,
                "DOCINGEST_EMBEDDING_DIMENSIONS": str(FAKE_DIMENSIONS),
                "DOCINGEST_OPENAI_BASE_URL": fake.base_url,
                "DOCINGEST_OPENAI_API_KEY": "sk-test",
                "DOCINGEST_SOURCES_ALLOW_PRIVATE": "true",
                "DOCINGEST_SOURCE_POLL_SECONDS": "0.2",
            },
        )
        processes: list[Process] = []
        try:
            processes.append(start(["api"], env, name="api"))
            wait_until_up(processes[0], env.base_url)
            processes += [start(["worker"], env, name=f"worker-{n}") for n in (1, 2)]
            yield env
        finally:
            for process in processes:
                process.stop()
            purge_keys(env.key_prefix)


def test_two_workers_run_a_scheduled_source_one_at_a_time(env: ServiceEnv) -> None:
    with TestSite() as site, httpx.Client(base_url=env.base_url, timeout=60) as client:
        pages = [f"/p{number}.html" for number in range(5)]
        site.pages["/"] = page("Home", *pages)
        for path in pages:
            site.pages[path] = page(f"Page {path}")
        body = {
            "type": "web",
            "config": {"start_urls": [site.url + "/"], "delay_seconds": 0},
            "schedule": {"every": "1s"},
        }
        assert client.put("/v1/indexes/scaled/sources/site", json=body).status_code == 201

        def ended_runs() -> list[dict[str, object]] | None:
            runs = client.get("/v1/indexes/scaled/sources/site/runs").json()["runs"]
            ended = [run for run in runs if run["status"] in ("completed", "failed")]
            return ended if len(ended) >= RUNS else None

        runs = wait_until(ended_runs, timeout=600, what=f"{RUNS} runs")
        client.put("/v1/indexes/scaled/sources/site", json=body | {"schedule": None})
        hits = dict(site.hits)
    assert all(run["status"] == "completed" for run in runs), runs
    spans = sorted(
        (
            datetime.fromisoformat(str(run["started_at"])),
            datetime.fromisoformat(str(run["finished_at"])),
        )
        for run in runs
    )
    for (_, finished), (started, _) in zip(spans, spans[1:], strict=False):
        assert started >= finished, f"two runs overlapped: {spans}"
    # Every run so far asked for each page once (the runs still going may have asked once more).
    assert all(hits[path] >= len(runs) for path in ["/", *pages]), hits
    assert all(hits[path] <= len(runs) + 1 for path in ["/", *pages]), hits
