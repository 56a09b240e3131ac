"""The web page in headless Chromium against a real `docingest serve`: upload and follow jobs,
list and delete documents, search with highlighted passages, errors, a narrow screen."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import httpx
import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from tests.support import web_page as page
from tests.support.browser import Screenshots, console_errors, text_of, wait_for
from tests.support.docingest_service import ServiceEnv, wait_for_job
from tests.support.paths import CORPUS_DIR, EXAMPLES_DIR

EXAMPLES = EXAMPLES_DIR
README = EXAMPLES / "docling-README.md"
DOCX = EXAMPLES / "tika-sample-word-document.docx"
RFC = EXAMPLES / "rfc6455-websocket.txt"
TRUNCATED_PDF = CORPUS_DIR / "pdf" / "corrupt-truncated-federal-register.pdf"
HEADER_ONLY_PDF = CORPUS_DIR / "pdf" / "corrupt-header-only.pdf"


def create_index(api: httpx.Client, name: str) -> None:
    api.put(f"/v1/indexes/{name}", json={}).raise_for_status()


def ingest(api: httpx.Client, index: str, path: Path) -> dict[str, object]:
    """Upload `path` through the API and wait for its job to complete."""
    with path.open("rb") as handle:
        accepted = api.post(
            f"/v1/indexes/{index}/documents", files={"file": (path.name, handle)}
        ).raise_for_status()
    job = wait_for_job(api, accepted.json()["job_id"])
    assert job["status"] == "completed", job
    return job


def test_upload_two_documents_follow_progress_and_search(
    browser: webdriver.Chrome, serve_env: ServiceEnv, api: httpx.Client, shots: Screenshots
) -> None:
    page.open_page(browser, serve_env.base_url)
    shots.take("opened")

    browser.find_element(By.ID, "new-index").send_keys("web-upload")
    browser.find_element(By.CSS_SELECTOR, "#create-index-form button").click()
    wait_for(
        browser,
        lambda d: (
            Select(page.picker(d)).first_selected_option.get_attribute("value") == "web-upload"
        ),
        timeout=30,
        message="the new index was not selected",
    )
    assert api.get("/v1/indexes/web-upload").status_code == 200
    page.wait_for_documents_loaded(browser)

    browser.find_element(By.ID, "meta-department").send_keys("standards")
    browser.find_element(By.ID, "meta-author").send_keys("Ana Lima")
    browser.find_element(By.ID, "meta-tags").send_keys("protocol, web")
    browser.execute_script(page.RECORD_UPLOADS)
    page.choose_files(browser, [README, DOCX])
    wait_for(browser, lambda d: len(page.upload_rows(d)) == 2, timeout=10)
    shots.take("uploading")

    rows = page.wait_for_uploads(browser, [README.name, DOCX.name])
    shots.take("uploads-done")
    documents = api.get("/v1/indexes/web-upload/documents").json()["documents"]
    listed = {d["document_id"]: d for d in documents}
    assert set(listed) == {README.name, DOCX.name}
    for name, row in rows.items():
        assert row.get_attribute("data-state") == "completed", text_of(row)
        bar = row.find_element(By.TAG_NAME, "progress")
        assert float(str(bar.get_attribute("value"))) == 1.0
        status = text_of(row.find_element(By.CLASS_NAME, "upload-status"))
        assert status.startswith("done"), status
        assert not row.find_element(By.CSS_SELECTOR, ".upload-head button").is_displayed()
        chunks = listed[name]["chunks"]
        assert f"{chunks} chunk{'s' if chunks != 1 else ''}" in status
        # The bar followed the job: uploading, then queued/processing, then completed, and
        # the job's progress never went back.
        log = page.upload_log(browser, name)
        states = [entry["state"] for entry in log]
        assert states[0] == "uploading" and states[-1] == "completed", states
        assert "queued" in states, states
        job_progress = [
            e["progress"] for e in log[states.index("queued") :] if e["progress"] is not None
        ]
        assert job_progress == sorted(job_progress) and job_progress[-1] == 1.0, job_progress

    # The document list shows both, as the API lists them, with the metadata given.
    def both_shown(driver: webdriver.Chrome) -> dict[str, dict[str, str]] | None:
        read = page.document_cells(driver)
        return read if set(read) == set(listed) else None

    shown_rows = wait_for(browser, both_shown, timeout=30)
    for document_id, shown in shown_rows.items():
        stored = listed[document_id]
        assert shown["Format"] == stored["format"]
        assert shown["Chunks"] == str(stored["chunks"])
        assert shown["Pages"] == (str(stored["pages"]) if stored["pages"] is not None else "—")
        assert shown["Version"] == str(stored["version"])
        assert "department: standards" in shown["Document"]
        assert "tags: protocol, web" in shown["Document"]
        assert stored["metadata"] == {
            "department": "standards",
            "author": "Ana Lima",
            "tags": ["protocol", "web"],
        }
    index_info = text_of(browser.find_element(By.ID, "index-info"))
    assert index_info.startswith("2 documents"), index_info

    # Search: the expected passage comes first, its words highlighted, its text intact.
    query = "nested tables"
    results = page.search(browser, query, mode="hybrid", top_k=5)
    shots.take("search-hybrid")
    expected = api.post(
        "/v1/indexes/web-upload/search", json={"query": query, "top_k": 5, "mode": "hybrid"}
    ).json()["results"]
    assert len(results) == len(expected) > 0
    first = results[0]
    assert first.get_attribute("data-document-id") == DOCX.name == expected[0]["document_id"]
    passage = text_of(first.find_element(By.CLASS_NAME, "passage"))
    assert passage == expected[0]["excerpt"]["text"]  # the excerpt, not a cut-off chunk
    highlighted = {m.lower() for m in page.marks(first)}
    excerpt = expected[0]["excerpt"]
    assert highlighted == {
        expected[0]["text"][start:end].lower()
        for start, end in expected[0]["highlights"]
        if excerpt["start"] <= start and end <= excerpt["end"]
    }
    assert highlighted and highlighted <= {"nested", "table", "tables"}, highlighted
    score = text_of(first.find_element(By.CLASS_NAME, "score"))
    assert score == f"{expected[0]['score']:.4f}"
    headings = first.find_elements(By.CLASS_NAME, "headings")
    if expected[0]["headings"]:
        assert text_of(headings[0]) == " › ".join(expected[0]["headings"])

    # Keyword mode restricted to one document; then at most one passage per document.
    results = page.search(
        browser, "OCR for scanned PDFs", mode="keyword", top_k=3, document=README.name
    )
    shots.take("search-keyword-filtered")
    assert results, "no result in the README"
    assert {r.get_attribute("data-document-id") for r in results} == {README.name}
    # The query's terms are marked in the excerpt or, outside it, in the whole passage.
    marked = [{text_of(m).lower() for m in r.find_elements(By.TAG_NAME, "mark")} for r in results]
    assert any("ocr" in terms for terms in marked), marked
    results = page.search(browser, "document table", top_k=10, per_document=1)
    documents = [r.get_attribute("data-document-id") for r in results]
    assert sorted(documents) == sorted({README.name, DOCX.name}), documents

    assert console_errors(browser) == []


def test_delete_a_document(
    browser: webdriver.Chrome, serve_env: ServiceEnv, api: httpx.Client, shots: Screenshots
) -> None:
    create_index(api, "web-delete")
    ingest(api, "web-delete", README)
    ingest(api, "web-delete", DOCX)
    page.open_page(browser, serve_env.base_url)
    page.choose_index(browser, "web-delete")
    wait_for(browser, lambda d: set(page.document_rows(d)) == {README.name, DOCX.name})
    shots.take("before-delete")

    row = page.document_rows(browser)[README.name]
    button = row.find_element(By.CSS_SELECTOR, "button.danger")
    assert button.get_attribute("aria-label") == f"Delete {README.name}"
    button.click()
    alert = wait_for(browser, lambda d: d.switch_to.alert, timeout=10)
    assert README.name in alert.text
    alert.accept()
    wait_for(
        browser,
        lambda d: set(page.document_rows(d)) == {DOCX.name},
        timeout=30,
        message="the deleted document is still listed",
    )
    shots.take("after-delete")
    assert api.get(f"/v1/indexes/web-delete/documents/{README.name}").status_code == 404
    info = text_of(browser.find_element(By.ID, "index-info"))
    assert info.startswith("1 document,"), info
    results = page.search(browser, "docling document conversion", mode="keyword", top_k=10)
    assert {r.get_attribute("data-document-id") for r in results} <= {DOCX.name}
    assert console_errors(browser) == []


def test_corrupt_files_show_their_error(
    browser: webdriver.Chrome, serve_env: ServiceEnv, api: httpx.Client, shots: Screenshots
) -> None:
    create_index(api, "web-corrupt")
    page.open_page(browser, serve_env.base_url)
    page.choose_index(browser, "web-corrupt")
    page.choose_files(browser, [TRUNCATED_PDF])
    page.drop_file(browser, HEADER_ONLY_PDF.name, HEADER_ONLY_PDF.read_bytes())
    rows = page.wait_for_uploads(browser, [TRUNCATED_PDF.name, HEADER_ONLY_PDF.name])
    shots.take("corrupt-files")

    for row in rows.values():
        assert row.get_attribute("data-state") == "failed", text_of(row)
        job = api.get(f"/v1/jobs/{row.get_attribute('data-job-id')}").json()
        assert job["status"] == "failed"
        assert job["error"]["code"] == "corrupt_document"
        assert text_of(row.find_element(By.CLASS_NAME, "error-code")) == "corrupt_document"
        message = text_of(row.find_element(By.CLASS_NAME, "error-message")).strip()
        assert message == job["error"]["message"]
    assert api.get("/v1/indexes/web-corrupt/documents").json()["documents"] == []
    assert browser.find_element(By.ID, "documents-empty").is_displayed()
    assert console_errors(browser) == []


def test_server_text_is_shown_as_text(
    browser: webdriver.Chrome,
    serve_env: ServiceEnv,
    api: httpx.Client,
    shots: Screenshots,
    tmp_path: Path,
) -> None:
    markup = "<img src=x onerror=window.injected=1>"
    document = tmp_path / f"{markup}.md"
    document.write_text(f"# Injection {markup}\n\nThe zebra passage {markup} stays text.\n")
    create_index(api, "web-escape")
    page.open_page(browser, serve_env.base_url)
    page.choose_index(browser, "web-escape")
    browser.find_element(By.ID, "meta-doc-type").send_keys(markup)
    page.choose_files(browser, [document])
    rows = page.wait_for_uploads(browser, [document.name])
    assert rows[document.name].get_attribute("data-state") == "completed", text_of(
        rows[document.name]
    )
    wait_for(browser, lambda d: document.name in page.document_rows(d), timeout=30)
    results = page.search(browser, "zebra passage", mode="keyword")
    shots.take("markup-as-text")

    expected = api.post(
        "/v1/indexes/web-escape/search", json={"query": "zebra passage", "mode": "keyword"}
    ).json()["results"]
    passage = text_of(results[0].find_element(By.CLASS_NAME, "passage"))
    assert passage == expected[0]["excerpt"]["text"] and f"zebra passage {markup}" in passage
    assert text_of(results[0].find_element(By.CLASS_NAME, "headings")) == f"Injection {markup}"
    assert markup in text_of(page.document_rows(browser)[document.name])
    assert browser.find_elements(By.CSS_SELECTOR, "main img") == []
    assert browser.execute_script("return window.injected") is None


@pytest.mark.parametrize("size", [(390, 844)])
def test_narrow_screen_has_no_horizontal_scroll(
    browser: webdriver.Chrome,
    serve_env: ServiceEnv,
    api: httpx.Client,
    shots: Screenshots,
    tmp_path: Path,
    size: tuple[int, int],
) -> None:
    create_index(api, "web-narrow")
    long_name = tmp_path / ("a-rather-long-file-name-without-any-spaces-" * 3 + ".md")
    shutil.copyfile(README, long_name)
    ingest(api, "web-narrow", long_name)
    width, height = size
    browser.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": True},
    )
    try:
        page.open_page(browser, serve_env.base_url)
        page.choose_index(browser, "web-narrow")
        page.choose_files(browser, [HEADER_ONLY_PDF])
        page.wait_for_uploads(browser, [HEADER_ONLY_PDF.name])
        results = page.search(browser, "install docling with pip", top_k=3)
        assert results
        shots.take("narrow")
        scroll_width, inner_width = page.no_horizontal_scroll(browser)
        assert inner_width == width
        assert scroll_width <= inner_width, f"page is {scroll_width}px wide on a {width}px screen"
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def test_cancel_a_running_upload(
    browser: webdriver.Chrome, serve_env: ServiceEnv, api: httpx.Client, shots: Screenshots
) -> None:
    create_index(api, "web-cancel")
    page.open_page(browser, serve_env.base_url)
    page.choose_index(browser, "web-cancel")
    page.choose_files(browser, [RFC])
    cancel = wait_for(
        browser,
        lambda d: next(
            (
                row.find_element(By.CSS_SELECTOR, ".upload-head button")
                for row in page.upload_rows(d).values()
                if row.get_attribute("data-state") in ("queued", "processing")
            ),
            None,
        ),
        timeout=30,
        message="the upload never reached the queue",
    )
    assert cancel.get_attribute("aria-label") == f"Cancel {RFC.name}"
    cancel.click()
    rows = page.wait_for_uploads(browser, [RFC.name], timeout=60)
    shots.take("cancelled")
    row = rows[RFC.name]
    assert row.get_attribute("data-state") == "cancelled", text_of(row)
    assert api.get(f"/v1/jobs/{row.get_attribute('data-job-id')}").json()["status"] == "cancelled"
    assert api.get("/v1/indexes/web-cancel/documents").json()["documents"] == []

    browser.find_element(By.ID, "uploads-clear").click()
    assert page.upload_rows(browser) == {}
    assert console_errors(browser) == []


def test_embedding_progress_counts_the_chunks_embedded(
    browser: webdriver.Chrome, serve_env: ServiceEnv, api: httpx.Client, shots: Screenshots
) -> None:
    """ "embedding: X of N chunks" showed chunks_done, which stays 0 until a window is stored:
    a 77-chunk PDF read "0 of 77" for 35 s, then done. X is now chunks_embedded: every X
    shown is the chunks_embedded of a job the page was sent, and one that was not yet stored."""
    create_index(api, "web-progress")
    page.open_page(browser, serve_env.base_url)
    page.choose_index(browser, "web-progress")
    browser.execute_script(page.RECORD_UPLOADS)
    browser.execute_script(page.RECORD_JOBS)
    page.choose_files(browser, [RFC])  # ~200 chunks: several polls of embedding on this CPU
    rows = page.wait_for_uploads(browser, [RFC.name], timeout=300)
    shots.take("embedded")
    assert rows[RFC.name].get_attribute("data-state") == "completed", text_of(rows[RFC.name])
    shown = {
        int(found[1])
        for entry in page.upload_log(browser, RFC.name)
        if (found := re.fullmatch(r"embedding: (\d+) of \d+ chunks", entry["status"] or ""))
    }
    sent = [job for job in browser.execute_script("return window.jobLog") if job]
    embedding = [job for job in sent if job["stage"] == "embedding"]
    embedded = {job["chunks_embedded"] for job in embedding}
    stored = {job["chunks_done"] for job in embedding}
    assert embedded - stored, f"no poll caught the embedding between two writes: {embedding}"
    assert shown <= embedded, (shown, embedded)
    assert shown & (embedded - stored), (shown, embedded, stored)


def test_the_examples_index_opens_first(
    browser: webdriver.Chrome, serve_env: ServiceEnv, api: httpx.Client
) -> None:
    """The alphabetically first index opened, not the examples `make run` seeds."""
    for name in ("aaa-first", "examples"):
        create_index(api, name)
    page.open_page(browser, serve_env.base_url)  # no index remembered in the tab
    wait_for(
        browser,
        lambda d: Select(page.picker(d)).first_selected_option.get_attribute("value") == "examples",
        timeout=30,
        message="the examples index was not selected",
    )
    page.choose_index(browser, "aaa-first")  # a choice of the user's is kept on reload
    browser.refresh()
    wait_for(
        browser,
        lambda d: (
            Select(page.picker(d)).first_selected_option.get_attribute("value") == "aaa-first"
        ),
        timeout=30,
        message="the chosen index was not kept",
    )
    assert console_errors(browser) == []
