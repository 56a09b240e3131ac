"""The image's entry points, `docingest api` and `docingest worker`, run as real subprocesses.

They stop at once, with one line naming the dependency, when Redis is unreachable; a store
server that does not answer yet (Qdrant, PostgreSQL) is logged and they start.
Started with the compose environment (docker-compose.yml and .env.example, resolved as compose
resolves them) they come up against the real test Redis: only the wiring that names the compose
network is swapped (Redis on 127.0.0.1 DB 15 with a unique key prefix, Qdrant ":memory:",
which docingest treats as a server, so the worker runs prefork as in compose; a temporary
staging directory; free ports). The worker's metrics port is scraped after a real ingestion.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from docingest.pipeline.embedders.artifacts import CL100K_RANKS, LOCAL_MODEL, BundledFile
from tests.support.compose import DEPLOY_DIR, clean_environ, load_compose, service_environment
from tests.support.docingest_service import (
    DOCINGEST,
    Process,
    free_port,
    wait_for_job,
    wait_until_up,
)
from tests.support.paths import REPO_DIR
from tests.support.redis_db import TEST_REDIS_URL, purge_keys
from tests.support.waiting import wait_until

FAIL_FAST_MARGIN_SECONDS = 15.0
"""How much longer than `start_up_baseline` a start-up stopped by an unreachable dependency may
take: one refused connection costs milliseconds, a retry loop would cost tens of seconds."""

EXAMPLE = REPO_DIR / "examples" / "docling-README.md"
HEALTHCHECK = DEPLOY_DIR / "healthcheck.py"
CELERY = Path(sys.executable).with_name("celery")


@pytest.fixture
def refused_port() -> Iterator[int]:
    """A port bound but not listening: every connection to it is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


def run_briefly(command: list[str], env: dict[str, str]) -> tuple[int, str, float]:
    started = time.monotonic()
    result = subprocess.run(
        [str(DOCINGEST), *command], env=env, capture_output=True, text=True, timeout=120
    )
    return result.returncode, result.stderr, time.monotonic() - started


@pytest.fixture(scope="module")
def start_up_baseline(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], float]:
    """Seconds `docingest <command>` takes to stop at its first start-up check (a tampered
    bundled file, checked before Redis and Qdrant), measured now, per command: the imports
    and settings a start-up pays before any dependency is asked, however loaded the machine
    (34.8 s was seen for the worker at load average 5-7 on 2 CPUs, against an absolute 30)."""
    measured: dict[str, float] = {}

    def baseline(command: str) -> float:
        if command not in measured:
            tmp_path = tmp_path_factory.mktemp(f"baseline-{command}")
            shadow_with_tampered_copy(CL100K_RANKS, tmp_path / "site")
            env = minimal_env(tmp_path, PYTHONPATH=str(tmp_path / "site"))
            code, stderr, elapsed = run_briefly([command], env)
            assert code == 1 and "is corrupt" in stderr, stderr
            measured[command] = elapsed
        return measured[command]

    return baseline


def fails_fast(elapsed: float, baseline: float) -> bool:
    """Whether a start-up that took `elapsed` s stopped about as soon as `baseline`'s did."""
    return elapsed < 2 * baseline + FAIL_FAST_MARGIN_SECONDS


def minimal_env(tmp_path: Path, **overrides: str) -> dict[str, str]:
    env = clean_environ() | {
        "DOCINGEST_DATA_DIR": str(tmp_path),
        "DOCINGEST_REDIS_URL": TEST_REDIS_URL,
        "DOCINGEST_REDIS_KEY_PREFIX": f"test-{uuid.uuid4().hex[:10]}:",
        "DOCINGEST_QDRANT_URL": ":memory:",
    }
    return env | overrides


@pytest.mark.parametrize("command", ["api", "worker"])
def test_unreachable_redis_stops_start_up_with_a_clear_message(
    command: str, tmp_path: Path, refused_port: int, start_up_baseline: Callable[[str], float]
) -> None:
    url = f"redis://127.0.0.1:{refused_port}/0"
    code, stderr, elapsed = run_briefly([command], minimal_env(tmp_path, DOCINGEST_REDIS_URL=url))
    assert code == 1, stderr
    assert fails_fast(elapsed, start_up_baseline(command)), elapsed
    assert f"docingest {command}: Redis at {url} does not answer" in stderr
    assert "DOCINGEST_REDIS_URL" in stderr and "Traceback" not in stderr


@pytest.mark.parametrize("store", ["qdrant", "postgres"])
@pytest.mark.parametrize("command", ["api", "worker", "serve"])
def test_an_unreachable_store_server_is_logged_and_start_up_goes_on(
    command: str, store: str, tmp_path: Path, refused_port: int
) -> None:
    """In compose, Kubernetes or systemd the database may come up after us: the process
    starts, says which store does not answer yet, and `/readyz` says why meanwhile."""
    if store == "qdrant":
        url = f"http://127.0.0.1:{refused_port}"
        env = minimal_env(tmp_path, DOCINGEST_QDRANT_URL=url)
        named = f"Qdrant ({url}) does not answer yet, starting anyway"
    else:
        url = f"postgresql://docingest:secret@127.0.0.1:{refused_port}/docingest"
        env = minimal_env(tmp_path, DOCINGEST_QDRANT_URL="", DOCINGEST_DATABASE_URL=url)
        named = f"PostgreSQL ({url.replace(':secret@', ':***@')}) does not answer yet"
    port = free_port()
    env |= {"DOCINGEST_PORT": str(port), "DOCINGEST_LOG_FORMAT": "json"}
    process = launch([command], env, tmp_path / f"{command}.log")  # a worker: prefork, as compose
    try:
        if command != "worker":
            wait_until_up(process, f"http://127.0.0.1:{port}")
            ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=60)
            assert ready.status_code == 503, ready.text
            check = ready.json()["checks"][store]
            assert check.startswith("unavailable: ") and "unreachable" in check, check
        else:
            wait_until(lambda: worker_ready(process), timeout=300, what="the worker ready")
        text = process.log()
        assert named in text and "Traceback" not in text and "secret" not in text
    finally:
        process.stop()


def shadow_with_tampered_copy(bundled: BundledFile, site: Path) -> Path:
    """Copy `bundled`'s distribution metadata into `site` beside a copy of its file with one
    byte flipped, and return that copy: with `site` first on PYTHONPATH, importlib.metadata
    finds this distribution before the installed one, which stays untouched."""
    distribution = metadata.distribution(bundled.distribution)
    metadata_file = next(f for f in distribution.files or [] if f.name == "METADATA")
    dist_info = Path(str(distribution.locate_file(metadata_file))).parent
    shutil.copytree(dist_info, site / dist_info.name)
    tampered = site / bundled.relative_path
    tampered.parent.mkdir(parents=True, exist_ok=True)
    data = bytearray(bundled.installed_path().read_bytes())
    data[len(data) // 2] ^= 0x01
    tampered.write_bytes(bytes(data))
    return tampered


@pytest.mark.parametrize(
    ("command", "bundled"),
    [("api", LOCAL_MODEL), ("worker", CL100K_RANKS), ("serve", CL100K_RANKS)],
    ids=["api-model", "worker-ranks", "serve-ranks"],
)
def test_a_tampered_bundled_file_stops_start_up_naming_it_and_both_digests(
    command: str, bundled: BundledFile, tmp_path: Path
) -> None:
    tampered = shadow_with_tampered_copy(bundled, tmp_path / "site")
    env = minimal_env(tmp_path, PYTHONPATH=str(tmp_path / "site"))
    code, stderr, _ = run_briefly([command], env)
    assert code == 1, stderr
    assert f"docingest {command}: the {bundled.description} {tampered} is corrupt" in stderr
    assert f"sha256 {hashlib.sha256(tampered.read_bytes()).hexdigest()}" in stderr
    assert f"expected {bundled.sha256}" in stderr
    assert "Traceback" not in stderr


def test_prefork_metrics_without_a_multiprocess_dir_is_refused(tmp_path: Path) -> None:
    env = minimal_env(tmp_path, DOCINGEST_METRICS_PORT=str(free_port()))
    code, stderr, _ = run_briefly(["worker", "--pool", "prefork"], env)
    assert code == 1
    assert "PROMETHEUS_MULTIPROC_DIR" in stderr and "Traceback" not in stderr


# --- the compose environment ---------------------------------------------------------------


@dataclass
class Deployment:
    api: Process
    worker: Process
    api_env: dict[str, str]
    worker_env: dict[str, str]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.api_env['DOCINGEST_PORT']}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.worker_env['DOCINGEST_METRICS_PORT']}/metrics"


WIRING = {
    "DOCINGEST_REDIS_URL",
    "DOCINGEST_QDRANT_URL",
    "DOCINGEST_DATA_DIR",
    "DOCINGEST_HOST",
    "DOCINGEST_PORT",
    "DOCINGEST_METRICS_PORT",
    "PROMETHEUS_MULTIPROC_DIR",
}
"""The only compose values a test replaces: they name hosts, paths and ports of the network."""


def compose_env(service: str, *, data_dir: Path, key_prefix: str, port: int) -> dict[str, str]:
    env = service_environment(service)
    local = {
        "DOCINGEST_REDIS_URL": TEST_REDIS_URL,
        "DOCINGEST_QDRANT_URL": ":memory:",
        "DOCINGEST_DATA_DIR": str(data_dir),
        "DOCINGEST_HOST": "127.0.0.1",
        "DOCINGEST_PORT": str(port),
    }
    if "DOCINGEST_METRICS_PORT" in env:
        metrics_dir = data_dir / f"metrics-{service}"
        metrics_dir.mkdir()
        local |= {
            "DOCINGEST_METRICS_PORT": str(free_port()),
            "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir),
        }
    assert set(local) <= WIRING
    return clean_environ() | env | local | {"DOCINGEST_REDIS_KEY_PREFIX": key_prefix}


def launch(command: list[str], env: dict[str, str], log_path: Path) -> Process:
    with log_path.open("ab") as log:
        popen = subprocess.Popen(
            [str(DOCINGEST), *command],
            env=env | {"PYTHONUNBUFFERED": "1"},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    return Process(args=command, popen=popen, log_path=log_path)


def json_lines(text: str) -> list[dict[str, Any]]:
    """The log lines that are JSON objects (warnings printed by libraries are not)."""
    lines = []
    for line in text.splitlines():
        if line.startswith("{"):
            lines.append(json.loads(line))
    return lines


def worker_ready(process: Process) -> dict[str, Any] | None:
    if process.popen.poll() is not None:
        raise AssertionError(f"the worker exited with {process.popen.returncode}:\n{process.log()}")
    for line in json_lines(process.log()):
        if line["message"].endswith(" ready."):
            return line
    return None


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    """`docingest api` and `docingest worker` with the compose commands and environment."""
    data_dir = tmp_path_factory.mktemp("compose")
    key_prefix = f"test-{uuid.uuid4().hex[:10]}:"
    port = free_port()
    compose = load_compose()["services"]
    api_env = compose_env("api", data_dir=data_dir, key_prefix=key_prefix, port=port)
    worker_env = compose_env("worker", data_dir=data_dir, key_prefix=key_prefix, port=port)
    api = launch(compose["api"]["command"], api_env, data_dir / "api.log")
    worker = launch(compose["worker"]["command"], worker_env, data_dir / "worker.log")
    try:
        wait_until_up(api, f"http://127.0.0.1:{port}")
        wait_until(
            lambda: worker_ready(worker), timeout=120, what="the worker to be ready", poll=0.3
        )
        yield Deployment(api=api, worker=worker, api_env=api_env, worker_env=worker_env)
    finally:
        worker.stop()
        api.stop()
        purge_keys(key_prefix)


@pytest.fixture(scope="module")
def ingested(deployment: Deployment) -> dict[str, Any]:
    """One document ingested through the deployment; its finished job."""
    with httpx.Client(base_url=deployment.base_url, timeout=60) as client:
        response = client.post(
            "/v1/indexes/compose/documents",
            files={"file": (EXAMPLE.name, EXAMPLE.read_bytes())},
            data={"document_id": "docling-readme"},
        )
        assert response.status_code == 202, response.text
        job = wait_for_job(client, response.json()["job_id"])
    assert job["status"] == "completed", job
    return job


def samples(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = httpx.get(url, timeout=10).raise_for_status().text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_api_starts_with_the_compose_environment(deployment: Deployment) -> None:
    assert httpx.get(f"{deployment.base_url}/healthz", timeout=5).json() == {"status": "ok"}
    ready = httpx.get(f"{deployment.base_url}/readyz", timeout=60)
    assert ready.status_code == 200, ready.text
    lines = json_lines(deployment.api.log())
    assert any("Uvicorn running" in line["message"] for line in lines), deployment.api.log()


def test_worker_starts_with_the_compose_environment(deployment: Deployment) -> None:
    ready = worker_ready(deployment.worker)
    assert ready is not None and ready["level"] == "INFO"
    assert deployment.worker.popen.poll() is None
    assert f"metrics on http://127.0.0.1:{deployment.worker_env['DOCINGEST_METRICS_PORT']}" in (
        deployment.worker.log()
    )


@pytest.mark.parametrize("role", ["api", "worker"])
def test_container_healthcheck_passes(deployment: Deployment, role: str) -> None:
    env = deployment.api_env if role == "api" else deployment.worker_env
    result = subprocess.run(
        [sys.executable, str(HEALTHCHECK), role], env=env, capture_output=True, timeout=30
    )
    assert result.returncode == 0, result.stderr


def test_container_healthcheck_fails_when_nothing_answers(refused_port: int) -> None:
    for role, name in (("api", "DOCINGEST_PORT"), ("worker", "DOCINGEST_METRICS_PORT")):
        env = clean_environ() | {name: str(refused_port)}
        result = subprocess.run(
            [sys.executable, str(HEALTHCHECK), role], env=env, capture_output=True, timeout=30
        )
        assert result.returncode == 1 and b"unhealthy" in result.stderr


def test_worker_metrics_count_an_ingestion(
    deployment: Deployment, ingested: dict[str, Any]
) -> None:
    chunks = ingested["result"]["chunks"]
    assert chunks > 1 and ingested["result"]["chunks_reused"] == 0
    completed = ("docingest_worker_jobs_finished_total", (("code", ""), ("status", "completed")))
    inputs = ("docingest_embedding_inputs_total", ())
    # The job is recorded inside the task; the embedding counters are copied into the served
    # ones right after it (task_postrun), so wait for both before comparing.
    deadline = time.monotonic() + 30
    while True:
        found = samples(deployment.metrics_url)
        if found.get(completed) == 1 and found.get(inputs, 0) >= chunks:
            time.sleep(0.5)  # the copy adds one counter after another
            found = samples(deployment.metrics_url)
            break
        if time.monotonic() > deadline:
            shown = {k: v for k, v in found.items() if "docingest" in k[0] and "bucket" not in k[0]}
            raise AssertionError(f"the worker's metrics do not show the job: {shown}")
        time.sleep(0.3)
    assert found[("docingest_points_upserted_total", ())] == chunks
    assert found[("docingest_embedding_inputs_total", ())] == chunks
    requests = found[("docingest_embedding_requests_total", ())]
    latency = ("docingest_embedding_request_duration_seconds_count", (("provider", "local"),))
    assert requests >= 1 and found[latency] == requests
    assert found[("docingest_embedding_tokens_total", ())] > chunks
    assert found[("docingest_embedding_failures_total", ())] == 0
    assert found[("docingest_job_duration_seconds_count", ())] == 1
    for stage in ("extracting", "chunking", "embedding", "storing"):
        key = ("docingest_stage_duration_seconds_count", (("stage", stage),))
        assert found.get(key) == 1, stage


def test_job_log_lines_carry_the_job_fields(
    deployment: Deployment, ingested: dict[str, Any]
) -> None:
    lines = [
        line
        for line in json_lines(deployment.worker.log())
        if line.get("job_id") == ingested["job_id"]
    ]
    assert lines, deployment.worker.log()
    for line in lines:
        assert line["index"] == "compose" and line["document_id"] == "docling-readme", line
    assert any(line["message"].endswith(": completed") for line in lines)


def test_dashboard_queries_only_metrics_that_exist(
    deployment: Deployment, ingested: dict[str, Any]
) -> None:
    dashboard = json.loads((DEPLOY_DIR / "grafana-dashboard.json").read_text())
    queried = {
        name
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
        for name in re.findall(r"\bdocingest_[a-z_]+", target["expr"])
    }
    served = {name for name, _ in samples(f"{deployment.base_url}/metrics")}
    served |= {name for name, _ in samples(deployment.metrics_url)}
    assert queried and not queried - served, sorted(queried - served)


def test_flower_app_reaches_the_workers(deployment: Deployment) -> None:
    """deploy/flower/flowerapp.py speaks to the workers over the same broker and key prefix."""
    env = deployment.worker_env | {"PYTHONPATH": str(DEPLOY_DIR / "flower")}
    result = subprocess.run(
        [str(CELERY), "--app", "flowerapp", "inspect", "ping", "--timeout", "10"],
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "pong" in result.stdout
