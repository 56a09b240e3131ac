"""The web page's Sources panel in headless Chromium against a real `docingest serve` with a
folder source: it lists the source, runs it with "Sync now", and shows the run's counts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By

from tests.support import web_page as page
from tests.support.browser import console_errors, wait_for
from tests.support.docingest_service import LOADED_START_TIMEOUT, ServiceEnv, running_serve


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("panel-root")


@pytest.fixture(scope="module")
def serve_env(tmp_path_factory: pytest.TempPathFactory, root: Path) -> Iterator[ServiceEnv]:
    env = ServiceEnv(
        data_dir=tmp_path_factory.mktemp("panel-serve"),
        extra={
            "DOCINGEST_SOURCE_FOLDER_ROOTS": str(root),
            "DOCINGEST_SOURCE_POLL_SECONDS": "0.2",
        },
    )
    with running_serve(env, timeout=LOADED_START_TIMEOUT):
        yield env


def test_the_panel_lists_a_source_and_runs_it(
    browser: webdriver.Chrome, serve_env: ServiceEnv, api: httpx.Client, root: Path
) -> None:
    folder = root / "notes"
    folder.mkdir()
    (folder / "one.txt").write_text("Vicunas live high in the Andes.")
    body = {"type": "folder", "config": {"path": str(folder)}, "schedule": {"every": "1d"}}
    api.put("/v1/indexes/panel", json={}).raise_for_status()
    api.put("/v1/indexes/panel/sources/notes", json=body).raise_for_status()
    # The schedule's first run happens at once; wait for it so the button starts a second.
    wait_for_run_count(api, 1)

    page.open_page(browser, serve_env.base_url)
    page.choose_index(browser, "panel")
    row = wait_for(
        browser,
        lambda d: d.find_elements(By.CSS_SELECTOR, "#sources tr[data-source='notes']"),
        timeout=30,
        message="the source never appeared",
    )[0]
    assert "every 1d" in row.text and "1 new" in row.text, row.text

    (folder / "two.txt").write_text("Guanacos are wild.")
    browser.find_element(By.CSS_SELECTOR, "#sources button[aria-label='Sync notes now']").click()
    wait_for_run_count(api, 2)
    browser.find_element(By.ID, "sources-refresh").click()
    wait_for(
        browser,
        lambda d: (
            "1 new, 0 changed, 1 unchanged"
            in d.find_element(By.CSS_SELECTOR, "#sources tr[data-source='notes']").text
        ),
        timeout=60,
        message="the second run's counts never showed",
    )
    assert not console_errors(browser)


def wait_for_run_count(api: httpx.Client, count: int) -> None:
    import time

    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        runs = api.get("/v1/indexes/panel/sources/notes/runs").json()["runs"]
        ended = [run for run in runs if run["status"] in ("completed", "failed")]
        if len(ended) >= count:
            return
        time.sleep(0.2)
    raise AssertionError(json.dumps(runs))
