"""Support for `test_hostile_inputs`: the deployment under test, its limits, and probes.

The limits (ServiceEnv.extra) make bombs fail fast; the module docstring of
`test_hostile_inputs` says why each has its value.
"""

from __future__ import annotations

import json
import os
import re
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support import hostile_files as hostile
from tests.support.docingest_service import Process, ServiceEnv, running_serve
from tests.support.http_client import ApiClient, Json
from tests.support.proc import rss_bytes

LIMITS = {
    "DOCINGEST_MAX_PAGES": "2000",
    "DOCINGEST_EXTRACTION_MEMORY_BYTES": "800000000",
    "DOCINGEST_EXTRACTION_CPU_SECONDS": "25",
    "DOCINGEST_EXTRACTION_TIMEOUT_SECONDS": "90",
}
EXTRACTION_CPU_SECONDS = int(LIMITS["DOCINGEST_EXTRACTION_CPU_SECONDS"])
MAX_JOB_CPU_SECONDS = EXTRACTION_CPU_SECONDS + 5 + 20
"""What one hostile job may cost the service's process tree, in CPU seconds (`CpuMeter`):
the parsing child is killed at its CPU limit (the hard limit is 5 s above it), and the rest
(upload, job, a few embeddings) takes a few seconds. Tests bound CPU, not the wall clock,
which a loaded machine stretches."""
INDEX = "hostile"
MiB = hostile.MiB
MAX_UPLOAD_BYTES = 100 * MiB
"""The server's default upload limit, which this deployment keeps."""
REPORT_ENV = "DOCINGEST_HOSTILE_REPORT"
"""If set, the path where each case's outcome and time are written as JSON at the end."""
JOB_ID = re.compile(r"[0-9a-f]{32}")
BOUNDARY = "hostile-7MA4YWxkTrZu0gW"


@dataclass
class Deployment:
    """The running service, a client of it, and each case's outcome and time."""

    env: ServiceEnv
    process: Process
    api: ApiClient
    outcomes: list[dict[str, Any]] = field(default_factory=list)

    @property
    def staging(self) -> Path:
        return self.env.data_dir / "staging"

    def staged(self) -> dict[str, int]:
        """The staging folder's files and their sizes."""
        return {path.name: path.stat().st_size for path in self.staging.iterdir()}

    def record(self, case: str, outcome: str, seconds: float) -> None:
        self.outcomes.append({"case": case, "outcome": outcome, "seconds": round(seconds, 1)})


def run_job(deployment: Deployment, case: str, content: bytes | Path, filename: str) -> Json:
    """Upload `content` as `filename`, wait for its job to end, record the outcome and time."""
    started = time.monotonic()
    job = deployment.api.wait(
        deployment.api.submit(INDEX, content, filename=filename, document_id=case)
    )
    outcome = str(job["status"]) if job["error"] is None else str(job["error"]["code"])
    deployment.record(case, outcome, time.monotonic() - started)
    return job


def assert_failed(job: Json, code: str, message: str) -> None:
    """The job failed with exactly `code`, and a message that matches the pattern `message`."""
    assert job["status"] == "failed", job
    assert job["error"]["code"] == code, job
    assert re.search(message, job["error"]["message"]), job
    assert "Traceback" not in job["error"]["message"]
    assert job["result"] is None


def assert_still_serving(deployment: Deployment) -> None:
    """The worker completes a small good job at once, and the server process is alive."""
    marker = uuid.uuid4().hex[:12]
    job = deployment.api.ingest(
        INDEX,
        f"The worker is still serving jobs; this one carries marker {marker}.".encode(),
        filename=f"alive-{marker}.txt",
    )
    assert job["result"]["chunks"] == 1
    assert deployment.process.popen.poll() is None, deployment.process.log()[-3000:]
    assert deployment.api.http.get("/healthz").json() == {"status": "ok"}


def search_texts(deployment: Deployment, query: str, document_id: str) -> list[str]:
    """Keyword search within one document; return the matching chunks' texts."""
    results = deployment.api.search(
        INDEX, query, mode="keyword", top_k=5, filter={"document_id": document_id}
    )
    assert all(result["document_id"] == document_id for result in results)
    return [str(result["text"]) for result in results]


class Listener:
    """A TCP listener on loopback that records every connection made to it."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.connections: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.sock.getsockname()[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.address[1]}"

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self.sock.accept()
            except TimeoutError:
                continue
            with connection:
                connection.settimeout(2)
                try:
                    self.connections.append(connection.recv(4096))
                except OSError:  # connected but sent nothing: still a connection
                    self.connections.append(b"")

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


def passwd_lines() -> list[str]:
    """The lines of /etc/passwd, which no job or search result may ever show."""
    return [line for line in Path("/etc/passwd").read_text().splitlines() if line]


class PeakRss:
    """Sample a process's resident set size every 10 ms while the block runs; keep the peak."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.baseline = self.peak = rss_bytes(pid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            self.peak = max(self.peak, rss_bytes(self.pid))

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_bytes(self.pid))

    @property
    def growth(self) -> int:
        return self.peak - self.baseline


def part_head(filename: str) -> bytes:
    """The opening boundary and headers of a multipart `file` part."""
    return (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"'
        "\r\nContent-Type: application/octet-stream\r\n\r\n"
    ).encode()


@contextmanager
def deployed(data_dir: Path) -> Iterator[Deployment]:
    """Run `docingest serve` with `LIMITS` on `data_dir`; write the report at the end."""
    env = ServiceEnv(data_dir=data_dir, extra=dict(LIMITS))
    with running_serve(env) as process:
        deployment = Deployment(env=env, process=process, api=ApiClient(env.base_url))
        yield deployment
        deployment.api.close()
        if report := os.environ.get(REPORT_ENV):
            Path(report).write_text(json.dumps(deployment.outcomes, indent=1) + "\n")
