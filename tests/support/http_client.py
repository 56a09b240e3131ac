"""A small HTTP client for the end-to-end tests: upload, poll, search, and check error bodies."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from docingest.pipeline.keys import TERMINAL_STATUSES
from tests.support.docingest_service import wait_for_job
from tests.support.waiting import wait_until

JOB_TIMEOUT = 180.0
"""Seconds one job may take; generous, as the test machine is small and shared."""

Json = dict[str, Any]


class ApiClient:
    """Talks to one running docingest API over real HTTP."""

    def __init__(self, base_url: str) -> None:
        self.http = httpx.Client(base_url=base_url, timeout=60.0)

    def close(self) -> None:
        self.http.close()

    def upload(
        self,
        index: str,
        content: Path | bytes,
        *,
        filename: str | None = None,
        document_id: str | None = None,
        metadata: Any = None,
        force: bool | None = None,
    ) -> httpx.Response:
        """POST a document as multipart/form-data; return the raw response."""
        if isinstance(content, Path):
            filename = filename or content.name
            content = content.read_bytes()
        assert filename, "bytes need a filename"
        data: dict[str, str] = {}
        if document_id is not None:
            data["document_id"] = document_id
        if metadata is not None:
            data["metadata"] = metadata if isinstance(metadata, str) else json.dumps(metadata)
        if force is not None:
            data["force"] = "true" if force else "false"
        return self.http.post(
            f"/v1/indexes/{index}/documents", files={"file": (filename, content)}, data=data
        )

    def submit(self, index: str, content: Path | bytes, **fields: Any) -> str:
        """Upload and return the job id, checking the 202 answer against the contract."""
        response = self.upload(index, content, **fields)
        assert response.status_code == 202, response.text
        body = response.json()
        assert body["status"] == "queued"
        assert body["index"] == index
        assert body["status_url"] == f"/v1/jobs/{body['job_id']}"
        return str(body["job_id"])

    def job(self, job_id: str) -> Json:
        response = self.http.get(f"/v1/jobs/{job_id}")
        assert response.status_code == 200, response.text
        return dict(response.json())

    def wait(self, job_id: str, *, timeout: float = JOB_TIMEOUT) -> Json:
        """Poll until the job is completed, failed or cancelled; return its last state."""
        return dict(wait_for_job(self.http, job_id, timeout=timeout))

    def ingest(self, index: str, content: Path | bytes, **fields: Any) -> Json:
        """Upload, wait, and return the job, which must have completed."""
        job = self.wait(self.submit(index, content, **fields))
        assert job["status"] == "completed", job
        return job

    def search(self, index: str, query: str, **body: Any) -> list[Json]:
        response = self.http.post(f"/v1/indexes/{index}/search", json={"query": query, **body})
        assert response.status_code == 200, response.text
        results: list[Json] = response.json()["results"]
        return results

    def documents(self, index: str) -> list[Json]:
        response = self.http.get(f"/v1/indexes/{index}/documents")
        assert response.status_code == 200, response.text
        documents: list[Json] = response.json()["documents"]
        return documents


def assert_error(response: httpx.Response, status: int, code: str) -> str:
    """Check the contract's error shape, status and code; return the message."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message"}, body
    assert body["error"]["code"] == code, body
    message = body["error"]["message"]
    assert isinstance(message, str) and message.strip(), body
    assert "Traceback" not in message
    return message


def poll_until(
    job_id: str, client: ApiClient, done: Callable[[Json], bool], *, timeout: float = 120.0
) -> Json:
    """Poll the job quickly until `done(job)` is true; fail if it finishes first."""

    def reached() -> Json | None:
        job = client.job(job_id)
        if done(job):
            return job
        assert job["status"] not in TERMINAL_STATUSES, job
        return None

    return wait_until(reached, timeout=timeout, what=f"job {job_id} reaching the state")
