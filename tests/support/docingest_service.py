"""Start the real `docingest` commands as subprocesses for end-to-end tests.

Each service gets its own data directory, Redis key prefix (on DB 15) and free port, so
tests never share state with each other or with a developer's own `docingest serve`.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from docingest.pipeline.keys import TERMINAL_STATUSES
from tests.support.redis_db import TEST_REDIS_URL, purge_keys
from tests.support.waiting import wait_until

DOCINGEST = Path(sys.executable).with_name("docingest")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class ServiceEnv:
    """The environment of one test deployment (shared by its API and worker processes)."""

    data_dir: Path
    port: int = field(default_factory=free_port)
    key_prefix: str = field(default_factory=lambda: f"test-{uuid.uuid4().hex[:10]}:")
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def environ(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DOCINGEST_")}
        env.update(
            {
                "DOCINGEST_DATA_DIR": str(self.data_dir),
                "DOCINGEST_REDIS_URL": TEST_REDIS_URL,
                "DOCINGEST_REDIS_KEY_PREFIX": self.key_prefix,
                "DOCINGEST_PORT": str(self.port),
                "DOCINGEST_HOST": "127.0.0.1",
                "DOCINGEST_HEARTBEAT_INTERVAL_SECONDS": "1",
                "DOCINGEST_HEARTBEAT_TIMEOUT_SECONDS": "5",
                "DOCINGEST_HOUSEKEEPING_INTERVAL_SECONDS": "2",
                "DOCINGEST_LOCAL_MODEL_THREADS": "2",
                "PYTHONUNBUFFERED": "1",
            }
        )
        env.update(self.extra)
        return env


@dataclass
class Process:
    """A running `docingest` subprocess and its log file."""

    args: Sequence[str]
    popen: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60.0) -> int:
        """Send `sig` and wait for the exit code (SIGKILL after `timeout`)."""
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(10)
        return int(self.popen.returncode)


def start(
    command: Sequence[str], env: ServiceEnv, *, name: str, extra_env: Mapping[str, str] = {}
) -> Process:
    """Start `docingest <command>` with the environment of `env`, logging to a file."""
    env.data_dir.mkdir(parents=True, exist_ok=True)
    log_path = env.data_dir / f"{name}.log"
    environ = env.environ() | dict(extra_env)
    with log_path.open("ab") as log:
        popen = subprocess.Popen(
            [str(DOCINGEST), *command], env=environ, stdout=log, stderr=subprocess.STDOUT
        )
    return Process(args=command, popen=popen, log_path=log_path)


def wait_until_up(process: Process, base_url: str, *, timeout: float = 300.0) -> None:
    """Wait until `/healthz` answers; fail with the process log if it exits or times out
    (generous: at a load average of 30 on 2 cores, `serve` took 102 s to answer)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.popen.poll() is not None:
            raise RuntimeError(
                f"docingest exited with {process.popen.returncode}:\n{process.log()}"
            )
        try:
            if httpx.get(f"{base_url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    process.stop(signal.SIGKILL)
    raise RuntimeError(f"docingest did not answer within {timeout:.0f} s:\n{process.log()}")


LOADED_START_TIMEOUT = 600.0
"""For tests that check what the service answers, not how fast it starts: on a loaded shared
machine a start-up can take over the default 120 s."""
LOADED_REQUEST_TIMEOUT = httpx.Timeout(300.0, connect=30.0)
"""For a test's own HTTP client of the service: a deadline with room, there to end a hang, not
to time an answer (a loaded machine stretched a search or an upload past 60 s)."""


@contextmanager
def running_serve(
    env: ServiceEnv, *, purge: bool = True, timeout: float = 120.0
) -> Iterator[Process]:
    """`docingest serve` (API and worker in one process) for the duration of the block; then
    its Redis keys are deleted (unless `purge` is false: a caller whose Redis may have gone
    with the service deletes them itself). `timeout`: how long it may take to answer."""
    process = start(["serve"], env, name="serve")
    try:
        wait_until_up(process, env.base_url, timeout=timeout)
        yield process
    finally:
        process.stop()
        if purge:
            purge_keys(env.key_prefix)


def wait_for_job(
    client: httpx.Client, job_id: str, *, timeout: float = 180.0, poll: float = 0.2
) -> dict[str, object]:
    """Poll a job until it is completed, failed or cancelled; return its last state."""
    last: list[dict[str, object]] = []

    def ended() -> dict[str, object] | None:
        last[:] = [client.get(f"/v1/jobs/{job_id}").raise_for_status().json()]
        return last[0] if last[0]["status"] in TERMINAL_STATUSES else None

    try:
        return wait_until(ended, timeout=timeout, what=f"job {job_id} ending", poll=poll)
    except TimeoutError as exc:
        raise TimeoutError(f"{exc}; last state: {last[0] if last else None}") from None
