"""Fixtures for the browser tests: a real `docingest serve`, headless Chromium, screenshots."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from selenium import webdriver

from tests.support.browser import Screenshots, missing_browser, start_chromium
from tests.support.docingest_service import ServiceEnv, running_serve


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceEnv]:
    """One real `docingest serve` (API and in-process worker) for the test module."""
    env = ServiceEnv(data_dir=tmp_path_factory.mktemp("web-serve"))
    with running_serve(env):
        yield env


@pytest.fixture(scope="module")
def api(service: ServiceEnv) -> Iterator[httpx.Client]:
    """An HTTP client of the same service, to set up and check what the page shows."""
    with httpx.Client(base_url=service.base_url, timeout=60) as client:
        yield client


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[webdriver.Chrome]:
    """Headless Chromium with a fresh profile, shared by the tests of a module."""
    problem = missing_browser()
    if problem:
        pytest.fail(problem)
    driver = start_chromium(tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def shots(browser: webdriver.Chrome, request: pytest.FixtureRequest) -> Screenshots:
    """Numbered screenshots of this test, saved under the artifacts directory."""
    return Screenshots(browser, request.node.name)
