"""Streaming multipart uploads through real uvicorn: staging, limits, bad bodies, disconnects."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from docingest.api.upload import display_filename, receive_upload
from docingest.pipeline.errors import IngestError, UploadTooLarge
from tests.support.paths import EXAMPLES_DIR
from tests.support.uvicorn_server import serve_app

BOUNDARY = "docingest-test-7MA4YWxkTrZu0gW"
MULTIPART = {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}
DEFAULT_MAX_FILE_BYTES = 4 * 1024 * 1024
LIMITS = ("max_file_bytes", "max_field_bytes", "max_fields", "max_header_bytes")
MiB = 1024 * 1024


@dataclass
class UploadServer:
    """The test app under uvicorn: `POST /upload?name=&<limits>` stages `staging/name`."""

    base_url: str
    staging: Path
    outcomes: dict[str, dict[str, Any]]

    def path(self, name: str, **limits: int) -> str:
        return "/upload?" + urlencode({"name": name, **limits})

    def wait_outcome(self, name: str, timeout: float = 10.0) -> dict[str, Any]:
        """Wait until the app has finished with upload `name` (for clients that hang up)."""
        deadline = time.monotonic() + timeout
        while name not in self.outcomes:
            assert time.monotonic() < deadline, f"the app never finished upload {name}"
            time.sleep(0.01)
        return self.outcomes[name]


def _make_app(staging: Path, outcomes: dict[str, dict[str, Any]]) -> Starlette:
    async def upload(request: Request) -> JSONResponse:
        name = request.query_params["name"]
        limits: dict[str, Any] = {
            key: int(request.query_params[key]) for key in LIMITS if key in request.query_params
        }
        limits.setdefault("max_file_bytes", DEFAULT_MAX_FILE_BYTES)
        try:
            received = await receive_upload(request, destination=staging / name, **limits)
        except IngestError as exc:
            outcomes[name] = {"error": exc.to_dict()}
            status = 413 if isinstance(exc, UploadTooLarge) else 400
            return JSONResponse(outcomes[name], status_code=status)
        outcomes[name] = {
            "path": str(received.path),
            "filename": received.filename,
            "content_type": received.content_type,
            "size": received.size,
            "sha256": received.sha256,
            "fields": received.fields,
        }
        return JSONResponse(outcomes[name])

    return Starlette(routes=[Route("/upload", upload, methods=["POST"])])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UploadServer]:
    staging = tmp_path_factory.mktemp("staging") / "uploads"  # created by receive_upload
    outcomes: dict[str, dict[str, Any]] = {}
    with serve_app(_make_app(staging, outcomes)) as base_url:
        yield UploadServer(base_url, staging, outcomes)


@pytest.fixture
def client(server: UploadServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        yield client


def _upload(
    client: httpx.Client,
    server: UploadServer,
    content: bytes | Iterable[bytes],
    *,
    headers: dict[str, str] = MULTIPART,
    **limits: int,
) -> tuple[str, httpx.Response]:
    """POST `content` to the test app under a fresh staging name; return the name and response."""
    name = uuid.uuid4().hex
    return name, client.post(server.path(name, **limits), content=content, headers=headers)


def _part_head(name: str, *, filename: str | None = None, content_type: str | None = None) -> bytes:
    disposition = f'form-data; name="{name}"'
    if filename is not None:
        disposition += f'; filename="{filename}"'
    lines = [f"--{BOUNDARY}", f"Content-Disposition: {disposition}"]
    if content_type is not None:
        lines.append(f"Content-Type: {content_type}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _body(
    fields: dict[str, str],
    file_chunks: Iterable[bytes] | None,
    *,
    filename: str = "document.bin",
    content_type: str | None = "application/octet-stream",
) -> Iterator[bytes]:
    """Yield a multipart body: the text fields, then (unless None) a file part from chunks."""
    for name, value in fields.items():
        yield _part_head(name) + value.encode() + b"\r\n"
    if file_chunks is not None:
        yield _part_head("file", filename=filename, content_type=content_type)
        yield from file_chunks
        yield b"\r\n"
    yield f"--{BOUNDARY}--\r\n".encode()


def _error_code(response: httpx.Response) -> str:
    code: str = response.json()["error"]["code"]
    return code


def _leftovers(server: UploadServer, name: str) -> list[Path]:
    """Files of upload `name` still in the staging directory."""
    if not server.staging.exists():
        return []
    return [path for path in server.staging.iterdir() if path.name.startswith(name)]


def test_real_pdf_round_trips_byte_identical(client: httpx.Client, server: UploadServer) -> None:
    pdf = EXAMPLES_DIR / "federal-register-2020-17221.pdf"
    name = uuid.uuid4().hex
    with pdf.open("rb") as handle:  # httpx streams the file object in chunks
        response = client.post(
            server.path(name),
            files={"file": (pdf.name, handle, "application/pdf")},
        )

    assert response.status_code == 200, response.text
    result = response.json()
    expected = pdf.read_bytes()
    staged = server.staging / name
    assert result["path"] == str(staged)
    assert staged.read_bytes() == expected
    assert result["size"] == len(expected)
    assert result["sha256"] == hashlib.sha256(expected).hexdigest()
    assert result["filename"] == pdf.name
    assert result["content_type"] == "application/pdf"
    assert result["fields"] == {}


def test_text_fields_arrive_with_the_file(client: httpx.Client, server: UploadServer) -> None:
    metadata = json.dumps({"department": "légal", "tags": ["a", "b"]}, ensure_ascii=False)
    document = (EXAMPLES_DIR / "rfc6455-websocket.txt").read_bytes()
    name = uuid.uuid4().hex
    response = client.post(
        server.path(name),
        data={"document_id": "rfc-6455", "metadata": metadata, "force": "true"},
        files={"file": ("rfc6455.txt", document, "text/plain; charset=utf-8")},
    )

    assert response.status_code == 200, response.text
    result = response.json()
    assert result["fields"] == {"document_id": "rfc-6455", "metadata": metadata, "force": "true"}
    assert result["content_type"] == "text/plain; charset=utf-8"
    assert (server.staging / name).read_bytes() == document


def test_body_split_into_tiny_chunks_still_round_trips(
    client: httpx.Client, server: UploadServer
) -> None:
    # 7-byte network chunks split every boundary and header across parser writes.
    document = (EXAMPLES_DIR / "docling-README.md").read_bytes()
    body = b"".join(_body({"document_id": "docling"}, [document], filename="README.md"))

    name, response = _upload(client, server, (body[i : i + 7] for i in range(0, len(body), 7)))

    assert response.status_code == 200, response.text
    assert response.json()["fields"] == {"document_id": "docling"}
    assert response.json()["filename"] == "README.md"
    assert (server.staging / name).read_bytes() == document


def test_empty_file_is_staged_not_refused(client: httpx.Client, server: UploadServer) -> None:
    name, response = _upload(client, server, b"".join(_body({}, [])))

    assert response.status_code == 200, response.text
    assert response.json()["size"] == 0
    assert response.json()["sha256"] == hashlib.sha256(b"").hexdigest()
    assert (server.staging / name).read_bytes() == b""


def test_client_filename_is_sanitised_and_never_used_as_the_path(
    client: httpx.Client, server: UploadServer
) -> None:
    body = b"".join(_body({}, [b"root:x:0:0"], filename="../../etc/passwd"))

    name, response = _upload(client, server, body)

    assert response.status_code == 200, response.text
    assert response.json()["filename"] == "passwd"
    assert response.json()["path"] == str(server.staging / name)
    assert (server.staging / name).read_bytes() == b"root:x:0:0"
    assert not (server.staging / "passwd").exists()
    assert not (server.staging.parent.parent / "etc").exists()


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("report.pdf", "report.pdf"),
        ("../../etc/passwd", "passwd"),
        ("C:\\Users\\ann\\notes.docx", "notes.docx"),
        ("a\x00b\x1fc\x7f.txt", "abc.txt"),
        ("evil\u202egpj.exe", "evilgpj.exe"),  # a right-to-left override would spoof the name
        ("  spaced name.md  ", "spaced name.md"),
        ("dir/", "upload"),
        ("..", "upload"),
        ("", "upload"),
        (None, "upload"),
        ("Ünïcødé 報告.pdf", "Ünïcødé 報告.pdf"),
        ("the %22best%22 plan.md", 'the "best" plan.md'),  # how browsers send a quote
    ],
)
def test_display_filename(raw: str | None, shown: str) -> None:
    assert display_filename(raw) == shown


def test_display_filename_caps_length_and_keeps_the_extension() -> None:
    shown = display_filename("x" * 300 + ".pdf")
    assert len(shown) == 255
    assert shown.endswith("x.pdf")
    assert len(display_filename("y" * 300)) == 255


def test_missing_file_part_is_invalid(client: httpx.Client, server: UploadServer) -> None:
    name, response = _upload(client, server, b"".join(_body({"document_id": "x"}, None)))

    assert response.status_code == 400
    assert _error_code(response) == "invalid_upload"
    assert "'file'" in response.json()["error"]["message"]
    assert _leftovers(server, name) == []


@pytest.mark.parametrize(
    "content_type",
    [None, "application/json", "text/plain", "multipart/form-data", "multipart/mixed; boundary=x"],
)
def test_body_that_is_not_multipart_form_data_is_invalid(
    client: httpx.Client, server: UploadServer, content_type: str | None
) -> None:
    headers = {} if content_type is None else {"Content-Type": content_type}
    name, response = _upload(client, server, b'{"file": "nope"}', headers=headers)

    assert response.status_code == 400
    assert _error_code(response) == "invalid_upload"
    assert _leftovers(server, name) == []


@pytest.mark.parametrize(
    "body",
    [
        # cut off before the closing boundary
        _part_head("file", filename="a.txt") + b"hello",
        # part data without the blank line that ends the headers
        f"--{BOUNDARY}\r\nContent-Disposition form-data\r\n".encode(),
        # a part without a name
        _part_head("file").replace(b' name="file"', b"") + b"x\r\n" + f"--{BOUNDARY}--".encode(),
        # garbage where the first boundary should be
        b"this is not a multipart body at all" * 10,
    ],
    ids=["truncated", "bad-header", "no-name", "garbage"],
)
def test_malformed_body_is_invalid_and_leaves_no_file(
    client: httpx.Client, server: UploadServer, body: bytes
) -> None:
    name, response = _upload(client, server, body)

    assert response.status_code == 400, response.text
    assert _error_code(response) == "invalid_upload"
    assert _leftovers(server, name) == []


def test_two_file_parts_are_invalid(client: httpx.Client, server: UploadServer) -> None:
    first = b"".join(_body({}, [b"one"]))[: -len(f"--{BOUNDARY}--\r\n")]
    body = first + b"".join(_body({}, [b"two"]))

    name, response = _upload(client, server, body)

    assert response.status_code == 400
    assert _error_code(response) == "invalid_upload"
    assert _leftovers(server, name) == []


def test_oversize_part_headers_are_invalid(client: httpx.Client, server: UploadServer) -> None:
    # Several header lines, each within the per-line limit, together over the per-part one.
    head = _part_head("file", filename="a.txt").replace(
        b"\r\n\r\n",
        b"".join(f"\r\nX-Pad-{i}: {'p' * 500}".encode() for i in range(5)) + b"\r\n\r\n",
    )
    body = head + b"data\r\n" + f"--{BOUNDARY}--\r\n".encode()

    name, response = _upload(client, server, body, max_header_bytes=2048)

    assert response.status_code == 400
    assert _error_code(response) == "invalid_upload"
    assert "headers" in response.json()["error"]["message"]
    assert _leftovers(server, name) == []


@pytest.mark.parametrize(("size", "accepted"), [(1024, True), (1025, False)])
def test_field_larger_than_its_limit_is_invalid(
    client: httpx.Client, server: UploadServer, size: int, accepted: bool
) -> None:
    body = b"".join(_body({"metadata": "m" * size}, [b"doc"]))

    name, response = _upload(client, server, body, max_field_bytes=1024)

    if accepted:
        assert response.status_code == 200, response.text
        assert response.json()["fields"] == {"metadata": "m" * size}
    else:
        assert response.status_code == 400
        assert _error_code(response) == "invalid_upload"
        assert "metadata" in response.json()["error"]["message"]
        assert _leftovers(server, name) == []


@pytest.mark.parametrize(("count", "accepted"), [(3, True), (4, False)])
def test_more_fields_than_the_limit_is_invalid(
    client: httpx.Client, server: UploadServer, count: int, accepted: bool
) -> None:
    fields = {f"field{i}": str(i) for i in range(count)}
    body = b"".join(_body(fields, [b"doc"]))

    name, response = _upload(client, server, body, max_fields=3)

    if accepted:
        assert response.status_code == 200, response.text
        assert response.json()["fields"] == fields
    else:
        assert response.status_code == 400
        assert _error_code(response) == "invalid_upload"
        assert _leftovers(server, name) == []


def _raw_connection(server: UploadServer) -> socket.socket:
    address = urlsplit(server.base_url)
    assert address.hostname is not None and address.port is not None
    sock = socket.create_connection((address.hostname, address.port), timeout=10)
    return sock


def _request_head(server: UploadServer, name: str, content_length: int, **limits: int) -> bytes:
    return (
        f"POST {server.path(name, **limits)} HTTP/1.1\r\n"
        f"Host: {urlsplit(server.base_url).netloc}\r\n"
        f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\n"
        f"Content-Length: {content_length}\r\n\r\n"
    ).encode()


def test_oversize_content_length_is_refused_before_the_body_is_read(
    server: UploadServer,
) -> None:
    # Only the request head is sent: an answer at all proves the body was never waited for.
    name = uuid.uuid4().hex
    with _raw_connection(server) as sock:
        sock.sendall(_request_head(server, name, 10 * 1024**3, max_file_bytes=MiB))
        response = b""
        while b"\r\n\r\n" not in response or not response.endswith(b"}"):
            data = sock.recv(65536)
            assert data, f"connection closed after {response!r}"
            response += data

    status_line, _, rest = response.partition(b"\r\n")
    assert status_line.split()[1] == b"413"
    payload = json.loads(rest.partition(b"\r\n\r\n")[2])
    assert payload["error"]["code"] == "upload_too_large"
    assert _leftovers(server, name) == []


@pytest.mark.parametrize(("size", "accepted"), [(256 * 1024, True), (256 * 1024 + 1, False)])
def test_chunked_upload_is_limited_while_streaming(
    client: httpx.Client, server: UploadServer, size: int, accepted: bool
) -> None:
    data = os.urandom(size)
    chunks = (data[i : i + 10_000] for i in range(0, size, 10_000))

    name, response = _upload(client, server, _body({}, chunks), max_file_bytes=256 * 1024)

    assert response.request.headers["Transfer-Encoding"] == "chunked"
    assert "Content-Length" not in response.request.headers
    if accepted:
        assert response.status_code == 200, response.text
        assert (server.staging / name).read_bytes() == data
    else:
        assert response.status_code == 413
        assert _error_code(response) == "upload_too_large"
        assert _leftovers(server, name) == []


def test_chunked_upload_far_over_the_limit_leaves_no_file(
    client: httpx.Client, server: UploadServer
) -> None:
    block = os.urandom(64 * 1024)
    name, response = _upload(
        client, server, _body({}, (block for _ in range(64))), max_file_bytes=MiB
    )

    assert response.status_code == 413
    assert _error_code(response) == "upload_too_large"
    assert _leftovers(server, name) == []


def _rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


class _PeakRss:
    """Sample this process's resident set size every few milliseconds; keep the peak."""

    def __init__(self) -> None:
        self.peak = _rss_bytes()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, _rss_bytes())

    def __enter__(self) -> _PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss_bytes())


def test_50_mb_upload_streams_without_holding_the_file_in_memory(
    client: httpx.Client, server: UploadServer
) -> None:
    # The server runs in this process, so its memory is this process's VmRSS.
    block = os.urandom(MiB)
    blocks = 50
    _upload(client, server, _body({}, [block]), max_file_bytes=64 * MiB)  # warm up
    expected = hashlib.sha256()
    for _ in range(blocks):
        expected.update(block)

    baseline = _rss_bytes()
    with _PeakRss() as rss:
        name, response = _upload(
            client, server, _body({}, (block for _ in range(blocks))), max_file_bytes=64 * MiB
        )

    assert response.status_code == 200, response.text
    assert response.json()["size"] == blocks * MiB
    assert response.json()["sha256"] == expected.hexdigest()
    assert (server.staging / name).stat().st_size == blocks * MiB
    growth = rss.peak - baseline
    assert growth < 25 * MiB, f"RSS grew by {growth / MiB:.1f} MiB during a 50 MiB upload"
    (server.staging / name).unlink()


def test_client_disconnect_mid_body_leaves_no_file(server: UploadServer) -> None:
    name = uuid.uuid4().hex
    head = _part_head("file", filename="big.bin", content_type="application/octet-stream")
    declared = len(head) + 8 * MiB
    staged = server.staging / name
    with _raw_connection(server) as sock:
        sock.sendall(_request_head(server, name, declared, max_file_bytes=16 * MiB))
        sock.sendall(head + os.urandom(MiB))
        deadline = time.monotonic() + 10
        while not (staged.exists() and staged.stat().st_size > 0):
            assert time.monotonic() < deadline, "the server never started staging the file"
            time.sleep(0.01)
    # The socket is closed with 7 MiB of the declared body unsent.

    outcome = server.wait_outcome(name)

    assert outcome == {"error": {"code": "invalid_upload", "message": outcome["error"]["message"]}}
    assert "disconnected" in outcome["error"]["message"]
    assert not staged.exists()
