"""What bench_service.py measures with: /proc readings, uploads, job outcomes, an RSS sampler."""

from __future__ import annotations

import math
import statistics
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from docingest.pipeline.keys import TERMINAL_STATUSES
from tests.support.proc import rss_bytes, tree_cpu_seconds, tree_rss_bytes

REPO = Path(__file__).resolve().parent.parent


def wait_until_quiet(pid: int, *, timeout: float = 120.0) -> float:
    """Wait until `pid` and its descendants use under 0.1 CPU s in 1 s; return their CPU.

    `serve` answers before its fork servers have imported and warmed the parsers (~2.6 CPU
    s in all, measured); a CPU reading taken during that would charge it to the first jobs.
    """
    deadline = time.monotonic() + timeout
    last = tree_cpu_seconds(pid)
    while time.monotonic() < deadline:
        time.sleep(1.0)
        now = tree_cpu_seconds(pid)
        if now - last < 0.1:
            return now
        last = now
    raise RuntimeError(f"pid {pid} and its children still busy after {timeout:.0f} s")


def embedding_counts(client: httpx.Client) -> dict[str, float]:
    """The service's embedding counters from `/metrics`: requests, inputs (texts) and tokens
    embedded since it started."""
    found: dict[str, float] = {}
    for line in client.get("/metrics").raise_for_status().text.splitlines():
        name, _, value = line.partition(" ")
        if name.startswith("docingest_embedding_") and name.endswith("_total"):
            found[name.removeprefix("docingest_embedding_").removesuffix("_total")] = float(value)
    return found


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

    def span(self) -> float:
        """Seconds from the first job's creation to the last one's end."""
        jobs = self.jobs.values()
        first = min(datetime.fromisoformat(job["created_at"]) for job in jobs)
        last = max(datetime.fromisoformat(job["finished_at"]) for job in jobs)
        return (last - first).total_seconds()

    def run_seconds(self) -> list[float]:
        """Each job's time from its (last) start to its end."""
        return [
            (
                datetime.fromisoformat(job["finished_at"])
                - datetime.fromisoformat(job["started_at"])
            ).total_seconds()
            for job in self.jobs.values()
            if job["started_at"] and job["finished_at"]
        ]

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
            if job["status"] in TERMINAL_STATUSES:
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
    """Every `interval` s, record the VmRSS of the process and of the process with its
    descendants, and the stage of the job being watched."""

    def __init__(self, pid: int, base_url: str, *, interval: float = 0.2) -> None:
        self.pid, self.interval = pid, interval
        self.job_id: str | None = None
        self.samples: list[tuple[int, int, str]] = []  # (process bytes, tree bytes, stage)
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
            rss, tree = rss_bytes(self.pid), tree_rss_bytes(self.pid)
            stage = "before upload"
            if self.job_id is not None:
                job = self._client.get(f"/v1/jobs/{self.job_id}").json()
                stage = job["stage"] or job["status"]
            self.samples.append((rss, tree, stage))
            self._stop.wait(self.interval)

    def peaks(self, *, tree: bool = False) -> dict[str, int]:
        """Highest RSS seen in each stage, in the order the stages came."""
        peaks: dict[str, int] = {}
        for rss, tree_rss, stage in self.samples:
            peaks[stage] = max(tree_rss if tree else rss, peaks.get(stage, 0))
        return peaks


def mb(value: float) -> str:
    return f"{value / 2**20:,.0f} MB"


def ms(seconds: list[float]) -> str:
    values = [1000 * value for value in seconds]
    return f"median {statistics.median(values):.0f} ms of {len(values)} (max {max(values):.0f})"


def code_version() -> str:
    """The commit under test, and the service's files changed since it (others work here too)."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True).stdout

    status = git("status", "--porcelain", "--", "docingest")
    changed = sorted(line[3:] for line in status.splitlines())
    return f"commit {git('rev-parse', '--short', 'HEAD').strip()}" + (
        f", with uncommitted changes to {', '.join(changed)}" if changed else ""
    )


def timed(phases: dict[str, float], name: str, step: Callable[[], Any]) -> Any:
    started = time.perf_counter()
    value = step()
    phases[name] = time.perf_counter() - started
    print(f"{name}: {phases[name]:.0f} s", flush=True)
    return value
