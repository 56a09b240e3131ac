"""What bench_service.py measures with: /proc readings, uploads, job outcomes, an RSS sampler."""

from __future__ import annotations

import math
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

TERMINAL = {"completed", "failed", "cancelled"}


def rss_bytes(pid: int) -> int:
    """VmRSS of `pid`, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of `pid` (all its threads), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def upload(
    client: httpx.Client, index: str, data: bytes, *, filename: str, document_id: str
) -> tuple[float, httpx.Response]:
    """POST one document; return the seconds until the response, and the response."""
    started = time.perf_counter()
    response = client.post(
        f"/v1/indexes/{index}/documents",
        files={"file": (filename, data)},
        data={"document_id": document_id},
    )
    return time.perf_counter() - started, response


def upload_path(client: httpx.Client, index: str, path: Path) -> str:
    """Upload the file at `path` under its own name; return the job id."""
    data = path.read_bytes()
    _, response = upload(client, index, data, filename=path.name, document_id=path.name)
    return str(response.raise_for_status().json()["job_id"])


@dataclass
class Outcome:
    """How a set of jobs ended: by status, error code, and those lost (404) or stuck."""

    statuses: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    lost: list[str] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def bad(self) -> bool:
        return bool(self.lost or self.stuck)

    def line(self) -> str:
        parts = [f"{count} {status}" for status, count in sorted(self.statuses.items())]
        parts += [f"{len(self.lost)} lost", f"{len(self.stuck)} stuck"]
        errors = ", ".join(f"{code} ×{n}" for code, n in sorted(self.errors.items()))
        return ", ".join(parts) + (f" (errors: {errors})" if errors else "")


def settle(client: httpx.Client, job_ids: list[str], *, index: str, timeout: float) -> Outcome:
    """Poll until every job of `job_ids` (all in `index`) has ended, or `timeout` passes."""
    outcome = Outcome()
    pending = set(job_ids)
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        listed = client.get("/v1/jobs", params={"index": index, "limit": 500}).json()["jobs"]
        by_id = {job["job_id"]: job for job in listed}
        for job_id in list(pending):
            job = by_id.get(job_id)
            if job is None:  # beyond the list's 500, or gone
                response = client.get(f"/v1/jobs/{job_id}")
                if response.status_code == 404:
                    outcome.lost.append(job_id)
                    pending.discard(job_id)
                    continue
                job = response.raise_for_status().json()
            if job["status"] in TERMINAL:
                outcome.jobs[job_id] = job
                pending.discard(job_id)
        if pending:
            time.sleep(0.5)
    outcome.stuck = sorted(pending)
    for job in outcome.jobs.values():
        outcome.statuses[job["status"]] = outcome.statuses.get(job["status"], 0) + 1
        if job["error"]:
            code = job["error"]["code"]
            outcome.errors[code] = outcome.errors.get(code, 0) + 1
    return outcome


def wait_for_status(client: httpx.Client, job_id: str, status: str, *, timeout: float) -> bool:
    """Poll one job until it has `status`; False if it has not within `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if client.get(f"/v1/jobs/{job_id}").json()["status"] == status:
            return True
        time.sleep(0.1)
    return False


class RssSampler:
    """Every `interval` s, record the process's VmRSS and the stage of the job being watched."""

    def __init__(self, pid: int, base_url: str, *, interval: float = 0.2) -> None:
        self.pid, self.interval = pid, interval
        self.job_id: str | None = None
        self.samples: list[tuple[int, str]] = []  # (bytes, stage)
        self._client = httpx.Client(base_url=base_url, timeout=30)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._client.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            rss = rss_bytes(self.pid)
            stage = "before upload"
            if self.job_id is not None:
                job = self._client.get(f"/v1/jobs/{self.job_id}").json()
                stage = job["stage"] or job["status"]
            self.samples.append((rss, stage))
            self._stop.wait(self.interval)

    def peaks(self) -> dict[str, int]:
        """Highest RSS seen in each stage, in the order the stages came."""
        peaks: dict[str, int] = {}
        for rss, stage in self.samples:
            peaks[stage] = max(rss, peaks.get(stage, 0))
        return peaks
