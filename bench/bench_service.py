"""The running service, end to end: time-to-202 under load, a 50 MB upload, throughput, RSS.

Run: .venv/bin/python bench/bench_service.py [--uploads 200] [--clients 20] [--quick]

Starts a real `docingest serve` (API and in-process Celery worker, local model, the embedded
Qdrant Edge store) on a free port with its own data directory and Redis key prefix on DB 15,
as the end-to-end tests do (tests/support/docingest_service.py), but with the production heartbeat,
housekeeping and model-thread settings. Then, in one run:

1. a 50 MB plain-text upload (corpus text repeated) on an idle worker: time-to-202, then the
   job is cancelled and waited for.
2. RSS: ingest one large PDF on an idle worker, sampling every 0.2 s the VmRSS of the serve
   process, of it with its children (uploads are parsed in a child process unless
   `isolate_extraction` is off) and the job's stage; baseline is the median of 2 s of samples
   before the upload.
3. time-to-202 under load: start big PDFs whose extraction keeps the worker busy, then send
   `--uploads` small real files from `--clients` concurrent clients (one connection each),
   timing each upload until its 202; then the 50 MB upload again, cancelled right after its
   202 (queued behind the small ones). The big PDFs' jobs are cancelled too, and every job is
   polled until it ends: a job that vanishes (404) is lost, one not ended by `--timeout` is
   stuck, and either makes the exit status 1.
4. throughput: a fixed mix of corpus documents (PDF, DOCX, HTML, Markdown, text) uploaded at
   once into an empty index on an idle worker, timed from the first upload until all have
   completed; chunks from the jobs' results, CPU time from /proc: the serve process and every
   descendant with the children each reaped (`tree_cpu_seconds`: the parsing grandchildren
   are reaped by the fork servers, never by serve).
5. naive, after the service has stopped: the same documents in this process, one after the
   other, `prepare_document` then one `embed_documents([text])` call per chunk on the local
   model (no storing, which favours it).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from redis import Redis, RedisError

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from _common import find_corpus, machine  # noqa: E402
from _service_tools import (  # noqa: E402
    Outcome,
    RssSampler,
    code_version,
    mb,
    ms,
    percentile,
    settle,
    timed,
    tree_cpu_seconds,
    upload,
    upload_path,
    wait_for_status,
    wait_until_quiet,
)

from docingest.pipeline.chunking import ChunkingSpec  # noqa: E402
from docingest.pipeline.embedders.local import LocalEmbedder  # noqa: E402
from docingest.pipeline.prepare import prepare_document  # noqa: E402
from docingest.pipeline.settings import Settings  # noqa: E402
from tests.support.docingest_service import ServiceEnv, running_serve  # noqa: E402
from tests.support.redis_db import TEST_REDIS_URL  # noqa: E402

SMALL = (  # 1 to 3 chunks each, every format, all of them ingest cleanly
    "docx/complex-numbered-lists.docx",
    "docx/header-footer-unicode.docx",
    "docx/tika-sample-word-document.docx",
    "html/paulgraham-how-to-get-new-ideas.html",
    "html/shift_jis-no-charset-declared.html",
    "html/xinhuanet-hebei-gb2312.html",
    "markdown/umlauts-non-utf8.md",
    "pdf/jo-miyazawa-japanese-vertical.pdf",
    "txt/cp1251-russian.txt",
    "txt/cp1252-dutch-anna-karenina.txt",
    "txt/latin1-finnish-sibelius.txt",
    "txt/utf16le-bom-subtitles.txt",
)
THROUGHPUT = (  # two per format, 404 chunks at the default 1,000 characters
    "pdf/federal-register-2020-17221.pdf",
    "pdf/arxiv-1601.03642-thoma.pdf",
    "docx/debian-reference-ch04-libreoffice.docx",
    "docx/portuguese-association-statutes.docx",
    "html/wikipedia-duck.html",
    "html/python311-tutorial-introduction.html",
    "markdown/llm-usage.md",
    "markdown/ocrmypdf-cookbook.md",
    "txt/wikipedia-iwan-roberts-norwich.txt",
    "txt/python311-library-csv.rst.txt",
)
THROUGHPUT_QUICK = THROUGHPUT[1::2]
BACKGROUND = ("pdf/gnuplot-5.4-manual.pdf", "pdf/debian-reference.en.pdf")
BACKGROUND_QUICK = ("pdf/irs-irm-2.3.59-400p.pdf",)
RSS_PDF = "pdf/irs-irm-2.3.59-400p.pdf"  # 400 pages; R-4.2.2-refman (2,415) takes far longer
RSS_PDF_QUICK = "pdf/federal-register-2020-17221.pdf"
BIG_BYTES = 50 * 1024 * 1024
PRODUCTION = (  # the tests shorten these to run fast; a benchmark keeps the defaults
    "heartbeat_interval_seconds",
    "heartbeat_timeout_seconds",
    "housekeeping_interval_seconds",
    "local_model_threads",
)


def big_text(corpus: Path) -> bytes:
    """50 MB of War and Peace, repeated."""
    text = (corpus / "txt" / "gutenberg-war-and-peace.txt").read_bytes()
    return (text * (BIG_BYTES // len(text) + 1))[:BIG_BYTES]


def upload_big(
    client: httpx.Client, data: bytes, *, reps: int, tag: str
) -> tuple[list[float], list[str]]:
    """Upload `data` `reps` times, cancelling each job right after its 202."""
    seconds, job_ids = [], []
    for rep in range(reps):
        elapsed, response = upload(
            client, "big", data, filename="war-and-peace-x17.txt", document_id=f"{tag}-{rep}"
        )
        if response.status_code != 202:
            raise RuntimeError(f"the 50 MB upload answered {response.status_code}")
        seconds.append(elapsed)
        job_ids.append(response.json()["job_id"])
        client.delete(f"/v1/jobs/{job_ids[-1]}").raise_for_status()
    return seconds, job_ids


def measure_rss(client: httpx.Client, pid: int, pdf: Path, *, timeout: float) -> dict[str, Any]:
    """Ingest `pdf` on an idle worker, sampling RSS (serve, and serve with its children)."""
    started = time.perf_counter()
    with RssSampler(pid, str(client.base_url)) as sampler:
        time.sleep(2.0)
        sampler.job_id = upload_path(client, "rss", pdf)
        outcome = settle(client, [sampler.job_id], index="rss", timeout=timeout)
    peaks, tree_peaks = sampler.peaks(), sampler.peaks(tree=True)
    before = [(rss, tree) for rss, tree, stage in sampler.samples if stage == "before upload"]
    job = next(iter(outcome.jobs.values()), {})
    return {
        "pdf": pdf.name,
        "baseline": statistics.median(rss for rss, _ in before),
        "peak": max(peaks.values()),
        "peaks": peaks,
        "tree_baseline": statistics.median(tree for _, tree in before),
        "tree_peak": max(tree_peaks.values()),
        "tree_peaks": tree_peaks,
        "samples": len(sampler.samples),
        "seconds": time.perf_counter() - started - 2.0,
        "outcome": outcome,
        "result": job.get("result") or {},
    }


def measure_uploads(
    base_url: str,
    corpus: Path,
    *,
    uploads: int,
    clients: int,
    background: tuple[str, ...],
    big: bytes,
    big_reps: int,
    timeout: float,
) -> dict[str, Any]:
    """Time-to-202 of small uploads, then of a 50 MB one, while the worker extracts big PDFs."""
    small = [((corpus / name).name, (corpus / name).read_bytes()) for name in SMALL]
    with httpx.Client(base_url=base_url, timeout=120) as client:
        background_ids = [upload_path(client, "background", corpus / name) for name in background]
        for job_id in background_ids:
            if not wait_for_status(client, job_id, "processing", timeout=120):
                raise RuntimeError(f"background job {job_id} never started")

        local = threading.local()
        opened: list[httpx.Client] = []

        def one(i: int) -> tuple[float, int, str | None]:
            if not hasattr(local, "client"):  # one connection per client thread
                local.client = httpx.Client(base_url=base_url, timeout=120)
                opened.append(local.client)
            name, data = small[i % len(small)]
            seconds, response = upload(
                local.client, "busy", data, filename=name, document_id=f"{i:04d}-{name}"
            )
            job_id = response.json()["job_id"] if response.status_code == 202 else None
            return seconds, response.status_code, job_id

        started = time.perf_counter()
        with ThreadPoolExecutor(clients) as pool:
            results = list(pool.map(one, range(uploads)))
        burst = time.perf_counter() - started
        for each in opened:
            each.close()
        still_busy = sum(
            client.get(f"/v1/jobs/{job_id}").json()["status"] == "processing"
            for job_id in background_ids
        )
        big_seconds, big_ids = upload_big(client, big, reps=big_reps, tag="busy")
        for job_id in background_ids:
            client.delete(f"/v1/jobs/{job_id}")
        job_ids = [job_id for _, _, job_id in results if job_id]
        return {
            "latencies": [seconds for seconds, _, _ in results],
            "not_202": sum(status != 202 for _, status, _ in results),
            "burst": burst,
            "still_busy": still_busy,
            "background": len(background_ids),
            "big_seconds": big_seconds,
            "outcome": settle(client, job_ids, index="busy", timeout=timeout),
            "big_outcome": settle(client, big_ids, index="big", timeout=timeout),
            "background_outcome": settle(
                client, background_ids, index="background", timeout=timeout
            ),
        }


def measure_throughput(
    client: httpx.Client, pid: int, paths: list[Path], *, timeout: float
) -> dict[str, Any]:
    """Upload `paths` at once into an empty index; time until every job has ended."""
    cpu = wait_until_quiet(pid)  # e.g. a fork server replaced after a cancel, warming up
    started = time.perf_counter()
    job_ids = [upload_path(client, "throughput", path) for path in paths]
    outcome = settle(client, job_ids, index="throughput", timeout=timeout)
    seconds = time.perf_counter() - started
    chunks = sum(job["result"]["chunks"] for job in outcome.jobs.values() if job["result"])
    return {
        "docs": outcome.statuses.get("completed", 0),
        "chunks": chunks,
        "seconds": seconds,
        "cpu": tree_cpu_seconds(pid) - cpu,
        "outcome": outcome,
    }


def measure_naive(paths: list[Path], settings: Settings) -> dict[str, Any]:
    """Prepare each document, then embed its chunks with one `embed_documents` call each."""
    embedder = LocalEmbedder.load(threads=settings.local_model_threads)
    embedder.embed_documents(["warm up"])
    cpu, started = time.process_time(), time.perf_counter()
    chunks = 0
    for path in paths:
        prepared = prepare_document(
            path.read_bytes(),
            filename=path.name,
            settings=settings,
            chunking=ChunkingSpec.from_settings(settings),
        )
        for chunk in prepared.chunks:
            embedder.embed_documents([chunk.text])
        chunks += len(prepared.chunks)
    return {
        "docs": len(paths),
        "chunks": chunks,
        "seconds": time.perf_counter() - started,
        "cpu": time.process_time() - cpu,
    }


def report(args: argparse.Namespace, data: dict[str, Any], loads: list[str]) -> None:
    up, rss, service, naive = data["uploads"], data["rss"], data["service"], data["naive"]
    latencies = [seconds * 1000 for seconds in up["latencies"]]
    command = "python bench/bench_service.py" + (" --quick" if args.quick else "")
    command += f" --uploads {args.uploads} --clients {args.clients}"
    print(f"\nCommand: `{command}`, on {datetime.now(UTC):%Y-%m-%d}. Machine: {machine()}.")
    print(
        f"Code: {data['code']}. Load average (1, 5, 15 min): {loads[0]} at start, "
        f"{loads[1]} at end."
    )
    print("Phase times: " + ", ".join(f"{k} {v:.0f} s" for k, v in data["phases"].items()))
    print("\n| measure | value |\n|---|---|")
    print(
        f"| time-to-202, {len(latencies)} small uploads from {args.clients} clients, "
        f"{up['background']} big PDF(s) extracting ({up['still_busy']} still at the end) | "
        f"p50 {percentile(latencies, 0.5):.0f} ms, p99 {percentile(latencies, 0.99):.0f} ms, "
        f"max {max(latencies):.0f} ms; all sent in {up['burst']:.1f} s; {up['not_202']} not 202 |"
    )
    runs = up["outcome"].run_seconds()
    print(
        f"| their jobs | {up['outcome'].line()}; all ended {up['outcome'].span():.0f} s after "
        f"the first was created; run time per job p50 {percentile(runs, 0.5):.1f} s, "
        f"p90 {percentile(runs, 0.9):.1f} s |"
    )
    print(f"| time-to-202, 50 MB text, idle worker | {ms(data['idle_big'])} |")
    print(f"| time-to-202, 50 MB text, busy worker | {ms(up['big_seconds'])} |")
    print(
        f"| 50 MB jobs (cancelled after the 202) | {data['big_outcome'].line()} (idle); "
        f"{up['big_outcome'].line()} (busy) |"
    )
    print(f"| background jobs (cancelled after the uploads) | {up['background_outcome'].line()} |")
    result = rss["result"]
    for label, key in (("serve process", ""), ("serve + its children", "tree_")):
        base, peak = rss[f"{key}baseline"], rss[f"{key}peak"]
        stages = ", ".join(f"{stage} {mb(value)}" for stage, value in rss[f"{key}peaks"].items())
        print(
            f"| RSS of the {label}, ingesting {rss['pdf']} ({result.get('pages')} pages, "
            f"{result.get('chunks')} chunks, {rss['seconds']:.0f} s) | baseline {mb(base)}, "
            f"peak {mb(peak)}, peak - baseline {mb(peak - base)}; peak by stage: {stages} |"
        )
    print(f"| RSS job ({rss['samples']} samples) | {rss['outcome'].line()} |")
    print(
        "\n| throughput | docs | chunks | seconds | docs/s | chunks/s | CPU ms/chunk | CPUs used |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for label, row in (("service (upload → completed)", service), ("naive", naive)):
        print(
            f"| {label} | {row['docs']} | {row['chunks']} | {row['seconds']:.1f} | "
            f"{row['docs'] / row['seconds']:.2f} | {row['chunks'] / row['seconds']:.2f} | "
            f"{1000 * row['cpu'] / row['chunks']:.0f} | {row['cpu'] / row['seconds']:.2f} |"
        )
    speed = (service["chunks"] / service["seconds"]) / (naive["chunks"] / naive["seconds"])
    cpu = (naive["cpu"] / naive["chunks"]) / (service["cpu"] / service["chunks"])
    print(
        f"\nService / naive: {speed:.2f}× the chunks/s; naive CPU per chunk / service's: "
        f"{cpu:.2f}×. Service jobs: {service['outcome'].line()}."
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--uploads", type=int, help="small uploads (default 200, quick 40)")
    parser.add_argument("--clients", type=int, default=20, help="concurrent upload clients")
    parser.add_argument("--quick", action="store_true", help="smaller PDFs and document set")
    parser.add_argument("--rss-pdf", type=Path, help="the PDF whose ingestion RSS is sampled")
    parser.add_argument("--timeout", type=float, default=900, help="seconds before 'stuck'")
    args = parser.parse_args()
    args.uploads = args.uploads or (40 if args.quick else 200)
    corpus = find_corpus()
    rss_pdf = args.rss_pdf or corpus / (RSS_PDF_QUICK if args.quick else RSS_PDF)
    paths = [corpus / name for name in (THROUGHPUT_QUICK if args.quick else THROUGHPUT)]
    big, reps = big_text(corpus), 1 if args.quick else 3
    loads = [", ".join(f"{load:.1f}" for load in os.getloadavg())]
    data: dict[str, Any] = {"phases": {}, "code": code_version()}
    defaults = Settings.model_fields
    phases = data["phases"]
    with tempfile.TemporaryDirectory(prefix="docingest-bench-service-") as tmp:
        env = ServiceEnv(
            data_dir=Path(tmp) / "data",
            key_prefix=f"bench-{uuid.uuid4().hex[:10]}:",
            extra={f"DOCINGEST_{name.upper()}": str(defaults[name].default) for name in PRODUCTION},
        )
        try:
            with (
                running_serve(env, purge=False) as process,
                httpx.Client(base_url=env.base_url, timeout=120) as client,
            ):
                pid = process.popen.pid
                print(f"serve pid {pid} on {env.base_url}, data in {env.data_dir}", flush=True)

                def idle_big() -> Outcome:
                    data["idle_big"], ids = upload_big(client, big, reps=reps, tag="idle")
                    return settle(client, ids, index="big", timeout=args.timeout)

                data["big_outcome"] = timed(phases, "50 MB idle", idle_big)
                data["rss"] = timed(
                    phases, "RSS", lambda: measure_rss(client, pid, rss_pdf, timeout=args.timeout)
                )
                data["uploads"] = timed(
                    phases,
                    "uploads under load",
                    lambda: measure_uploads(
                        env.base_url,
                        corpus,
                        uploads=args.uploads,
                        clients=args.clients,
                        background=BACKGROUND_QUICK if args.quick else BACKGROUND,
                        big=big,
                        big_reps=reps,
                        timeout=args.timeout,
                    ),
                )
                data["service"] = timed(
                    phases,
                    "throughput",
                    lambda: measure_throughput(client, pid, paths, timeout=args.timeout),
                )
        finally:
            try:
                redis = Redis.from_url(TEST_REDIS_URL)
                keys = list(redis.scan_iter(match=f"{env.key_prefix}*", count=1000))
                if keys:
                    redis.delete(*keys)
            except RedisError as exc:  # a private Redis that `serve` started is gone with it
                print(f"Redis keys under {env.key_prefix} not removed: {exc}")
        settings = Settings(data_dir=Path(tmp) / "naive")
        data["naive"] = timed(phases, "naive", lambda: measure_naive(paths, settings))
    loads.append(", ".join(f"{load:.1f}" for load in os.getloadavg()))
    report(args, data, loads)
    up = data["uploads"]
    outcomes = [up["outcome"], up["big_outcome"], up["background_outcome"], data["big_outcome"]]
    outcomes += [data["rss"]["outcome"], data["service"]["outcome"]]
    if up["not_202"] or any(outcome.bad for outcome in outcomes):
        print("\nFAILED: some uploads were refused, or some jobs were lost or stuck.")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
