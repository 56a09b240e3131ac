"""The web page against a service that requires an API key: the page itself loads without
one, the API refuses the page's calls until the key is entered, then everything works."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from tests.support import web_page as page
from tests.support.browser import Screenshots, text_of, wait_for
from tests.support.docingest_service import LOADED_REQUEST_TIMEOUT, ServiceEnv, running_serve
from tests.support.paths import EXAMPLES_DIR

KEY = "web-test-key-4f2a9c"
DOCX = EXAMPLES_DIR / "tika-sample-word-document.docx"


@pytest.fixture(scope="module")
def serve_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceEnv]:
    env = ServiceEnv(
        data_dir=tmp_path_factory.mktemp("web-keyed"),
        extra={"DOCINGEST_API_KEYS": json.dumps([{"key": KEY}])},
    )
    with running_serve(env):
        yield env


@pytest.fixture(scope="module")
def api(serve_env: ServiceEnv) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {KEY}"}
    with httpx.Client(
        base_url=serve_env.base_url, headers=headers, timeout=LOADED_REQUEST_TIMEOUT
    ) as client:
        yield client


def test_page_and_its_files_load_without_a_key(serve_env: ServiceEnv) -> None:
    with httpx.Client(base_url=serve_env.base_url, timeout=LOADED_REQUEST_TIMEOUT) as anonymous:
        index = anonymous.get("/")
        assert index.status_code == 200
        assert index.headers["content-type"].startswith("text/html")
        assert "default-src 'self'" in index.headers["content-security-policy"]
        for name, kind in (("app.js", "javascript"), ("style.css", "text/css")):
            asset = anonymous.get(f"/static/{name}")
            assert asset.status_code == 200 and kind in asset.headers["content-type"]
        assert anonymous.get("/static/missing.js").status_code == 404
        assert anonymous.get("/v1/indexes").status_code == 401
        for schema in ("/openapi.json", "/docs", "/redoc"):  # private with the data
            assert anonymous.get(schema).status_code == 401, schema


def test_key_is_asked_for_then_used(
    browser: webdriver.Chrome, serve_env: ServiceEnv, api: httpx.Client, shots: Screenshots
) -> None:
    api.put("/v1/indexes/keyed", json={}).raise_for_status()
    page.open_page(browser, serve_env.base_url)
    message = browser.find_element(By.ID, "message")
    wait_for(browser, lambda d: message.is_displayed(), timeout=30, message="no 401 message")
    shots.take("no-key")
    assert "API key is required" in text_of(message)
    assert browser.switch_to.active_element.get_attribute("id") == "api-key"
    assert not page.picker(browser).is_enabled()
    assert browser.find_element(By.ID, "file-input").get_attribute("disabled") is not None

    key_field = browser.find_element(By.ID, "api-key")
    key_field.send_keys("not-the-key")
    browser.find_element(By.CSS_SELECTOR, "#key-form button[type=submit]").click()
    wait_for(browser, lambda d: "not valid" in text_of(message), timeout=30)
    shots.take("wrong-key")

    key_field.clear()
    key_field.send_keys(KEY)
    browser.find_element(By.CSS_SELECTOR, "#key-form button[type=submit]").click()
    wait_for(
        browser,
        lambda d: [o.get_attribute("value") for o in Select(page.picker(d)).options] == ["keyed"],
        timeout=30,
        message="the index list did not load with the key",
    )
    assert not message.is_displayed()
    page.wait_for_documents_loaded(browser)
    shots.take("with-key")

    # The key stays for this tab (session storage) and the upload sends it too.
    browser.refresh()
    page.choose_index(browser, "keyed")
    assert browser.find_element(By.ID, "api-key").get_attribute("value") == KEY
    page.choose_files(browser, [DOCX])
    rows = page.wait_for_uploads(browser, [DOCX.name])
    assert rows[DOCX.name].get_attribute("data-state") == "completed", text_of(rows[DOCX.name])
    wait_for(browser, lambda d: DOCX.name in page.document_rows(d), timeout=30)
    results = page.search(browser, "sample word document", mode="keyword")
    assert [r.get_attribute("data-document-id") for r in results] == [DOCX.name]
    shots.take("uploaded-with-key")

    browser.find_element(By.ID, "key-forget").click()
    wait_for(
        browser,
        lambda d: "API key is required" in text_of(d.find_element(By.ID, "message")),
        timeout=30,
    )
    assert browser.execute_script("return sessionStorage.getItem('docingest.apiKey')") is None
