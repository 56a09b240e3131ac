"""Sources, end to end in one process (the app's services, an embedded worker, the fake
embedding server, moto's S3 server and a local website on loopback):

- s3: the first run of a bucket of `--objects` small objects (objects/s, its jobs included);
  a re-run with nothing changed (uploads made, and its time beside a bare listing of the same
  bucket: the ratio says how much of a no-change run is the listing); 1% changed and 1%
  deleted (the counts must be exactly those).
- s3 at `--large-objects` (10,000): the same no-change re-run and 1%/1% run, with the first
  run's fingerprints written as a first run leaves them (its jobs are what the first row
  already measures, at a size this machine finishes in minutes).
- web: the first crawl of a site of `--pages` pages with no delay (pages/s, jobs included);
  the second crawl (pages answered 304, and its time).
- idle: what the scheduler costs a service that runs no source: one poll, timed over many.

    .venv/bin/python bench/bench_sources.py [--objects 2000] [--large-objects 10000] [--pages 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import machine
from _service_tools import code_version

from docingest.pipeline.sources import SourceRunner, source_store
from docingest.pipeline.sources.s3 import S3, S3Config
from docingest.workers.sources import SourceScheduler
from tests.support.embedding_server import FakeEmbeddingServer
from tests.support.redis_db import private_redis, unique_prefix
from tests.support.s3_server import S3Server, s3_server
from tests.support.settings import FAKE_DIMENSIONS, service_settings
from tests.support.sources import Deployment, deployment_with_sources
from tests.support.web_site import TestSite, page


def fill_bucket(s3: S3Server, bucket: str, count: int) -> None:
    s3.client.create_bucket(Bucket=bucket)
    for number in range(count):
        body = f"Object {number}: notes on budget {number % 97} and travel {number % 13}."
        s3.client.put_object(Bucket=bucket, Key=f"o/{number:06d}.txt", Body=body.encode())


def run(deployment: Deployment, index: str, name: str) -> tuple[dict[str, Any], float]:
    store = source_store(deployment.services)
    store.request_run(index, name, trigger="manual")
    runner = SourceRunner(deployment.services, submit=deployment.submit)
    started = time.perf_counter()
    assert runner.try_run(index, name)
    seconds = time.perf_counter() - started
    return store.runs(index, name, 1)[0].model_dump(mode="json"), seconds


def jobs_of(deployment: Deployment, index: str) -> int:
    keys = deployment.services.keys
    return int(deployment.services.redis.zcard(keys.index_jobs(index)))


def put(deployment: Deployment, index: str, name: str, body: dict[str, Any]) -> None:
    answer = deployment.client.put(f"/v1/indexes/{index}/sources/{name}", json=body)
    assert answer.status_code in (200, 201), answer.text


def change_one_percent(s3: S3Server, bucket: str, count: int) -> None:
    step = 100
    for number in range(0, count, step):
        key = f"o/{number:06d}.txt"
        s3.client.put_object(Bucket=bucket, Key=key, Body=f"Object {number}, changed.".encode())
    for number in range(1, count, step):
        s3.client.delete_object(Bucket=bucket, Key=f"o/{number:06d}.txt")


def bench_s3(deployment: Deployment, s3: S3Server, count: int) -> dict[str, Any]:
    fill_bucket(s3, "bench-first", count)
    put(deployment, "b-s3", "bucket", {"type": "s3", "config": s3.config("bench-first")})
    first, first_s = run(deployment, "b-s3", "bucket")
    jobs_after_first = jobs_of(deployment, "b-s3")
    again, again_s = run(deployment, "b-s3", "bucket")
    listing_s = bare_listing(deployment, s3, "bench-first")
    change_one_percent(s3, "bench-first", count)
    changed, changed_s = run(deployment, "b-s3", "bucket")
    return {
        "objects": count,
        "first_run": {
            "seconds": first_s,
            "objects_per_s": count / first_s,
            "counts": first["counts"],
        },
        "no_change": {
            "seconds": again_s,
            "uploads": jobs_of(deployment, "b-s3")
            - jobs_after_first
            - changed["counts"]["changed"],
            "counts": again["counts"],
            "bare_listing_seconds": listing_s,
            "run_over_listing": again_s / listing_s,
        },
        "one_percent": {"seconds": changed_s, "counts": changed["counts"]},
    }


def bare_listing(deployment: Deployment, s3: S3Server, bucket: str) -> float:
    settings = deployment.services.settings
    reader = S3.open(S3Config.model_validate(s3.config(bucket)), settings)
    started = time.perf_counter()
    try:
        listed = sum(1 for _ in reader.walk({}, lambda: Path("/nonexistent")))
    finally:
        reader.close()
    assert listed > 0
    return time.perf_counter() - started


def bench_s3_large(deployment: Deployment, s3: S3Server, count: int) -> dict[str, Any]:
    fill_bucket(s3, "bench-large", count)
    put(deployment, "b-large", "bucket", {"type": "s3", "config": s3.config("bench-large")})
    # What a completed first run leaves: each object's fingerprint (its documents are what
    # bench_s3's first run measures; here only the re-runs are timed).
    store = source_store(deployment.services)
    reader = S3.open(
        S3Config.model_validate(s3.config("bench-large")), deployment.services.settings
    )
    records: dict[Any, Any] = {
        found.item.document_id: json.dumps({"fp": found.item.fingerprint})
        for found in reader.walk({}, lambda: Path("/nonexistent"))
    }
    reader.close()
    deployment.services.redis.hset(store.of("b-large", "bucket").items, mapping=records)
    before = jobs_of(deployment, "b-large")
    again, again_s = run(deployment, "b-large", "bucket")
    uploads = jobs_of(deployment, "b-large") - before
    listing_s = bare_listing(deployment, s3, "bench-large")
    change_one_percent(s3, "bench-large", count)
    changed, changed_s = run(deployment, "b-large", "bucket")
    return {
        "objects": count,
        "no_change": {
            "seconds": again_s,
            "uploads": uploads,
            "counts": again["counts"],
            "bare_listing_seconds": listing_s,
            "run_over_listing": again_s / listing_s,
        },
        "one_percent": {
            "seconds": changed_s,
            "counts": changed["counts"],
            "jobs": jobs_of(deployment, "b-large") - before,
        },
    }


def bench_web(deployment: Deployment, pages: int) -> dict[str, Any]:
    with TestSite() as site:
        per_hub = 50
        hubs = [f"/hub{hub}.html" for hub in range(pages // per_hub)]
        site.pages["/"] = page("Home", *hubs)
        for hub_number, hub in enumerate(hubs):
            children = [f"/p{hub_number * per_hub + k}.html" for k in range(per_hub - 1)]
            site.pages[hub] = page(f"Hub {hub_number}", *children)
            for child in children:
                site.pages[child] = page(f"Page {child}", body=f"{child} is about alpaca {child}.")
        total = len(site.pages)
        config = {"start_urls": [site.url + "/"], "delay_seconds": 0, "max_pages": total + 10}
        put(deployment, "b-web", "site", {"type": "web", "config": config})
        first, first_s = run(deployment, "b-web", "site")
        second, second_s = run(deployment, "b-web", "site")
        not_modified = sum(site.not_modified.values())
    return {
        "pages": total,
        "first_run": {
            "seconds": first_s,
            "pages_per_s": total / first_s,
            "counts": first["counts"],
        },
        "second_run": {
            "seconds": second_s,
            "pages_per_s": total / second_s,
            "answered_304": not_modified,
            "counts": second["counts"],
        },
    }


def bench_idle(deployment: Deployment, polls: int = 5000) -> dict[str, Any]:
    scheduler = SourceScheduler(deployment.celery, deployment.services)
    for _ in range(100):
        scheduler.poll()
    started = time.perf_counter()
    cpu = time.process_time()
    for _ in range(polls):
        scheduler.poll()
    wall = (time.perf_counter() - started) / polls
    cpu_per = (time.process_time() - cpu) / polls
    interval = deployment.services.settings.source_poll_seconds
    return {
        "poll_wall_us": wall * 1e6,
        "poll_cpu_us": cpu_per * 1e6,
        "cpu_share_at_default_interval": cpu_per / interval,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--objects", type=int, default=2000)
    parser.add_argument("--large-objects", type=int, default=10_000)
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=2)
    args = parser.parse_args()
    prefix = unique_prefix("bench-sources")
    report: dict[str, Any] = {
        "machine": machine(),
        "commit": code_version(),
        "load_average_before": os.getloadavg(),
    }
    with (
        tempfile.TemporaryDirectory(prefix="bench-sources-") as data,
        FakeEmbeddingServer(dimensions=FAKE_DIMENSIONS) as fake,
        private_redis(prefix),
        s3_server() as s3,
    ):
        settings = service_settings(
            Path(data),
            prefix,
            fake,
            sources_allow_private=True,
            worker_concurrency=args.concurrency,
        )
        with deployment_with_sources(
            settings, name="bench-sources", concurrency=args.concurrency, scheduler=False
        ) as deployment:
            deployment.services.default_index_config()  # as `serve` does at start
            report["idle"] = bench_idle(deployment)
            report["s3"] = bench_s3(deployment, s3, args.objects)
            report["s3_large"] = bench_s3_large(deployment, s3, args.large_objects)
            report["web"] = bench_web(deployment, args.pages)
    report["load_average_after"] = os.getloadavg()
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
