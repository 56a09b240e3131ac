"""Fixtures for the browser tests: headless Chromium, screenshots, and a client of the module's
real `docingest serve` (`serve_env`, tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from selenium import webdriver

from tests.support.browser import Screenshots, missing_browser, start_chromium
from tests.support.docingest_service import LOADED_REQUEST_TIMEOUT, ServiceEnv


@pytest.fixture(scope="module")
def api(serve_env: ServiceEnv) -> Iterator[httpx.Client]:
    """An HTTP client of the same service, to set up and check what the page shows."""
    with httpx.Client(base_url=serve_env.base_url, timeout=LOADED_REQUEST_TIMEOUT) as client:
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
