"""200 uploads through a real `docingest serve` with a fallback endpoint, the primary healthy
and then failing every request from the 50th on; and the usage counters against the fake
servers' own request and token logs.

Run: .venv/bin/python bench/bench_fallback.py [--uploads 200] [--fail-from 50]
     [--latency-ms 20] [--paragraphs 12]

Each run starts two fake OpenAI-compatible servers in this process (the primary and the
fallback, tests/support/embedding_server.py, text-embedding-3-small shaped, `--latency-ms` per
request) and a real `docingest serve` (API, in-process worker, isolated extraction, the
embedded store) with production retry and circuit settings and
`DOCINGEST_OPENAI_FALLBACK_URLS` set to the fallback. It uploads `--uploads` distinct
plain-text documents (`--paragraphs` paragraphs of about 400 characters each) into a new
index, four uploads at a time, and waits until every job has ended. Seconds are from the first
job's creation to the last one's end (the jobs' own times).

In the failing run the primary answers its first `--fail-from` - 1 requests (its check on
start among them) and then 503 to every one. Checked after each run, exactly: every job
`completed`; the sum of the jobs' `result.usage` per endpoint equals what each server logged
as served (its check's probe aside); the index's usage (`GET /v1/indexes/{index}`) equals the
sum of its jobs'.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from _common import machine  # noqa: E402
from _service_tools import code_version, settle, upload  # noqa: E402

from docingest.pipeline.embedders.endpoint_check import PROBE_TEXT  # noqa: E402
from tests.support.docingest_service import running_serve  # noqa: E402
from tests.support.embedding_server import FakeEmbeddingServer  # noqa: E402
from tests.support.load import production_env  # noqa: E402

INDEX = "fallback-bench"
UPLOAD_THREADS = 4


def documents(count: int, paragraphs: int) -> list[tuple[str, bytes]]:
    """`count` distinct plain-text documents (no chunk is shared, so nothing is reused)."""
    return [
        (
            f"doc-{number:04d}.txt",
            "\n\n".join(
                f"Report {number}, section {section}: "
                + " ".join(f"r{number}s{section}w{word}" for word in range(60))
                + "."
                for section in range(paragraphs)
            ).encode(),
        )
        for number in range(count)
    ]


@dataclass
class Run:
    """One run: how the jobs ended and what the counters say."""

    label: str
    seconds: float = 0.0
    statuses: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    chunks: int = 0
    usage: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Endpoint → (requests, tokens) summed over the jobs' `result.usage`."""
    served: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Endpoint → (requests, tokens) the fake server logged as served (probes aside)."""
    probes: dict[str, int] = field(default_factory=dict)
    index_usage: dict[str, Any] = field(default_factory=dict)
    jobs_via_fallback: int = 0
    slowest_job: float = 0.0
    """The longest one job ran, from its (last) start to its end."""
    primary_errors: int = 0
    """Requests the primary answered with 503 (each a failed attempt)."""
    problems: list[str] = field(default_factory=list)


def served_by(server: FakeEmbeddingServer) -> tuple[tuple[int, int], int]:
    batches = [r for r in server.served if r.inputs != [PROBE_TEXT]]
    probes = len(server.served) - len(batches)
    return (len(batches), sum(r.prompt_tokens or 0 for r in batches)), probes


def measure(label: str, *, uploads: int, paragraphs: int, latency: float, fail_from: int) -> Run:
    run = Run(label)
    docs = documents(uploads, paragraphs)
    with (
        tempfile.TemporaryDirectory(prefix="docingest-bench-fallback-") as tmp,
        FakeEmbeddingServer(latency=latency, seed=1) as primary,
        FakeEmbeddingServer(latency=latency, seed=2) as fallback,
    ):
        env = production_env(Path(tmp) / "data", primary)
        env.extra["DOCINGEST_OPENAI_FALLBACK_URLS"] = fallback.base_url
        if fail_from:
            primary.fail_from(fail_from, {"status": 503, "message": "primary is down"})
        with running_serve(env), httpx.Client(base_url=env.base_url, timeout=120) as client:

            def send(doc: tuple[str, bytes]) -> str:
                name, data = doc
                _, response = upload(client, INDEX, data, filename=name, document_id=name)
                return str(response.raise_for_status().json()["job_id"])

            with ThreadPoolExecutor(UPLOAD_THREADS) as pool:
                job_ids = list(pool.map(send, docs))
            outcome = settle(client, job_ids, index=INDEX, timeout=1800)
            run.index_usage = client.get(f"/v1/indexes/{INDEX}").raise_for_status().json()["usage"]
        run.seconds = outcome.span() if outcome.jobs else 0.0
        run.slowest_job = max(outcome.run_seconds(), default=0.0)
        run.primary_errors = sum(1 for request in primary.requests if request.status == 503)
        run.statuses, run.errors = outcome.statuses, outcome.errors
        if outcome.bad:
            run.problems.append(outcome.line())
        totals: dict[str, list[int]] = {}
        for job in outcome.jobs.values():
            result = job["result"] or {}
            run.chunks += result.get("chunks", 0)
            usage = result.get("usage") or {}
            run.jobs_via_fallback += bool(usage.get("fallback_used"))
            for endpoint, used in (usage.get("endpoints") or {}).items():
                total = totals.setdefault(endpoint, [0, 0])
                total[0] += used["requests"]
                total[1] += used["input_tokens"]
        run.usage = {name: (requests, tokens) for name, (requests, tokens) in totals.items()}
        for name, server in (("primary", primary), ("fallback1", fallback)):
            run.served[name], run.probes[name] = served_by(server)
    check(run)
    return run


def check(run: Run) -> None:
    """Record every way the run falls short of the claim."""
    if run.statuses != {"completed": sum(run.statuses.values())}:
        run.problems.append(f"not all completed: {run.statuses}, errors {run.errors}")
    for name, served in run.served.items():
        if run.usage.get(name, (0, 0)) != served:
            run.problems.append(f"{name}: jobs' usage {run.usage.get(name)} != server's {served}")
    requests = sum(requests for requests, _ in run.usage.values())
    tokens = sum(tokens for _, tokens in run.usage.values())
    index = run.index_usage
    if (index.get("embedding_requests"), index.get("input_tokens")) != (requests, tokens):
        run.problems.append(f"index usage {index} != the jobs' ({requests}, {tokens})")
    if index.get("jobs") != run.statuses.get("completed"):
        run.problems.append(f"index usage counts {index.get('jobs')} jobs")


def report(runs: list[Run], args: argparse.Namespace, loads: list[str]) -> None:
    command = (
        f"python bench/bench_fallback.py --uploads {args.uploads} --fail-from {args.fail_from} "
        f"--latency-ms {args.latency_ms:g} --paragraphs {args.paragraphs} --repeat {args.repeat}"
    )
    print(f"\nCommand: `{command}`, on {datetime.now(UTC):%Y-%m-%d}. Machine: {machine()}.")
    print(f"Code: {code_version()}. Load average (1, 5, 15 min): {loads[0]} at start, "
          f"{loads[1]} at end.")  # fmt: skip
    print(
        "\n| primary | uploads | completed | embedding_failed | chunks | seconds | slowest job s "
        "| primary 503s | jobs via fallback | requests primary / fallback1 (jobs' usage = "
        "servers' logs) | tokens primary / fallback1 | checks |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|")
    for run in runs:

        def pair(name: str, at: int, source: dict[str, tuple[int, int]]) -> str:
            return f"{source.get(name, (0, 0))[at]:,}"

        requests = " / ".join(
            f"{pair(name, 0, run.usage)} = {pair(name, 0, run.served)}"
            for name in ("primary", "fallback1")
        )
        tokens = " / ".join(
            f"{pair(name, 1, run.usage)} = {pair(name, 1, run.served)}"
            for name in ("primary", "fallback1")
        )
        print(
            f"| {run.label} | {sum(run.statuses.values())} | {run.statuses.get('completed', 0)} "
            f"| {run.errors.get('embedding_failed', 0)} | {run.chunks:,} | {run.seconds:.1f} | "
            f"{run.slowest_job:.1f} | {run.primary_errors} | "
            f"{run.jobs_via_fallback} | {requests} | {tokens} | "
            f"{'; '.join(run.problems) or 'all exact'} |"
        )
    for run in runs:
        probes = ", ".join(f"{name} {count}" for name, count in run.probes.items())
        print(f"\n{run.label}: index usage {run.index_usage}; check probes: {probes}")
    healthy = [run.seconds for run in runs[0::2] if run.seconds]
    failing = [run.seconds for run in runs[1::2] if run.seconds]
    if healthy and failing:
        ratio = statistics.median(failing) / statistics.median(healthy)
        print(f"\nfailing / healthy wall time (medians): {ratio:.2f}×")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--uploads", type=int, default=200)
    parser.add_argument("--fail-from", type=int, default=50, help="the primary's first 503")
    parser.add_argument("--latency-ms", type=float, default=20.0, help="of both fake servers")
    parser.add_argument("--paragraphs", type=int, default=12, help="per document")
    parser.add_argument("--repeat", type=int, default=1, help="pairs of runs, alternating")
    args = parser.parse_args()
    loads = [", ".join(f"{load:.1f}" for load in os.getloadavg())]
    options = {"uploads": args.uploads, "paragraphs": args.paragraphs}
    latency = args.latency_ms / 1000
    runs = []
    for _ in range(args.repeat):
        runs.append(measure("healthy", latency=latency, fail_from=0, **options))
        failing = f"503 from request {args.fail_from}"
        runs.append(measure(failing, latency=latency, fail_from=args.fail_from, **options))
    loads.append(", ".join(f"{load:.1f}" for load in os.getloadavg()))
    report(runs, args, loads)
    return 0 if all(not run.problems for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
