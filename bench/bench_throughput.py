"""Chunks/s end to end through a real `docingest serve` with a fast embedder, beside the naive
per-chunk design and, optionally, another checkout of the code in the same run.

Run: .venv/bin/python bench/bench_throughput.py [--set text|mix | --files PATH ...]
     [--latency-ms 10] [--repeat 3] [--naive] [--baseline DIR]

For each code tree (`--baseline DIR` first, e.g. `git archive main | tar -x -C DIR`, then
this one), starts a real `docingest serve` (API and in-process worker, extraction isolated
in its fork server, the embedded Qdrant Edge store) with production settings, embedding
through the fake OpenAI-compatible server (tests/support/embedding_server.py, in this
process, text-embedding-3-small shaped, `--latency-ms` per request). Each repeat uploads
every document of the set at once into a new index and waits until all jobs have ended;
seconds are from the first job's creation to the last one's end (the jobs' own times), CPU is
that of the serve process and its descendants (the fork server and the children it reaps).

`--naive` then runs the per-chunk design in this process against the same fake server: each
document prepared in turn (`prepare_document`), then one embedding request per chunk, one
after the other, nothing stored (which favours it).

Sets: `text` is four text-heavy plain-text files (7,802 chunks at the default 1,000
characters); `mix` is three text files and three PDFs (a held-out-like mix).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx
import openai

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from _common import find_corpus, machine  # noqa: E402
from _service_tools import code_version, settle, tree_cpu_seconds, upload  # noqa: E402

from docingest.pipeline.chunking import ChunkingSpec  # noqa: E402
from docingest.pipeline.embedders.openai_compat import OpenAICompatibleEmbedder  # noqa: E402
from docingest.pipeline.prepare import prepare_document  # noqa: E402
from docingest.pipeline.settings import Settings  # noqa: E402
from tests.support.docingest_service import running_serve  # noqa: E402
from tests.support.embedding_server import FakeEmbeddingServer  # noqa: E402
from tests.support.load import EMBEDDING_MODEL, production_env  # noqa: E402

SETS = {
    "text": (
        "txt/gutenberg-war-and-peace.txt",
        "txt/jargon-file-4.4.7.txt",
        "txt/debian-reference.en.txt",
        "txt/rfc2616-http11.txt",
    ),
    "mix": (
        "txt/rfc2616-http11.txt",
        "txt/rfc6455-websocket.txt",
        "txt/uspto-patent-aps-5700647.txt",
        "pdf/federal-register-2020-17221.pdf",
        "pdf/arxiv-1601.03642-thoma.pdf",
        "pdf/dpr-karpukhin2020-2col.pdf",
    ),
}


THIS_TREE = "this tree"


@dataclass
class Measured:
    """One code tree's repeats."""

    label: str
    chunks: int = 0
    seconds: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def chunks_per_second(self) -> float:
        return self.chunks / statistics.median(self.seconds)

    def cpu_ms_per_chunk(self) -> float:
        return 1000 * statistics.median(self.cpu) / self.chunks


def measure_service(
    label: str, paths: list[Path], *, latency: float, repeat: int, code: Path | None
) -> Measured:
    """Upload `paths` at once, `repeat` times, to a serve running the code at `code`."""
    measured = Measured(label)
    with (
        tempfile.TemporaryDirectory(prefix="docingest-bench-throughput-") as tmp,
        FakeEmbeddingServer(latency=latency) as fake,
    ):
        env = production_env(Path(tmp) / "data", fake)
        if code is not None:
            env.extra["PYTHONPATH"] = str(code)
        with (
            contextlib.chdir(code or REPO),  # `python -m` children import from the cwd first
            running_serve(env) as process,
            httpx.Client(base_url=env.base_url, timeout=120) as client,
        ):
            for number in range(repeat):
                index = f"throughput-{number}"
                cpu = tree_cpu_seconds(process.popen.pid)
                job_ids = []
                for path in paths:
                    _, response = upload(
                        client, index, path.read_bytes(), filename=path.name, document_id=path.name
                    )
                    job_ids.append(str(response.raise_for_status().json()["job_id"]))
                outcome = settle(client, job_ids, index=index, timeout=1800)
                cpu = tree_cpu_seconds(process.popen.pid) - cpu
                if outcome.statuses.get("completed", 0) != len(paths) or outcome.bad:
                    measured.failures.append(outcome.line())
                    continue
                measured.chunks = sum(job["result"]["chunks"] for job in outcome.jobs.values())
                measured.seconds.append(outcome.span())
                measured.cpu.append(cpu)
    return measured


def measure_naive(paths: list[Path], *, latency: float) -> Measured:
    """Each document prepared, then one embedding request per chunk, sequentially."""
    measured = Measured("naive: one request per chunk, sequential")
    with tempfile.TemporaryDirectory() as tmp, FakeEmbeddingServer(latency=latency) as fake:
        settings = Settings(data_dir=Path(tmp))
        client = openai.OpenAI(api_key="sk-naive", base_url=fake.base_url, max_retries=0)
        embedder = OpenAICompatibleEmbedder(client=client, model=EMBEDDING_MODEL)
        cpu, started = time.process_time(), time.perf_counter()
        for path in paths:
            prepared = prepare_document(
                path.read_bytes(),
                filename=path.name,
                settings=settings,
                chunking=ChunkingSpec.from_settings(settings),
            )
            for chunk in prepared.chunks:
                embedder.embed_documents([chunk.text])
            measured.chunks += len(prepared.chunks)
        measured.seconds.append(time.perf_counter() - started)
        measured.cpu.append(time.process_time() - cpu)
        embedder.close()
    return measured


def report(rows: list[Measured], args: argparse.Namespace, loads: list[str]) -> None:
    chosen = f"--files {' '.join(map(str, args.files))}" if args.files else f"--set {args.set}"
    command = f"python bench/bench_throughput.py {chosen} --latency-ms {args.latency_ms:g}"
    command += f" --repeat {args.repeat}" + (" --naive" if args.naive else "")
    command += f" --baseline {args.baseline}" if args.baseline else ""
    print(f"\nCommand: `{command}`, on {datetime.now(UTC):%Y-%m-%d}. Machine: {machine()}.")
    print(f"Code: {code_version()}. Load average (1, 5, 15 min): {loads[0]} at start, "
          f"{loads[1]} at end.")  # fmt: skip
    print("\n| code | chunks | seconds (median) | runs | chunks/s | CPU ms/chunk | failures |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for row in rows:
        if not row.seconds:
            print(f"| {row.label} | | | 0 | | | {'; '.join(row.failures)} |")
            continue
        print(
            f"| {row.label} | {row.chunks:,} | {statistics.median(row.seconds):.1f} | "
            f"{len(row.seconds)} | {row.chunks_per_second():,.0f} | "
            f"{row.cpu_ms_per_chunk():.2f} | {'; '.join(row.failures) or 'none'} |"
        )
    ours = next(row for row in rows if row.label == THIS_TREE)
    for other in rows:
        if other is not ours and other.seconds and ours.seconds:
            print(
                f"\n{ours.label} / {other.label}: "
                f"{ours.chunks_per_second() / other.chunks_per_second():.2f}× the chunks/s, "
                f"{other.cpu_ms_per_chunk() / ours.cpu_ms_per_chunk():.2f}× less CPU per chunk"
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--set", choices=sorted(SETS), default="text")
    parser.add_argument("--latency-ms", type=float, default=10.0, help="of the fake embedder")
    parser.add_argument("--repeat", type=int, default=3, help="uploads of the set per service")
    parser.add_argument("--naive", action="store_true", help="also the per-chunk design")
    parser.add_argument("--baseline", type=Path, help="another checkout to run first")
    parser.add_argument(
        "--files",
        type=Path,
        nargs="+",
        help="these documents instead of the set (e.g. a held-out mix of your own)",
    )
    args = parser.parse_args()
    paths = args.files or [find_corpus() / name for name in SETS[args.set]]
    latency = args.latency_ms / 1000
    loads = [", ".join(f"{load:.1f}" for load in os.getloadavg())]
    rows = []
    if args.baseline:
        label = f"baseline ({args.baseline.name})"
        rows.append(
            measure_service(label, paths, latency=latency, repeat=args.repeat, code=args.baseline)
        )
    rows.append(measure_service(THIS_TREE, paths, latency=latency, repeat=args.repeat, code=None))
    if args.naive:
        rows.append(measure_naive(paths, latency=latency))
    loads.append(", ".join(f"{load:.1f}" for load in os.getloadavg()))
    report(rows, args, loads)
    return 0 if all(row.seconds and not row.failures for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
