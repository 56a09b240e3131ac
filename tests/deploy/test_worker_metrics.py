"""The worker's metrics port beyond the compose setup: one process (threads pool) needs no
multiprocess directory, and files left by earlier processes are cleared at start-up."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path

import httpx

from docingest.workers.metrics import remove_stale_files
from tests.support.compose import clean_environ
from tests.support.docingest_service import DOCINGEST, free_port
from tests.support.redis_db import TEST_REDIS_URL, purge_keys


def test_stale_metric_files_of_other_processes_are_removed(tmp_path: Path) -> None:
    mine = [f"counter_{os.getpid()}.db", f"histogram_{os.getpid()}.db"]
    stale = ["counter_1.db", "histogram_99999999.db", "gauge_livesum_2.db"]
    unrelated = ["notes.txt", "counter_x.db"]
    for name in mine + stale + unrelated:
        (tmp_path / name).write_bytes(b"")
    assert remove_stale_files(tmp_path) == len(stale)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(mine + unrelated)


def test_threads_pool_serves_metrics_without_a_multiprocess_dir(tmp_path: Path) -> None:
    port = free_port()
    key_prefix = f"test-{uuid.uuid4().hex[:10]}:"
    env = clean_environ() | {
        "DOCINGEST_DATA_DIR": str(tmp_path),
        "DOCINGEST_REDIS_URL": TEST_REDIS_URL,
        "DOCINGEST_REDIS_KEY_PREFIX": key_prefix,
        "DOCINGEST_METRICS_PORT": str(port),
    }
    log_path = tmp_path / "worker.log"
    with log_path.open("wb") as log:
        worker = subprocess.Popen(
            [str(DOCINGEST), "worker", "--pool", "threads"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 120
        text = ""
        while time.monotonic() < deadline and worker.poll() is None:
            try:
                text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
                break
            except httpx.TransportError:
                time.sleep(0.3)
        assert text, log_path.read_text()
        assert "docingest_embedding_requests_total 0.0" in text
        assert "docingest_points_upserted_total 0.0" in text
    finally:
        worker.terminate()
        try:
            worker.wait(60)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait(10)
        purge_keys(key_prefix)
