"""A short load test of `docingest serve` (the full one is bench/bench_load.py): 60 uploads of
small real documents from 8 concurrent clients, a tenth of them re-uploads of an earlier
document id with other content, while a client searches the index the whole time. Every job
must end, none be lost or completed twice, and the index and its store must hold exactly one
live version of each document (see `load_checks` for the full list)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from docingest.pipeline.settings import Settings
from tests.support.load import plan_uploads, run_load, serving, source_files
from tests.support.load_checks import check_api, check_store

UPLOADS, CLIENTS, SEARCHERS = 60, 8, 1
SEARCH_PAUSE = 0.1
"""Seconds between one client's searches: searches back to back would take one of the 2 CPUs
of a CI box from ingestion (bench_load runs them back to back)."""
TIMEOUT = 240.0
"""Seconds until every job must have ended. The whole test took 23 s (25 CPU-seconds) on a shared
2-core box at a load average of 5; the margin is for a slower or busier CI machine."""


@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT + 120)
def test_concurrent_uploads_and_searches_end_once_each(tmp_path: Path, corpus_dir: Path) -> None:
    plan = plan_uploads(source_files(corpus_dir), uploads=UPLOADS)
    document_ids = {upload.document_id for upload in plan}
    assert len(document_ids) == UPLOADS - 6  # six re-uploads of earlier ids
    data_dir = tmp_path / "data"
    with serving(data_dir) as env:
        run = run_load(
            env.base_url,
            plan,
            index="load",
            clients=CLIENTS,
            searchers=SEARCHERS,
            search_pause=SEARCH_PAUSE,
            timeout=TIMEOUT,
        )
        with httpx.Client(base_url=env.base_url, timeout=60) as client:
            max_attempts = Settings.model_fields["job_max_attempts"].default
            found = check_api(client, run, max_attempts=max_attempts)
    check_store(found, data_dir, "load")

    assert found.violations == []
    assert found.uploads == UPLOADS
    assert found.completed + sum(found.failed.values()) == UPLOADS
    assert set(found.failed) <= {"superseded"}
    assert found.documents == len(document_ids)  # each document completed at least once
    assert found.chunks >= found.documents
    assert len(run.searches) >= 10
    assert any(search.results for search in run.searches)  # searches saw documents arrive
