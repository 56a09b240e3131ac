"""Retries and errors against a real HTTP server (uvicorn) that answers 429/503 on purpose:
Retry-After is honoured and bounded, a replayable upload is sent whole again, a stream that
cannot be rewound is not retried, and each error lands in the exception tree with its code."""

from __future__ import annotations

import asyncio
import hashlib
import io
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

import docingest
from docingest import RetryPolicy
from tests.support.uvicorn_server import serve_app


@dataclass
class Flaky:
    """Answers `failures` errors (with `retry_after`) before each success, recording bodies."""

    failures: int = 2
    status: int = 503
    retry_after: str | None = "0"
    seen: int = 0
    bodies: list[bytes] = field(default_factory=list)

    def answer(self, success: Response) -> Response:
        self.seen += 1
        if self.seen <= self.failures:
            headers = {"Retry-After": self.retry_after} if self.retry_after is not None else {}
            code = "rate_limited" if self.status == 429 else "dependency_unavailable"
            body = {"error": {"code": code, "message": "Try again shortly."}}
            return JSONResponse(body, status_code=self.status, headers=headers)
        return success


@pytest.fixture
def flaky() -> Flaky:
    return Flaky()


@pytest.fixture
def server(flaky: Flaky) -> Iterator[str]:
    async def health(request: Request) -> Response:
        return flaky.answer(JSONResponse({"status": "ok"}))

    async def upload(request: Request) -> Response:
        form = await request.form()
        data = await form["file"].read()  # type: ignore[union-attr]
        await form.close()
        flaky.bodies.append(data)
        accepted = {
            "job_id": "j1", "index": "idx", "document_id": "a.bin", "status": "queued",
            "status_url": "/v1/jobs/j1",
        }  # fmt: skip
        return flaky.answer(JSONResponse(accepted, status_code=202))

    async def missing(request: Request) -> Response:
        body = {"error": {"code": request.path_params["code"], "message": "Not here."}}
        return JSONResponse(body, status_code=int(request.path_params["status"]))

    app = Starlette(
        routes=[
            Route("/healthz", health),
            Route("/v1/indexes/{index}/documents", upload, methods=["POST"]),
            Route("/v1/jobs/{status}/{code}", missing),
        ]
    )
    with serve_app(app) as base_url:
        yield base_url


def test_503_then_success_is_retried_as_retry_after_says(server: str, flaky: Flaky) -> None:
    with docingest.Client(server) as client:
        assert client.health() == {"status": "ok"}
    assert flaky.seen == 3


def test_retries_are_bounded(server: str, flaky: Flaky) -> None:
    flaky.status, flaky.failures = 429, 10
    with docingest.Client(server, retry=RetryPolicy(max_retries=2)) as client:
        with pytest.raises(docingest.RateLimited) as raised:
            client.health()
    assert flaky.seen == 3  # the first try and two retries
    error = raised.value
    assert (error.status, error.code, error.retry_after) == (429, "rate_limited", 0.0)
    assert isinstance(error, docingest.DocingestError)


def test_a_wait_longer_than_the_bound_is_not_taken(server: str, flaky: Flaky) -> None:
    flaky.retry_after = "3600"
    with docingest.Client(server, retry=RetryPolicy(max_wait=30)) as client:
        with pytest.raises(docingest.Unavailable) as raised:
            client.health()
    assert flaky.seen == 1 and raised.value.retry_after == 3600


def test_an_upload_from_a_path_or_a_seekable_stream_is_sent_whole_again(
    server: str, flaky: Flaky, tmp_path: Path
) -> None:
    data = bytes(range(256)) * 4096  # 1 MiB
    stream = io.BytesIO(data)
    with docingest.Client(server) as client:
        accepted = client.upload("idx", stream, filename="a.bin")
    assert accepted.job_id == "j1"
    path = tmp_path / "a.bin"
    path.write_bytes(data)
    with docingest.Client(server) as client:
        client.upload("idx", path)
    digests = [hashlib.sha256(body).hexdigest() for body in flaky.bodies]
    assert digests == [hashlib.sha256(data).hexdigest()] * 4  # 2 failed + 1 ok, then 1 ok


class OneWayStream(io.RawIOBase):
    """A pipe-like stream: no seek, records the largest read asked of it."""

    def __init__(self, size: int) -> None:
        self.left = size
        self.largest_read = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        self.largest_read = max(self.largest_read, len(buffer))
        count = min(len(buffer), self.left)
        buffer[:count] = b"x" * count
        self.left -= count
        return count


def test_a_stream_that_cannot_rewind_is_sent_once_in_chunks(server: str, flaky: Flaky) -> None:
    stream = OneWayStream(8 << 20)
    with docingest.Client(server) as client:
        with pytest.raises(docingest.Unavailable):
            client.upload("idx", io.BufferedReader(stream), filename="pipe.bin")
    assert flaky.seen == 1  # not retried: the bytes are gone
    assert len(flaky.bodies[0]) == 8 << 20
    assert stream.largest_read <= 1 << 20  # streamed, never read whole


@pytest.mark.parametrize(
    ("status", "code", "kind"),
    [
        (404, "job_not_found", docingest.JobNotFound),
        (404, "index_not_found", docingest.IndexNotFound),
        (404, "not_found", docingest.NotFound),
        (422, "invalid_index_name", docingest.InvalidRequest),
        (400, "invalid_filter", docingest.InvalidRequest),
        (401, "unauthorized", docingest.Unauthorized),
        (403, "forbidden", docingest.Forbidden),
        (409, "index_conflict", docingest.Conflict),
        (413, "upload_too_large", docingest.PayloadTooLarge),
        (415, "unsupported_format", docingest.UnsupportedFormat),
        (500, "internal_error", docingest.ServerError),
        (418, "a_newer_code", docingest.InvalidRequest),
    ],
)
def test_errors_map_to_the_tree_by_code_then_status(
    server: str, status: int, code: str, kind: type[docingest.DocingestError]
) -> None:
    with docingest.Client(server) as client:
        with pytest.raises(kind) as raised:
            client.get_job(f"{status}/{code}")
    assert (raised.value.status, raised.value.code) == (status, code)
    assert str(raised.value) == f"Not here. (HTTP {status}, {code})"


def test_no_service_is_a_connection_problem() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with docingest.Client(f"http://127.0.0.1:{port}") as client:
        with pytest.raises(docingest.ConnectionProblem) as raised:
            client.list_indexes()
    assert raised.value.code == "service_unreachable" and raised.value.status is None


def test_the_async_client_retries_alike(server: str, flaky: Flaky) -> None:
    async def health() -> object:
        async with docingest.AsyncClient(server) as client:
            return await client.health()

    assert asyncio.run(health()) == {"status": "ok"}
    assert flaky.seen == 3
