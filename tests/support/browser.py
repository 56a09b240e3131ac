"""Debian's headless Chromium driven by Selenium, and screenshots saved as test artifacts.

The driver and browser paths are given explicitly, so Selenium Manager never runs and
nothing is downloaded; `.ci/run` installs the `chromium` and `chromium-driver` packages.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from tests.support.paths import TESTS_DIR

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")

FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--no-default-browser-check",
    "--lang=en-US",
)

T = TypeVar("T")


def missing_browser() -> str | None:
    """Why the browser tests cannot run here, or None."""
    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not path.is_file()]
    if not missing:
        return None
    return (
        f"{', '.join(missing)} not found: install Debian's packages with "
        "`apt-get install chromium chromium-driver` (.ci/run does)"
    )


def artifacts_dir() -> Path:
    """Where screenshots go: $DOCINGEST_TEST_ARTIFACTS, else tests/artifacts/ (gitignored)."""
    configured = os.environ.get("DOCINGEST_TEST_ARTIFACTS")
    return Path(configured) if configured else TESTS_DIR / "artifacts"


def start_chromium(profile_dir: Path, *, width: int = 1280, height: int = 900) -> webdriver.Chrome:
    """A fresh headless Chromium with its own profile, logging the page's console."""
    options = Options()
    options.binary_location = str(CHROMIUM)
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile_dir}")
    options.add_argument(f"--window-size={width},{height}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(executable_path=str(CHROMEDRIVER))
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_page_load_timeout(30)
    driver.set_script_timeout(30)
    return driver


def wait_for(
    driver: webdriver.Chrome,
    condition: Callable[[webdriver.Chrome], T | None],
    *,
    timeout: float = 120.0,
    message: str = "",
) -> T:
    """Poll `condition` until it returns something truthy (returned), else fail.

    Elements the page re-rendered meanwhile (stale) count as not yet.
    """
    waiting = WebDriverWait(
        driver, timeout, poll_frequency=0.2, ignored_exceptions=[StaleElementReferenceException]
    )
    result = waiting.until(condition, message=message)
    assert result is not None  # `until` returns only a truthy value (else it raises)
    return result


def console_errors(driver: webdriver.Chrome) -> list[dict[str, Any]]:
    """The page's console messages of level SEVERE since the last call."""
    return [entry for entry in driver.get_log("browser") if entry.get("level") == "SEVERE"]


def text_of(element: WebElement) -> str:
    return str(element.get_attribute("textContent") or "")


class Screenshots:
    """Numbered full-page screenshots of one test under the artifacts directory."""

    def __init__(self, driver: webdriver.Chrome, test_name: str) -> None:
        self.driver = driver
        self.directory = artifacts_dir() / "web" / re.sub(r"[^\w.-]+", "_", test_name)
        self.directory.mkdir(parents=True, exist_ok=True)
        for old in self.directory.glob("*.png"):
            old.unlink()
        self.count = 0

    def take(self, step: str) -> Path:
        """Save the whole page (beyond the viewport) as NN-step.png and return its path."""
        self.count += 1
        path = self.directory / f"{self.count:02d}-{step}.png"
        metrics = self.driver.execute_cdp_cmd("Page.getLayoutMetrics", {})
        size = metrics["cssContentSize"]
        shot = self.driver.execute_cdp_cmd(
            "Page.captureScreenshot",
            {
                "format": "png",
                "captureBeyondViewport": True,
                "clip": {
                    "x": 0,
                    "y": 0,
                    "width": size["width"],
                    "height": size["height"],
                    "scale": 1,
                },
            },
        )
        path.write_bytes(base64.b64decode(shot["data"]))
        return path
