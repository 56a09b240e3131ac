"""Prometheus metrics of a `docingest worker`, served on `metrics_port` by its main process.

With the prefork pool the jobs run in child processes. Each child records into files in
`PROMETHEUS_MULTIPROC_DIR` (prometheus-client's multiprocess mode) and the main process serves
their sum, so a scrape sees every child, and a child recycled by `--max-tasks-per-child` keeps
its counts. With the threads or solo pool one process does everything, and no directory is
needed. The parsing children of `docingest.pipeline.isolation.parent` never import
prometheus-client, so they leave no files behind.

The embedding counters are plain per-process totals (`docingest.pipeline.embedders.base.COUNTERS`,
which the API serves as they are); `EmbeddingBridge` copies their growth into Prometheus counters of
the same names after each task and every few seconds while one runs.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIServer

from celery.signals import task_postrun, worker_process_init, worker_process_shutdown
from prometheus_client import REGISTRY, CollectorRegistry, Counter, start_http_server
from prometheus_client.multiprocess import MultiProcessCollector

from docingest.pipeline.embedders.base import COUNTERS

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
SYNC_SECONDS = 5.0
"""How often a running job's embedding counts are copied into the served counters."""

_DB_FILE = re.compile(r"^(?:counter|histogram|summary|gauge_\w+)_(\d+)\.db$")


def multiprocess_dir() -> Path | None:
    """The multiprocess directory named by the environment, if any."""
    value = os.environ.get(MULTIPROC_ENV)
    return Path(value) if value else None


def setup_problem(pool: str) -> str | None:
    """Return why metrics cannot be served for `pool` as configured, or None."""
    directory = multiprocess_dir()
    if directory is None:
        if pool == "prefork":
            return (
                f"a metrics port with the prefork pool needs {MULTIPROC_ENV} set to an empty, "
                "writable directory (one per worker), where every pool process records its "
                "metrics; or use --pool threads"
            )
        return None
    if not directory.is_dir() or not os.access(directory, os.W_OK):
        return f"{MULTIPROC_ENV}={directory} is not a writable directory"
    return None


def remove_stale_files(directory: Path) -> int:
    """Delete metric files of other (earlier) processes; return how many were removed."""
    removed = 0
    for path in directory.iterdir():
        match = _DB_FILE.match(path.name)
        if match and int(match.group(1)) != os.getpid():
            path.unlink(missing_ok=True)
            removed += 1
    return removed


def serve(port: int, *, host: str) -> WSGIServer:
    """Serve this worker's metrics on `host:port` from a daemon thread; return the server."""
    directory = multiprocess_dir()
    if directory is None:
        server, _ = start_http_server(port, addr=host, registry=REGISTRY)
        return server
    remove_stale_files(directory)
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(directory))
    server, _ = start_http_server(port, addr=host, registry=registry)
    return server


class EmbeddingBridge:
    """Copies the growth of this process's embedding counters into Prometheus counters."""

    def __init__(self) -> None:
        self._seen = COUNTERS.snapshot()
        self._counters = {
            name: Counter(f"docingest_embedding_{name}", f"Embedding {name} in this worker.")
            for name in self._seen
        }
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="metrics-bridge", daemon=True)

    def start(self) -> EmbeddingBridge:
        self._thread.start()
        return self

    def sync(self) -> None:
        """Add what the embedding counters gained since the last call."""
        with self._lock:
            now = COUNTERS.snapshot()
            for name, value in now.items():
                if value > self._seen[name]:
                    self._counters[name].inc(value - self._seen[name])
            self._seen = now

    def stop(self) -> None:
        self._stop.set()
        self.sync()

    def _run(self) -> None:
        while not self._stop.wait(SYNC_SECONDS):
            self.sync()


_bridge: EmbeddingBridge | None = None
_bridge_lock = threading.Lock()


def start_bridge(**_: Any) -> None:
    """Start this process's bridge (once); connected to `worker_process_init` for prefork."""
    global _bridge
    with _bridge_lock:
        if _bridge is None:
            _bridge = EmbeddingBridge().start()


def _sync_bridge(**_: Any) -> None:
    if _bridge is not None:
        _bridge.sync()


def _stop_bridge(**_: Any) -> None:
    if _bridge is not None:
        _bridge.stop()


def install(pool: str) -> None:
    """Record embedding counts in the processes that will run jobs under `pool`."""
    task_postrun.connect(_sync_bridge, weak=False)
    if pool == "prefork":
        worker_process_init.connect(start_bridge, weak=False)
        worker_process_shutdown.connect(_stop_bridge, weak=False)
    else:
        start_bridge()
