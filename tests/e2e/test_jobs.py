"""End to end through one real `docingest serve`: cancel, failing documents, retry, job
listings and the error shape of bad requests."""

from __future__ import annotations

import random

import pytest

from docingest.pipeline.detect import detect
from docingest.pipeline.errors import UnsupportedFormat
from tests.support.http_client import ApiClient, assert_error, poll_until
from tests.support.paths import CORPUS_DIR, EXAMPLES_DIR

RFC = EXAMPLES_DIR / "rfc6455-websocket.txt"
DOCX = EXAMPLES_DIR / "tika-sample-word-document.docx"
ENCRYPTED_PDF = CORPUS_DIR / "pdf" / "encrypted-libreoffice-userpw.pdf"
CORRUPT_PDF = CORPUS_DIR / "pdf" / "corrupt-header-only.pdf"
RANDOM_BYTES = random.Random(5).randbytes(8192)
"""Not a document of any kind, whatever its name says (seeded, so every run sends the same)."""


def note(topic: str) -> bytes:
    return f"# {topic.title()}\n\nA short note about {topic}, kept for the records.\n".encode()


def test_cancel_processing_job_leaves_the_index_as_it_was(api: ApiClient) -> None:
    index, doc = "cancelling", "websocket-spec"
    response = api.http.put(
        f"/v1/indexes/{index}", json={"chunking": {"chunk_size": 200, "chunk_overlap": 20}}
    )
    assert response.status_code == 201, response.text
    assert response.json()["chunking"]["chunk_size"] == 200
    first = api.ingest(index, note("the first draft"), filename="spec.md", document_id=doc)
    before = api.documents(index)
    assert [(d["document_id"], d["version"]) for d in before] == [(doc, 1)]

    job_id = api.submit(index, RFC, document_id=doc)  # ~1,000 chunks of 200 characters
    poll_until(job_id, api, lambda job: job["stage"] == "embedding")
    response = api.http.delete(f"/v1/jobs/{job_id}")
    assert response.status_code == 202, response.text
    assert response.json()["job_id"] == job_id
    assert response.json()["status"] in ("cancelling", "cancelled")  # processing → cancelling

    job = api.wait(job_id)
    assert job["status"] == "cancelled", job
    assert job["result"] is None and job["finished_at"]
    assert job["chunks_total"] > 500 and job["chunks_embedded"] < job["chunks_total"]
    assert api.documents(index) == before  # the first draft is intact, nothing of the RFC
    assert api.search(index, "WebSocket closing handshake", mode="keyword") == []
    assert api.http.get(f"/v1/indexes/{index}").json()["chunks"] == first["result"]["chunks"]
    assert_error(api.http.delete(f"/v1/jobs/{job_id}"), 409, "job_state_conflict")

    # The same document can be uploaded again at once (no lock or fence left behind).
    again = api.ingest(index, RFC.read_bytes()[:6000], filename=RFC.name, document_id=doc)
    assert again["result"]["version"] > 1
    assert [d["version"] for d in api.documents(index)] == [again["result"]["version"]]
    hit = api.search(index, "The WebSocket Protocol", mode="keyword")[0]
    assert hit["document_id"] == doc

    assert_error(api.http.delete(f"/v1/jobs/{first['job_id']}"), 409, "job_state_conflict")


def test_bad_files_fail_with_their_code_and_the_next_job_succeeds(api: ApiClient) -> None:
    index = "bad-files"
    empty = api.upload(index, b"", filename="empty.txt")
    assert_error(empty, 400, "empty_document")
    with pytest.raises(UnsupportedFormat):  # the detector sees binary data, not a PDF
        detect(RANDOM_BYTES, filename="random.pdf")
    expected = {
        api.submit(index, RANDOM_BYTES, filename="random.pdf"): "unsupported_format",
        api.submit(index, ENCRYPTED_PDF): "encrypted_document",
        api.submit(index, CORRUPT_PDF): "corrupt_document",
    }
    good = api.submit(index, DOCX)

    for job_id, code in expected.items():
        job = api.wait(job_id)
        assert job["status"] == "failed", job
        assert job["error"]["code"] == code, job
        assert job["error"]["message"].strip()
        assert job["result"] is None
        assert job["attempts"] == 1  # a permanent error is not retried
    assert api.wait(good)["status"] == "completed"
    assert [d["document_id"] for d in api.documents(index)] == [DOCX.name]


def test_retry_requeues_a_failed_job_and_refuses_a_completed_one(api: ApiClient) -> None:
    index = "retrying"
    failed = api.wait(api.submit(index, RANDOM_BYTES, filename="random.pdf"))
    assert failed["status"] == "failed" and failed["error"]["code"] == "unsupported_format"

    response = api.http.post(f"/v1/jobs/{failed['job_id']}/retry")
    assert response.status_code == 202, response.text
    queued = response.json()
    assert queued["job_id"] == failed["job_id"]
    assert queued["status"] == "queued"
    assert queued["error"] is None and queued["finished_at"] is None
    again = api.wait(failed["job_id"])
    assert again["status"] == "failed"
    assert again["error"]["code"] == "unsupported_format"  # the same file fails the same way

    completed = api.ingest(index, note("retries"), filename="retry.md")
    response = api.http.post(f"/v1/jobs/{completed['job_id']}/retry")
    assert_error(response, 409, "job_state_conflict")
    assert api.job(completed["job_id"])["status"] == "completed"
    assert_error(api.http.post("/v1/jobs/no-such-job/retry"), 404, "job_not_found")


def test_job_listing_is_newest_first_and_filtered(api: ApiClient) -> None:
    index = "listing"
    completed = [api.submit(index, note(topic), filename=f"{topic}.md") for topic in "abc"]
    failed = api.submit(index, RANDOM_BYTES, filename="random.pdf")
    for job_id in [*completed, failed]:
        api.wait(job_id)

    response = api.http.get("/v1/jobs", params={"index": index, "status": "completed", "limit": 2})
    assert response.status_code == 200, response.text
    jobs = response.json()["jobs"]
    assert [job["job_id"] for job in jobs] == completed[:0:-1]  # the two newest, newest first
    assert all(job["status"] == "completed" and job["index"] == index for job in jobs)
    assert jobs[0]["created_at"] >= jobs[1]["created_at"]

    every = api.http.get("/v1/jobs", params={"index": index}).json()["jobs"]
    assert [job["job_id"] for job in every] == [failed, *reversed(completed)]
    only_failed = api.http.get("/v1/jobs", params={"index": index, "status": "failed"}).json()
    assert [job["job_id"] for job in only_failed["jobs"]] == [failed]
    response = api.http.get("/v1/jobs", params={"status": "finished"})
    assert_error(response, 422, "validation_error")


def test_bad_requests_answer_in_the_error_shape(api: ApiClient) -> None:
    assert_error(api.http.get("/v1/jobs/no-such-job"), 404, "job_not_found")
    assert_error(api.http.delete("/v1/jobs/no-such-job"), 404, "job_not_found")
    for name in ("Upper", "dots.not.allowed", "x" * 65):
        assert_error(api.http.put(f"/v1/indexes/{name}"), 422, "invalid_index_name")
        response = api.upload(name, note("names"), filename="names.md")
        assert_error(response, 422, "invalid_index_name")
    for metadata in ('["legal"]', '"legal"', "{not json"):
        response = api.upload("errors", note("metadata"), filename="m.md", metadata=metadata)
        assert_error(response, 400, "invalid_metadata")
    api.ingest("errors", note("search modes"), filename="modes.md")
    response = api.http.post("/v1/indexes/errors/search", json={"query": "x", "mode": "fuzzy"})
    assert_error(response, 422, "validation_error")
    response = api.http.post("/v1/indexes/errors/search", json={"query": "x", "top_k": 0})
    assert_error(response, 422, "validation_error")
