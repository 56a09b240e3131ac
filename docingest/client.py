"""A small typed HTTP client for the docingest API (the contract in API.md).

Every failure becomes a `ClientError` carrying the contract's error code and message (and the
HTTP status when the server answered), so callers print one line instead of a traceback.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, NotRequired, TypedDict, cast
from urllib.parse import quote

import httpx

URL_ENV = "DOCINGEST_URL"
API_KEY_ENV = "DOCINGEST_API_KEY"
DEFAULT_TIMEOUT = httpx.Timeout(120.0, connect=5.0)
"""Uploads stream the file; a slow write or a long search must not be cut at httpx's 5 s."""

SearchMode = Literal["hybrid", "vector", "keyword"]


class ErrorInfo(TypedDict):
    code: str
    message: str


class Accepted(TypedDict):
    """The answer to an upload: the job that will ingest it."""

    job_id: str
    index: str
    document_id: str
    status: str
    status_url: str


class Job(TypedDict):
    job_id: str
    index: str
    document_id: str
    filename: str
    status: str
    stage: str | None
    progress: float
    pages_total: int | None
    pages_done: int
    chunks_total: int | None
    chunks_done: int
    """Chunks embedded and stored."""
    chunks_embedded: int
    """Chunks with a vector (embedded or reused), stored or not yet."""
    created_at: str
    started_at: str | None
    finished_at: str | None
    heartbeat_at: str | None
    attempts: int
    result: dict[str, Any] | None
    error: ErrorInfo | None


class Result(TypedDict):
    document_id: str
    chunk_index: int
    text: str
    score: float
    scores: dict[str, float | None]
    filename: str | None
    format: str | None
    page_start: int | None
    page_end: int | None
    headings: list[str]
    metadata: dict[str, Any]


class SearchResponse(TypedDict):
    results: list[Result]
    took_ms: float


class IndexInfo(TypedDict):
    name: str
    embedding: dict[str, Any]
    chunking: dict[str, Any]
    documents: int
    chunks: int
    created_at: str
    description: NotRequired[str | None]


class ClientError(Exception):
    """The service refused a request or could not be reached.

    `status` is the HTTP status, or None when no answer came (then `code` says why).
    """

    def __init__(self, code: str, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status

    def __str__(self) -> str:
        where = f"HTTP {self.status}, " if self.status is not None else ""
        return f"{self.message} ({where}{self.code})"


DEFAULT_BASE_URL = "http://127.0.0.1:8000"
"""Where the client commands look when neither --url, DOCINGEST_URL nor DOCINGEST_PORT says."""


def default_base_url(*, host: str = "127.0.0.1", port: int = 8000) -> str:
    """`DOCINGEST_URL`, else the address `docingest serve` listens on by default."""
    url = os.environ.get(URL_ENV, "").strip()
    if url:
        return url.rstrip("/")
    if host in ("0.0.0.0", "::", ""):  # listening everywhere: talk to this machine
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


class DocingestClient:
    """Talks to one docingest service; thread-safe (one pooled httpx client)."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout)

    @classmethod
    def from_options(
        cls, url: str | None = None, api_key: str | None = None, *, host: str, port: int
    ) -> DocingestClient:
        """Build from `--url`/`--api-key`, falling back to `DOCINGEST_URL`/`DOCINGEST_API_KEY`."""
        key = api_key or os.environ.get(API_KEY_ENV) or None
        return cls(url or default_base_url(host=host, port=port), api_key=key)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> DocingestClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def upload(
        self,
        path: Path,
        *,
        index: str,
        document_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        force: bool = False,
    ) -> Accepted:
        """Upload one file into `index`; the answer names the job that will ingest it."""
        data: dict[str, str] = {"force": "true" if force else "false"}
        if document_id is not None:
            data["document_id"] = document_id
        if metadata:
            data["metadata"] = json.dumps(metadata, ensure_ascii=False)
        try:
            with path.open("rb") as handle:
                files = {"file": (path.name, handle, "application/octet-stream")}
                answer = self._request(
                    "POST", f"/v1/indexes/{_seg(index)}/documents", data=data, files=files
                )
        except OSError as exc:
            raise ClientError(
                "unreadable_file", f"Cannot read {path}: {exc.strerror or exc}."
            ) from exc
        return cast(Accepted, answer)

    def job(self, job_id: str) -> Job:
        return cast(Job, self._request("GET", f"/v1/jobs/{_seg(job_id)}"))

    def search(
        self,
        index: str,
        query: str,
        *,
        mode: SearchMode = "hybrid",
        top_k: int = 5,
        filter: dict[str, Any] | None = None,
        max_chunks_per_document: int | None = None,
        rerank: bool | None = None,
    ) -> SearchResponse:
        """Search `index`; `rerank` is sent only when given (None: the index's default)."""
        body: dict[str, Any] = {"query": query, "mode": mode, "top_k": top_k}
        if filter:
            body["filter"] = filter
        if max_chunks_per_document is not None:
            body["max_chunks_per_document"] = max_chunks_per_document
        if rerank is not None:
            body["rerank"] = rerank
        return cast(
            SearchResponse, self._request("POST", f"/v1/indexes/{_seg(index)}/search", json=body)
        )

    def document_ids(self, index: str) -> set[str]:
        """The ids of every document stored in `index`, following the listing's cursor."""
        ids: set[str] = set()
        params: dict[str, Any] = {}
        while True:
            page = self._request("GET", f"/v1/indexes/{_seg(index)}/documents", params=params)
            ids.update(str(document["document_id"]) for document in page["documents"])
            cursor = page.get("next_cursor")
            if not cursor:
                return ids
            params = {"cursor": cursor, "limit": 1000}

    def indexes(self) -> list[IndexInfo]:
        answer = self._request("GET", "/v1/indexes")
        return cast(list[IndexInfo], answer["indexes"])

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.ConnectError as exc:
            raise ClientError(
                "service_unreachable",
                f"no docingest service answers at {self.base_url}; start one with "
                "`docingest serve` (or set --url / DOCINGEST_URL)",
            ) from exc
        except httpx.TimeoutException as exc:
            raise ClientError(
                "service_timeout",
                f"the docingest service at {self.base_url} did not answer in time",
            ) from exc
        except httpx.TransportError as exc:
            raise ClientError(
                "transport_error", f"talking to {self.base_url} failed: {exc}"
            ) from exc
        if response.is_success:
            return response.json() if response.content else None
        raise _error_from(response)


def _seg(value: str) -> str:
    """Quote a user-given name as one path segment."""
    return quote(value, safe="")


def _error_from(response: httpx.Response) -> ClientError:
    """Read the contract's `{"error": {"code", "message"}}`, or describe what came instead."""
    try:
        error = response.json()["error"]
        code, message = str(error["code"]), str(error["message"])
    except (ValueError, KeyError, TypeError):
        code = f"http_{response.status_code}"
        message = f"{response.request.method} {response.request.url.path} answered " + (
            f"{response.status_code} {response.reason_phrase}"
        )
    return ClientError(code, message, status=response.status_code)
