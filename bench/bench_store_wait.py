"""What the store check before each claim costs a job on PostgreSQL (`store_wait.py`).

Run: .venv/bin/python bench/bench_store_wait.py [--jobs 150] [--rounds 2] [--baseline DIR]

Before a job is claimed, a worker on a store server asks the store whether it answers (one
`SELECT 1` through the pool). This runs `--jobs` small jobs one after another through
`run_job`, as the Celery task calls it, against the private PostgreSQL of the tests (a fresh
schema per run), Redis DB 15 and the fake embedding server at 0 ms, so the job's own store,
Redis and parsing work is what the check is added to. With `--baseline DIR` (e.g.
`git archive main | tar -x -C DIR`) the same runs alternate between DIR's code and this tree's,
`--rounds` times each, in child processes; the report gives jobs/s and the per-job p50 of both
and the ratio, and the check alone timed 2,000 times.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def child(code: Path, jobs: int) -> dict[str, float]:
    """Run `jobs` small jobs with the docingest of `code`; their timings."""
    sys.path[:0] = [str(code), str(REPO)]
    import tempfile

    from docingest.pipeline.ingest.runner import run_job
    from docingest.pipeline.services import Services
    from tests.support.crash import notes
    from tests.support.embedding_server import FakeEmbeddingServer
    from tests.support.engines import postgres_url
    from tests.support.jobs import job_spec
    from tests.support.redis_db import purge_keys
    from tests.support.settings import service_settings

    prefix = f"bench-wait-{uuid.uuid4().hex[:8]}:"
    with tempfile.TemporaryDirectory() as tmp, FakeEmbeddingServer(dimensions=32) as fake:
        settings = service_settings(
            Path(tmp), prefix, fake, qdrant_url=None, database_url=postgres_url(),
            database_schema=f"bench_{uuid.uuid4().hex[:12]}", isolate_extraction=False,
        )  # fmt: skip
        services = Services(settings, owns_store=True)
        settings.staging_dir.mkdir(parents=True)
        try:
            seconds = []
            for n in range(jobs + 1):  # the first warms the model, pool and index: not counted
                spec = job_spec("bench", document_id=f"n{n}.txt", size_bytes=1)
                services.staged_path(spec.staged_name).write_bytes(notes(n, paragraphs=3))
                services.jobs.create(spec)
                started = time.perf_counter()
                outcome = run_job(services, spec.job_id)
                assert outcome == "completed", outcome
                seconds.append(time.perf_counter() - started)
            check = _check_seconds(services)
        finally:
            services.close()
            purge_keys(prefix)
    timed = seconds[1:]
    return {"jobs_per_s": len(timed) / sum(timed), "p50_ms": 1000 * statistics.median(timed),
            "check_us": check}  # fmt: skip


def _check_seconds(services: object) -> float:
    """Microseconds per store check, 2,000 of them (NaN where the code has none)."""
    try:
        from docingest.pipeline.ingest.store_wait import store_problem
    except ImportError:
        return float("nan")
    started = time.perf_counter()
    for _ in range(2000):
        assert store_problem(services) is None  # type: ignore[arg-type]
    return 1e6 * (time.perf_counter() - started) / 2000


def run_child(code: Path, jobs: int) -> dict[str, float]:
    command = [sys.executable, __file__, "--child", str(code), "--jobs", str(jobs)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{code}: {done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=150)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--baseline", type=Path)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.jobs)))
        return 0
    codes = ([args.baseline.resolve()] if args.baseline else []) + [REPO]
    load = [f"{os.getloadavg()[0]:.1f}"]
    results: dict[Path, list[dict[str, float]]] = {code: [] for code in codes}
    for _ in range(args.rounds):
        for code in codes:
            results[code].append(run_child(code, args.jobs))
    load.append(f"{os.getloadavg()[0]:.1f}")
    print(f"{args.jobs} jobs per run, {args.rounds} rounds; load average {load[0]} → {load[1]}")
    print("| code | jobs/s (each run) | job p50 ms (each run) | store check µs |")
    print("|---|---|---|---:|")
    for code, runs in results.items():
        rates = " / ".join(f"{r['jobs_per_s']:.2f}" for r in runs)
        p50s = " / ".join(f"{r['p50_ms']:.1f}" for r in runs)
        print(f"| {code} | {rates} | {p50s} | {runs[-1]['check_us']:.0f} |")
    if args.baseline:
        mean = {c: statistics.fmean(r["jobs_per_s"] for r in runs) for c, runs in results.items()}
        print(f"this tree / baseline: {mean[REPO] / mean[codes[0]]:.3f}× the jobs/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
