"""What the browser tests do on the page: open it, pick an index, upload, wait, search."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import Select

from docingest.pipeline.keys import TERMINAL_STATUSES
from tests.support.browser import text_of, wait_for

RECORD_UPLOADS = """
window.uploadLog = [];
new MutationObserver((mutations) => {
  for (const m of mutations) {
    const row = m.target.closest('.upload');
    if (!row) continue;
    window.uploadLog.push({
      file: row.dataset.filename,
      state: row.dataset.state,
      progress: row.querySelector('progress').hasAttribute('value')
        ? row.querySelector('progress').value : null,
      status: row.querySelector('.upload-status').textContent,
    });
  }
}).observe(document.getElementById('uploads'),
           {subtree: true, childList: true, characterData: true, attributes: true,
            attributeFilter: ['data-state', 'value']});
"""
"""Record every state, progress value and status text each upload row shows, in order."""

RECORD_JOBS = """
window.jobLog = [];
const pageFetch = window.fetch;
window.fetch = async (...args) => {
  const response = await pageFetch(...args);
  if (String(args[0]).includes('v1/jobs/') && response.ok) {
    window.jobLog.push(await response.clone().json().catch(() => null));
  }
  return response;
};
"""
"""Record every job the page is sent (`GET /v1/jobs/{id}`), as the API sent it."""

DROP_FILE = """
const [name, type, data] = arguments;
const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
const transfer = new DataTransfer();
transfer.items.add(new File([bytes], name, {type}));
const zone = document.getElementById('drop-zone');
for (const kind of ['dragenter', 'dragover', 'drop']) {
  const init = {dataTransfer: transfer, bubbles: true, cancelable: true};
  zone.dispatchEvent(new DragEvent(kind, init));
}
"""
"""Drop a file on the drop zone as a drag from the desktop would (a real DataTransfer)."""


def open_page(driver: webdriver.Chrome, base_url: str, *, key: str | None = None) -> None:
    """Load the page in a clean tab state (no stored key or index), optionally with a key."""
    driver.get(f"{base_url}/")
    driver.execute_script("sessionStorage.clear()")
    if key is not None:
        driver.execute_script("sessionStorage.setItem('docingest.apiKey', arguments[0])", key)
    driver.get(f"{base_url}/")
    wait_for(
        driver,
        lambda d: d.execute_script("return document.documentElement.dataset.ready === 'true'"),
        timeout=30,
        message="the page script did not start",
    )


def choose_index(driver: webdriver.Chrome, name: str) -> None:
    """Select `name` in the index picker once the picker lists it."""
    wait_for(
        driver,
        lambda d: name in [o.get_attribute("value") for o in Select(picker(d)).options],
        timeout=30,
        message=f"index {name} never appeared in the picker",
    )
    Select(picker(driver)).select_by_value(name)
    wait_for_documents_loaded(driver)


def picker(driver: webdriver.Chrome) -> WebElement:
    return driver.find_element(By.ID, "index-select")


def wait_for_documents_loaded(driver: webdriver.Chrome) -> None:
    wait_for(
        driver,
        lambda d: (
            d.find_element(By.ID, "documents").is_displayed()
            or d.find_element(By.ID, "documents-empty").is_displayed()
        ),
        timeout=30,
        message="the document list never loaded",
    )


def choose_files(driver: webdriver.Chrome, paths: Sequence[Path]) -> None:
    """Pick files with the page's file input (as the file picker would)."""
    driver.find_element(By.ID, "file-input").send_keys("\n".join(str(p) for p in paths))


def drop_file(driver: webdriver.Chrome, name: str, data: bytes, *, mime: str = "") -> None:
    driver.execute_script(DROP_FILE, name, mime, base64.b64encode(data).decode())


def upload_rows(driver: webdriver.Chrome) -> dict[str, WebElement]:
    return {
        str(row.get_attribute("data-filename")): row
        for row in driver.find_elements(By.CSS_SELECTOR, "#uploads .upload")
    }


def wait_for_uploads(
    driver: webdriver.Chrome, names: Sequence[str], *, timeout: float = 180.0
) -> dict[str, WebElement]:
    """Wait until the rows of `names` all show a final state; return them by file name."""

    def finished(d: webdriver.Chrome) -> dict[str, WebElement] | None:
        rows = upload_rows(d)
        if all(
            n in rows and rows[n].get_attribute("data-state") in TERMINAL_STATUSES for n in names
        ):
            return rows
        return None

    return wait_for(driver, finished, timeout=timeout, message=f"uploads of {names} not done")


def document_rows(driver: webdriver.Chrome) -> dict[str, WebElement]:
    return {
        str(row.get_attribute("data-document-id")): row
        for row in driver.find_elements(By.CSS_SELECTOR, "#documents tbody tr")
    }


def document_cells(driver: webdriver.Chrome) -> dict[str, dict[str, str]]:
    """Every document row's cells, read in one pass (`wait_for` retries the pass when the page
    re-renders the list midway: a finished job refreshes it)."""
    return {document_id: cells(row) for document_id, row in document_rows(driver).items()}


def cells(row: WebElement) -> dict[str, str]:
    """A document row's cells by their column label."""
    found = {}
    for cell in row.find_elements(By.TAG_NAME, "td"):
        label = cell.get_attribute("data-label")
        if label:
            found[label] = text_of(cell).strip()
    return found


def search(
    driver: webdriver.Chrome,
    query: str,
    *,
    mode: str = "hybrid",
    top_k: int = 5,
    document: str = "",
    per_document: int | None = None,
) -> list[WebElement]:
    """Fill the search form, submit it and return the result items once they are shown."""
    field = driver.find_element(By.ID, "search-query")
    field.clear()
    field.send_keys(query)
    Select(driver.find_element(By.ID, "search-mode")).select_by_value(mode)
    top = driver.find_element(By.ID, "search-top-k")
    top.clear()
    top.send_keys(str(top_k))
    cap = driver.find_element(By.ID, "search-cap")
    cap.clear()
    if per_document is not None:
        cap.send_keys(str(per_document))
    Select(driver.find_element(By.ID, "filter-document")).select_by_value(document)
    driver.execute_script("document.getElementById('search-summary').textContent = ''")
    driver.find_element(By.CSS_SELECTOR, "#search-form button[type=submit]").click()
    wait_for(
        driver,
        lambda d: text_of(d.find_element(By.ID, "search-summary")) not in ("", "Searching…"),
        timeout=60,
        message="the search never answered",
    )
    return driver.find_elements(By.CSS_SELECTOR, "#results .result")


def marks(item: WebElement) -> list[str]:
    return [text_of(m) for m in item.find_elements(By.CSS_SELECTOR, ".passage mark")]


def upload_log(driver: webdriver.Chrome, name: str) -> list[dict[str, Any]]:
    log: list[dict[str, Any]] = driver.execute_script("return window.uploadLog")
    return [entry for entry in log if entry["file"] == name]


def no_horizontal_scroll(driver: webdriver.Chrome) -> tuple[int, int]:
    """(scrollWidth, innerWidth) of the page."""
    width, inner = driver.execute_script(
        "return [document.documentElement.scrollWidth, window.innerWidth]"
    )
    return int(width), int(inner)
