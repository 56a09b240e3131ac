"""Threads and memory of `docingest serve` per idle index, and what one `PUT` of an index costs.

Run: `.venv/bin/python bench/bench_idle_indexes.py [--indexes 100]`.

Starts a real `docingest serve` (the embedded store, the local model) on a fresh data
directory, creates empty indexes one `PUT` at a time, and after 1, 20 and `--indexes` of them,
once the process has been idle for a few seconds, reads its thread count and VmRSS from
/proc. Then it restarts the server on the same directory, lists the indexes, runs one search
in each, lets it go idle again and reads them once more: shards opened by use and then left
alone should not stay open.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from _common import machine  # noqa: E402
from _service_tools import code_version, rss_bytes  # noqa: E402

from tests.support.docingest_service import ServiceEnv, running_serve  # noqa: E402

IDLE_SECONDS = 8.0
"""How long the process is left alone before a reading (a few optimizer checks)."""


def threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise RuntimeError(f"no thread count for pid {pid}")


def reading(label: str, pid: int, idle: float) -> None:
    time.sleep(idle)
    print(f"| {label} | {threads(pid)} | {rss_bytes(pid) / 2**20:.0f} MiB |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--indexes", type=int, default=100)
    parser.add_argument("--idle-close-seconds", type=float, default=None)
    args = parser.parse_args()
    print(machine(), "| code", code_version())
    marks = sorted({1, 20, args.indexes})
    extra = {}
    if args.idle_close_seconds is not None:
        extra["DOCINGEST_EDGE_IDLE_CLOSE_SECONDS"] = str(args.idle_close_seconds)
    with tempfile.TemporaryDirectory() as folder:
        env = ServiceEnv(data_dir=Path(folder) / "data", extra=extra)
        with running_serve(env) as process:
            pid = process.popen.pid
            client = httpx.Client(base_url=env.base_url, timeout=120)
            reading("0 indexes (started)", pid, IDLE_SECONDS)
            put_seconds = []
            for number in range(1, args.indexes + 1):
                started = time.perf_counter()
                client.put(f"/v1/indexes/idle-{number:03d}", json={}).raise_for_status()
                put_seconds.append(time.perf_counter() - started)
                if number in marks:
                    reading(f"{number} empty indexes", pid, IDLE_SECONDS)
            print(
                f"PUT of an index: median {statistics.median(put_seconds) * 1000:.0f} ms, "
                f"max {max(put_seconds) * 1000:.0f} ms over {len(put_seconds)}"
            )
            client.close()
        with running_serve(env, purge=True) as process:
            pid = process.popen.pid
            client = httpx.Client(base_url=env.base_url, timeout=120)
            reading(f"restarted, {args.indexes} indexes on disk", pid, IDLE_SECONDS)
            for number in range(1, args.indexes + 1):
                client.post(
                    f"/v1/indexes/idle-{number:03d}/search",
                    json={"query": "anything", "mode": "keyword"},
                ).raise_for_status()
            reading(f"after a search in each of the {args.indexes}", pid, 2.0)
            reading(f"then idle {IDLE_SECONDS + 60:.0f} s", pid, IDLE_SECONDS + 60)
            client.close()


if __name__ == "__main__":
    main()
