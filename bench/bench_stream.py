"""Streaming and overlapped stages against the previous code, in one run: one worker ingesting
one big document.

For each document (the 2,415-page R reference manual; a 50 MB text, War and Peace repeated,
made here) and each latency of the fake OpenAI-compatible embedder (1536 dimensions), a fresh
worker process runs one job through `docingest.pipeline.jobs.runner.run_job`, exactly as a Celery
task does (real Redis, the embedded Edge store in a temporary data directory, the parsing child),
with the code of this tree's HEAD and with the baseline's (each a `git archive`; the baseline
is `--baseline`, default main's merge base). It reports the worker's peak RSS (`ru_maxrss`:
the worker alone, not the parsing child) and its growth over the pre-job peak, wall and CPU
time, and the per-stage times of `docingest_stage_duration_seconds`: where stages overlap,
their sum exceeds the wall time.

    .venv/bin/python bench/bench_stream.py [--latency-ms 10 100] [--repeat 1] [--only pdf]

Needs Redis on 127.0.0.1:6379 (DB 15, a private key prefix, removed afterwards).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
REDIS_URL = "redis://127.0.0.1:6379/15"
TEXT_MB = 50
STAGES = ("detecting", "extracting", "chunking", "embedding", "storing")


def make_text(corpus: Path, directory: Path, megabytes: int) -> Path:
    """War and Peace repeated to `megabytes` MB (each copy numbered)."""
    source = (corpus / "txt" / "gutenberg-war-and-peace.txt").read_text(encoding="utf-8")
    path = directory / f"war-and-peace-{megabytes}mb.txt"
    with path.open("w", encoding="utf-8") as out:
        copy = 0
        while out.tell() < megabytes * 10**6:
            copy += 1
            out.write(f"\n\nCopy {copy}.\n\n{source}")
    return path


def tree_at(ref: str, directory: Path, name: str) -> Path:
    """The code at `ref`, unpacked (no checkout, no worktree)."""
    tree = directory / name
    tree.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", ref], check=True, capture_output=True
    )
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    return tree


def run_worker(
    tree: Path, document: Path, base_url: str, work: Path, *, trace: bool = False
) -> dict[str, Any]:
    """One job in a fresh worker process running the code of `tree`; with `trace`, under
    tracemalloc (slower), to count the Python heap apart from the store's native memory."""
    env = {**os.environ, "PYTHONPATH": str(tree), "BENCH_TRACEMALLOC": "1" if trace else ""}
    command = [sys.executable, str(Path(__file__).resolve()), "--driver", str(document)]
    command += ["--base-url", base_url, "--work", str(work)]
    done = subprocess.run(command, cwd=tree, env=env, check=True, capture_output=True, text=True)
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


class MemorySampler:
    """Peaks of this process's anonymous and file-backed RSS (/proc/self/status), sampled
    every 0.1 s: the store's memory-mapped segment files are file-backed, the pipeline's
    chunks and vectors anonymous."""

    def __init__(self) -> None:
        import threading

        self.peaks = {"RssAnon": 0, "RssFile": 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            for row in Path("/proc/self/status").read_text().splitlines():
                name, _, value = row.partition(":")
                if name in self.peaks:
                    self.peaks[name] = max(self.peaks[name], int(value.split()[0]) * 1024)

    def stop(self) -> dict[str, int]:
        self._stop.set()
        self._thread.join()
        return self.peaks


def drive(document: Path, base_url: str, work: Path) -> None:
    """The worker side: run one ingest job with the code on PYTHONPATH; print JSON."""
    import resource
    import time
    import uuid

    from docingest import pipeline
    from docingest.pipeline import metrics
    from docingest.pipeline.ingest.runner import run_job
    from docingest.pipeline.jobs.state import JobSpec
    from docingest.pipeline.services import Services
    from docingest.pipeline.settings import Settings

    prefix = f"bench-stream-{uuid.uuid4().hex[:8]}:"
    values: dict[str, Any] = {
        "data_dir": work,
        "redis_url": REDIS_URL,
        "redis_key_prefix": prefix,
        "embedding_provider": "openai",
        "embedding_model": "text-embedding-3-small",
        "openai_base_url": base_url,
        "openai_api_key": "sk-bench",
        "max_extracted_chars": 10**9,  # 50 MB of text is at the default limit of 50 M chars
    }
    settings = Settings(**values)
    services = Services(settings, owns_store=True)
    services.ensure_index("bench")
    job_id = uuid.uuid4().hex
    staged = services.staged_path(job_id)
    staged.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(document, staged)
    spec = JobSpec(
        job_id=job_id,
        index="bench",
        document_id=document.name,
        filename=document.name,
        staged_name=job_id,
        size_bytes=document.stat().st_size,
        content_sha256=None,
        content_type=None,
        metadata={},
        force=False,
    )
    services.jobs.create(spec)
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    cpu_before = time.process_time()
    started = time.perf_counter()
    sampler = MemorySampler()
    trace = bool(os.environ.get("BENCH_TRACEMALLOC"))
    if trace:
        import tracemalloc

        tracemalloc.start()
    outcome = run_job(services, job_id)
    memory = sampler.stop()
    python_peak = tracemalloc.get_traced_memory()[1] if trace else 0
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu_before
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    stages = {
        sample.labels["stage"]: sample.value
        for metric in metrics.STAGE_SECONDS.collect()
        for sample in metric.samples
        if sample.name.endswith("_sum")
    }
    result = services.jobs.get(job_id).result or {}
    for key in services.redis.scan_iter(f"{prefix}*"):
        services.redis.delete(key)
    services.close()
    report = {
        "code": str(Path(pipeline.__file__).parents[2]),
        "outcome": outcome,
        "chunks": result.get("chunks"),
        "wall": wall,
        "cpu": cpu,
        "peak_rss": peak,
        "peak_before": peak_before,
        "stages": stages,
        "peak_anon": memory["RssAnon"],
        "peak_file": memory["RssFile"],
        "document": document.name,
        "python_peak": python_peak,
    }
    with Path(tempfile.gettempdir(), "bench-stream-runs.jsonl").open("a") as raw:
        raw.write(json.dumps(report) + "\n")
    sys.stdout.write(json.dumps(report) + "\n")


def summary(runs: list[dict[str, Any]]) -> dict[str, float]:
    """Medians over the repeats."""
    out = {
        key: statistics.median(run[key] for run in runs)
        for key in ("wall", "cpu", "peak_rss", "peak_before", "peak_anon", "peak_file")
    }
    out["python_peak"] = statistics.median(run.get("python_peak", 0) for run in runs)
    for stage in STAGES:
        out[stage] = statistics.median(run["stages"].get(stage, 0.0) for run in runs)
    return out


def growth(row: dict[str, float]) -> float:
    """MiB the job added to the worker's peak RSS."""
    return (row["peak_rss"] - row["peak_before"]) / 2**20


def line(label: str, row: dict[str, float]) -> str:
    stage_sum = sum(row[stage] for stage in STAGES)
    embed_store = row["embedding"] + row["storing"]
    stages = " ".join(f"{stage[:5]} {row[stage]:.1f}" for stage in STAGES)
    return (
        f"{label:9} wall {row['wall']:6.1f} s  cpu {row['cpu']:6.1f} s  "
        f"peak RSS {row['peak_rss'] / 2**20:6.0f} MiB (+{growth(row):5.0f}; anon "
        f"{row['peak_anon'] / 2**20:5.0f}, file {row['peak_file'] / 2**20:5.0f}"
        + (f", Python heap {row['python_peak'] / 2**20:.0f}" if row["python_peak"] else "")
        + ")  "
        f"stages: {stages}  (sum {stage_sum:.1f}, embed+store {embed_store:.1f})"
    )


def ratios(
    name: str, latency: float, chunks: int, old: dict[str, float], new: dict[str, float]
) -> str:
    return (
        f"== {name}, {latency:.0f} ms, {chunks} chunks: streaming/baseline wall "
        f"{new['wall'] / old['wall']:.2f}x, cpu {new['cpu'] / old['cpu']:.2f}x, peak RSS "
        f"{new['peak_rss'] / old['peak_rss']:.2f}x, peak RSS growth "
        f"{growth(new) / max(1.0, growth(old)):.3f}x, peak anonymous RSS "
        f"{new['peak_anon'] / old['peak_anon']:.2f}x"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency-ms", type=float, nargs="+", default=[10.0, 100.0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--only", choices=["pdf", "text"])
    parser.add_argument("--text-mb", type=int, default=TEXT_MB)
    parser.add_argument(
        "--tracemalloc", action="store_true", help="also the Python heap's peak (slower)"
    )
    parser.add_argument("--baseline", help="git ref of the previous code (default: merge base)")
    parser.add_argument("--driver", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.driver:
        drive(args.driver, args.base_url, args.work)
        return 0

    sys.path.insert(0, str(REPO))  # not in the driver: it runs the tree on PYTHONPATH
    from _common import find_corpus, machine

    from tests.support.embedding_server import FakeEmbeddingServer

    ref = args.baseline or subprocess.run(
        ["git", "-C", str(REPO), "merge-base", "HEAD", "main"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    head = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    print(f"machine: {machine()}; this tree {head}, baseline {ref[:10]}")
    print(f"load at start: {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="bench-stream-") as scratch:
        scratch_dir = Path(scratch)
        trees = {
            "baseline": tree_at(ref, scratch_dir, "baseline"),
            "streaming": tree_at("HEAD", scratch_dir, "streaming"),  # committed code only
        }
        documents = {"pdf": find_corpus() / "pdf" / "R-4.2.2-refman.pdf"}
        if args.only != "pdf":
            documents["text"] = make_text(find_corpus(), scratch_dir, args.text_mb)
        if args.only == "text":
            del documents["pdf"]
        for latency in args.latency_ms:
            with FakeEmbeddingServer(latency=latency / 1000) as server:
                for name, document in documents.items():
                    rows = {}
                    for label, tree in trees.items():
                        runs = []
                        for _ in range(args.repeat):
                            work = Path(tempfile.mkdtemp(dir=scratch_dir))
                            base_url = server.base_url
                            run = run_worker(tree, document, base_url, work, trace=args.tracemalloc)
                            runs.append(run)
                            shutil.rmtree(work, ignore_errors=True)
                            assert runs[-1]["outcome"] == "completed", runs[-1]
                        rows[label] = summary(runs)
                        chunks = runs[-1]["chunks"]
                        print(line(label, rows[label]), flush=True)
                    old, new = rows["baseline"], rows["streaming"]
                    print(ratios(name, latency, chunks, old, new), flush=True)
    print(f"load at end: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
