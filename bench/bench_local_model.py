"""The local model in `docingest serve`: peak RSS, CPU per text, chunks/s, today beside ours.

Run: .venv/bin/python bench/bench_local_model.py [--baseline main] [--quick]

Both code versions run in one go, on the same documents: `--baseline` (a git ref, exported
with `git archive` to a temporary directory and put first on PYTHONPATH) and this checkout.
For each version, in child processes so that neither inherits the other's memory:

1. service: a real `docingest serve` (local model, production thread, heartbeat and
   housekeeping settings, the embedded store) gets every document at once, the 400-page IRS
   PDF and the largest DOCX first; two jobs run at a time (`worker_concurrency`). VmRSS of
   the serve process is sampled every 0.2 s until all have completed, and read again as each
   job completes (flat means the last reading is not above the first). CPU is that of the
   serve process and all its descendants (the fork servers and the children they reaped, in
   which uploads are parsed), from /proc (`tree_cpu_seconds`), from when the fork servers
   have warmed up until every job has ended. The texts the service embedded are counted by
   its own `/metrics` (`docingest_embedding_inputs_total`).
2. bare: `prepare_document` on each document (not timed), then one
   `LocalEmbedder.embed_documents(chunks)` call per document; CPU of that call alone. The
   vectors are kept, and the baseline's are compared with ours (largest absolute difference).
3. distinct: as bare, but over each document's distinct texts only (repeats dropped, first
   occurrences in order): what a service that embeds each distinct text of a document once
   embeds. Service CPU per distinct text against this run's is the per-distinct-text ratio;
   it is like for like only when the service embedded that many texts (the report says).
4. naive, once, with this checkout's embedder (the reference for both versions): for each
   document, `prepare_document`, then one `embed_documents([text])` call per chunk,
   sequentially, nothing stored (the loop bench_service.py compares the service with).

The embedders use every CPU of the process (`local_model_threads=0`), as `serve` does.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
WORKER_TREE = os.environ.get("BENCH_TREE")  # set in child processes: the code to measure
sys.path.insert(0, WORKER_TREE or str(REPO))
sys.path.insert(1, str(REPO / "bench"))

import httpx  # noqa: E402
import numpy as np  # noqa: E402
from _common import find_corpus, machine  # noqa: E402
from _service_tools import (  # noqa: E402
    RssSampler,
    embedding_counts,
    mb,
    rss_bytes,
    tree_cpu_seconds,
    upload_path,
    wait_until_quiet,
)

BIG = ("pdf/irs-irm-2.3.59-400p.pdf", "docx/doj-chapter13-trustee-handbook-872p.docx")
OTHERS = (  # one per format, from bench_service.py's THROUGHPUT
    "pdf/arxiv-1601.03642-thoma.pdf",
    "docx/portuguese-association-statutes.docx",
    "html/python311-tutorial-introduction.html",
    "markdown/ocrmypdf-cookbook.md",
    "txt/python311-library-csv.rst.txt",
)
PRODUCTION = (
    "heartbeat_interval_seconds",
    "heartbeat_timeout_seconds",
    "housekeeping_interval_seconds",
    "local_model_threads",
)


@dataclass(frozen=True)
class Version:
    name: str
    tree: Path


def export_tree(ref: str, into: Path) -> Path:
    """Write the files of `ref` (a git ref of this repository) under `into`."""
    into.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "archive", "--format=tar", ref], cwd=REPO, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def short_commit(ref: str) -> str:
    return subprocess.run(
        ["git", "rev-parse", "--short", ref], cwd=REPO, capture_output=True, text=True
    ).stdout.strip()


# --- child processes: bare and naive -------------------------------------------------------


def worker(mode: str, paths: list[Path], vectors_out: Path | None) -> dict[str, Any]:
    """Run in a child whose `sys.path` starts with the tree under test."""
    from docingest.pipeline.chunking import ChunkingSpec
    from docingest.pipeline.embedders.local import LocalEmbedder
    from docingest.pipeline.prepare import prepare_document
    from docingest.pipeline.settings import Settings

    with tempfile.TemporaryDirectory(prefix="docingest-bench-local-") as tmp:
        settings = Settings(data_dir=Path(tmp))
        embedder = LocalEmbedder.load(threads=settings.local_model_threads)
        embedder.embed_documents(["warm up"])
        cpu = wall = 0.0
        chunks, embedded, vectors = 0, 0, []
        for path in paths:
            started_cpu, started = time.process_time(), time.perf_counter()
            prepared = prepare_document(
                path.read_bytes(),
                filename=path.name,
                settings=settings,
                chunking=ChunkingSpec.from_settings(settings),
            )
            texts = [chunk.text for chunk in prepared.chunks]
            chunks += len(texts)
            if mode == "distinct":
                texts = list(dict.fromkeys(texts))
            if mode in ("bare", "distinct"):  # the model alone: preparing is not counted
                started_cpu, started = time.process_time(), time.perf_counter()
                vectors.append(embedder.embed_documents(texts))
            else:
                for text in texts:
                    embedder.embed_documents([text])
            cpu += time.process_time() - started_cpu
            wall += time.perf_counter() - started
            embedded += len(texts)
    if vectors_out is not None and vectors:
        np.save(vectors_out, np.concatenate(vectors))
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "chunks": chunks,
        "texts": embedded,
        "cpu": cpu,
        "seconds": wall,
        "peak": peak_kib * 1024,
    }


def run_worker(
    version: Version, mode: str, paths: list[Path], vectors_out: Path | None
) -> dict[str, Any]:
    command = [sys.executable, __file__, "--worker", mode, *map(str, paths)]
    if vectors_out is not None:
        command += ["--vectors-out", str(vectors_out)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCINGEST_")}
    env |= {"BENCH_TREE": str(version.tree), "PYTHONPATH": str(version.tree)}
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{mode} worker ({version.name}) failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"{version.name} {mode}: {result}", flush=True)
    return result


# --- the service ----------------------------------------------------------------------------


def follow(client: httpx.Client, pid: int, job_ids: list[str], timeout: float) -> dict[str, Any]:
    """Poll until every job has ended; RSS of `pid` as each completes, in completion order."""
    pending, ended, after_each = list(job_ids), {}, []
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        for job_id in list(pending):
            job = client.get(f"/v1/jobs/{job_id}").raise_for_status().json()
            if job["status"] in ("completed", "failed", "cancelled"):
                ended[job_id] = job
                after_each.append((job["document_id"], rss_bytes(pid)))
                pending.remove(job_id)
        time.sleep(0.5)
    if pending:
        raise RuntimeError(f"{len(pending)} jobs did not end within {timeout:.0f} s")
    failed = [job for job in ended.values() if job["status"] != "completed"]
    if failed:
        raise RuntimeError(f"jobs did not complete: {failed}")
    chunks = sum(job["result"]["chunks"] for job in ended.values())
    return {"chunks": chunks, "after_each": after_each}


def measure_service(version: Version, paths: list[Path], timeout: float) -> dict[str, Any]:
    from docingest.pipeline.settings import Settings
    from tests.support.docingest_service import ServiceEnv, running_serve

    defaults = Settings.model_fields
    extra = {f"DOCINGEST_{name.upper()}": str(defaults[name].default) for name in PRODUCTION}
    with tempfile.TemporaryDirectory(prefix="docingest-bench-local-serve-") as tmp:
        env = ServiceEnv(
            data_dir=Path(tmp) / "data",
            key_prefix=f"bench-{uuid.uuid4().hex[:10]}:",
            extra=extra | {"PYTHONPATH": str(version.tree)},
        )
        with (
            # the parsing child runs `python -m`, which puts the working directory first on
            # its path: from another checkout it would run that checkout's child, whose wire
            # format may differ (every job then failed as a crashed parser)
            contextlib.chdir(version.tree),
            running_serve(env) as process,
            httpx.Client(base_url=env.base_url, timeout=120) as client,
        ):
            pid = process.popen.pid
            with RssSampler(pid, env.base_url) as sampler:
                time.sleep(2.0)
                cpu = wait_until_quiet(pid)  # the fork servers have warmed up
                counts, started = embedding_counts(client), time.perf_counter()
                job_ids = [upload_path(client, "local", path) for path in paths]
                result = follow(client, pid, job_ids, timeout)
                result["seconds"] = time.perf_counter() - started
                result["cpu"] = tree_cpu_seconds(pid) - cpu
                result["texts"] = int(embedding_counts(client)["inputs"] - counts["inputs"])
    baseline = [rss for rss, _, _ in sampler.samples[:8]]
    result |= {
        "baseline": statistics.median(baseline),
        "peak": max(rss for rss, _, _ in sampler.samples),
        "tree_peak": max(tree for _, tree, _ in sampler.samples),
    }
    print(f"{version.name} service: {result}", flush=True)
    return result


# --- report ---------------------------------------------------------------------------------


def report(versions: list[Version], data: dict[str, Any], header: str) -> None:
    print(f"\n{header}\n")
    print(
        "| code | serve RSS baseline | peak | peak - baseline | serve + children peak | "
        "RSS as each job completed |"
    )
    print("|---|---:|---:|---:|---:|---|")
    for version in versions:
        row = data[version.name]["service"]
        steps = " → ".join(mb(rss) for _, rss in row["after_each"])
        print(
            f"| {version.name} | {mb(row['baseline'])} | **{mb(row['peak'])}** | "
            f"{mb(row['peak'] - row['baseline'])} | {mb(row['tree_peak'])} | {steps} |"
        )
    print(
        "\n| code | chunks | service s | service CPU ms/chunk | bare CPU ms/chunk | "
        "service / bare CPU | naive s | service / naive chunks/s | bare peak RSS |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for version in versions:
        row = data[version.name]
        service, bare, naive = row["service"], row["bare"], row["naive"]
        per_chunk = {
            key: 1000 * row[key]["cpu"] / row[key]["chunks"] for key in ("service", "bare")
        }
        speed = (service["chunks"] / service["seconds"]) / (naive["chunks"] / naive["seconds"])
        print(
            f"| {version.name} | {service['chunks']} | {service['seconds']:.1f} | "
            f"{per_chunk['service']:.0f} | {per_chunk['bare']:.0f} | "
            f"**{per_chunk['service'] / per_chunk['bare']:.2f}×** | {naive['seconds']:.1f} | "
            f"**{speed:.2f}×** | {mb(bare['peak'])} |"
        )
    report_distinct(versions, data)
    first, last = (data[version.name] for version in (versions[0], versions[-1]))
    ratio = (last["service"]["cpu"] / last["service"]["chunks"]) / (
        first["service"]["cpu"] / first["service"]["chunks"]
    )
    print(f"\nService CPU per chunk, {versions[-1].name} / {versions[0].name}: {ratio:.2f}×.")
    if "max_abs_difference" in data:
        print(f"Vectors, {versions[-1].name} against {versions[0].name}: largest absolute ")
        print(f"difference {data['max_abs_difference']:.2e} over {data['vectors']} vectors.")


def report_distinct(versions: list[Version], data: dict[str, Any]) -> None:
    """Per distinct text: the service's CPU over the bare model's on those texts alone."""
    print(
        "\n| code | distinct texts | texts the service embedded | service CPU ms/distinct "
        "text | bare CPU ms/distinct text | service / bare CPU per distinct text | bare CPU "
        "per text, distinct / all |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    like_for_like = []
    for version in versions:
        row = data[version.name]
        service, bare, distinct = row["service"], row["bare"], row["distinct"]
        per_text = 1000 * service["cpu"] / distinct["texts"]
        bare_per_text = 1000 * distinct["cpu"] / distinct["texts"]
        dearer = bare_per_text / (1000 * bare["cpu"] / bare["texts"])
        print(
            f"| {version.name} | {distinct['texts']} | {service['texts']} | {per_text:.0f} | "
            f"{bare_per_text:.0f} | **{per_text / bare_per_text:.2f}×** | {dearer:.2f}× |"
        )
        if service["texts"] == bare["texts"]:
            like_for_like.append(f"{version.name}, every chunk: the per-chunk ratio")
        elif service["texts"] == distinct["texts"]:
            like_for_like.append(f"{version.name}, its distinct texts: the per-distinct one")
        else:
            like_for_like.append(f"{version.name}, neither bare run's texts: neither ratio")
    print("\nTexts the service embedded (its /metrics), so the like-for-like ratio: ")
    print("; ".join(like_for_like) + ".")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", default="main", help="git ref of today's code")
    parser.add_argument("--quick", action="store_true", help="the two big documents only")
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--worker", choices=["bare", "distinct", "naive"], help=argparse.SUPPRESS)
    parser.add_argument("--vectors-out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("paths", nargs="*", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.paths, args.vectors_out)))
        return 0
    corpus = find_corpus()
    paths = [corpus / name for name in (BIG if args.quick else BIG + OTHERS)]
    load_start = ", ".join(f"{load:.1f}" for load in os.getloadavg())
    data: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="docingest-bench-local-") as tmp:
        versions = [
            Version(
                f"{args.baseline} ({short_commit(args.baseline)})",
                export_tree(args.baseline, Path(tmp) / "baseline"),
            ),
            Version(f"this tree ({short_commit('HEAD')})", REPO),
        ]
        for version in versions:
            data[version.name] = {"service": measure_service(version, paths, args.timeout)}
        for version in versions:
            out = Path(tmp) / f"{len(data)}-{uuid.uuid4().hex[:6]}.npy"
            data[version.name]["bare"] = run_worker(version, "bare", paths, out)
            data[version.name]["vectors_file"] = out
            data[version.name]["distinct"] = run_worker(version, "distinct", paths, None)
        naive = run_worker(versions[-1], "naive", paths, None)  # one reference for both
        for version in versions:
            data[version.name]["naive"] = naive
        old, new = (np.load(data[version.name].pop("vectors_file")) for version in versions)
        data["max_abs_difference"], data["vectors"] = float(np.abs(old - new).max()), len(new)
        load_end = ", ".join(f"{load:.1f}" for load in os.getloadavg())
        header = (
            f"Command: `python bench/bench_local_model.py --baseline {args.baseline}"
            f"{' --quick' if args.quick else ''}`, on {datetime.now(UTC):%Y-%m-%d}. "
            f"Machine: {machine()}. Load average (1, 5, 15 min) {load_start} at start, "
            f"{load_end} at end. Documents: {', '.join(path.name for path in paths)}."
        )
        report(versions, data, header)
    return 0


if __name__ == "__main__":
    sys.exit(main())
