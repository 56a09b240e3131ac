"""OCR end to end through one real `docingest serve`: a scanned PDF and images are read by
Tesseract in the isolated child, found by keyword and hybrid search, report their OCR'd pages
and confidence, and a multi-page TIFF shows live page progress."""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest

from tests.support.http_client import JOB_TIMEOUT, ApiClient, Json
from tests.support.image_files import KNOWN_TEXT, encoded, text_image
from tests.support.paths import CORPUS_DIR

INDEX = "scans"
HUCKFINN = CORPUS_DIR / "pdf" / "scanned-huckfinn-p22-no-text.pdf"
# Only in the page image: the PDF has no text layer at all.
HUCKFINN_SENTENCE = "We scrouched down and laid still"
TIFF_PAGES = 3
FAX_LINES = [f"Line {n} of the facsimile: harbour tonnage for the quarter." for n in range(36)]


@dataclass
class Ingested:
    scan: Json
    image: Json
    tiff_trace: list[Json]


@pytest.fixture(scope="module")
def ingested(api: ApiClient) -> Ingested:
    scan = api.submit(INDEX, HUCKFINN)
    image = api.submit(INDEX, encoded(text_image(KNOWN_TEXT), "PNG"), filename="rivers.png")
    page = text_image(FAX_LINES, scale=2)  # about a second of OCR per page
    tiff = encoded(page, "TIFF", save_all=True, append_images=[page] * (TIFF_PAGES - 1))
    tiff_job = api.submit(INDEX, tiff, filename="fax.tif")
    trace: list[Json] = []
    deadline = time.monotonic() + JOB_TIMEOUT
    while not trace or trace[-1]["status"] not in ("completed", "failed", "cancelled"):
        assert time.monotonic() < deadline, trace[-1]
        trace.append(api.job(tiff_job))
        time.sleep(0.02)
    return Ingested(scan=api.wait(scan), image=api.wait(image), tiff_trace=trace)


def test_a_scanned_pdf_completes_with_its_ocr_page(ingested: Ingested, api: ApiClient) -> None:
    job = ingested.scan
    assert job["status"] == "completed", job
    assert job["result"]["format"] == "pdf"
    assert job["result"]["pages"] == 1 and job["result"]["ocr_pages"] == 1
    assert job["pages_total"] == 1 and job["pages_done"] == 1
    document = next(d for d in api.documents(INDEX) if d["document_id"] == HUCKFINN.name)
    assert document["ocr"]["pages"] == [1]
    assert 0.8 < document["ocr"]["confidence"] <= 1


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_a_sentence_only_in_the_scan_is_found(
    ingested: Ingested, api: ApiClient, mode: str
) -> None:
    assert ingested.scan["status"] == "completed"
    results = api.search(INDEX, HUCKFINN_SENTENCE, top_k=3, mode=mode)
    top = results[0]
    assert top["document_id"] == HUCKFINN.name, [r["document_id"] for r in results]
    assert HUCKFINN_SENTENCE in top["text"]
    assert top["ocr"]["pages"] == [1] and 0.8 < top["ocr"]["confidence"] <= 1
    assert top["page_start"] == top["page_end"] == 1


def test_an_image_is_a_document_of_format_image(ingested: Ingested, api: ApiClient) -> None:
    job = ingested.image
    assert job["status"] == "completed", job
    assert job["result"]["format"] == "image" and job["result"]["ocr_pages"] == 1
    results = api.search(INDEX, "engineers measure the water level", top_k=3, mode="keyword")
    assert results[0]["document_id"] == "rivers.png"
    assert results[0]["format"] == "image"


def test_a_tiff_shows_live_page_progress(ingested: Ingested) -> None:
    trace = ingested.tiff_trace
    final = trace[-1]
    assert final["status"] == "completed", final
    assert final["result"]["pages"] == final["result"]["ocr_pages"] == TIFF_PAGES
    assert final["pages_total"] == final["pages_done"] == TIFF_PAGES
    done = [state["pages_done"] for state in trace if state["stage"] == "extracting"]
    assert done == sorted(done)
    assert set(done) & set(range(1, TIFF_PAGES)), f"no page seen between first and last: {done}"
