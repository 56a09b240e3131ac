"""Where one job's CPU goes, stage by stage and inside each stage, per chunk and per format.

Run: .venv/bin/python bench/bench_job_profile.py [--repeat 3] [--latency-ms 10] [--docs a,b]

Runs real ingest jobs in this process through `docingest.pipeline.jobs.runner.run_job`, exactly as a
worker's task does (claim, prepare, embed, write staged, publish, retire, job state in Redis
DB 15 under a private key prefix, the embedded Qdrant Edge store in a temporary directory),
with embeddings from the fake OpenAI-compatible server (tests/support/embedding_server.py,
text-embedding-3-small shaped) in its own process, so its CPU is not counted here. The Edge
store's background optimizer is off: its work would be charged to whichever run it overlaps.

Each document runs `--repeat` times in two ways, each time under a new document id (nothing
is reused):

- in-process (`isolate_extraction` off): the functions of each stage are watched by
  `_cpu_ledger.CpuLedger`, which charges the CPU time of the thread running them to a
  category, exclusive of watched calls inside; "other" is the process's CPU time minus
  the categories (the runner, Python overhead, threads waiting and waking).
- isolated (the production setting): prepared in a child forked from the warm fork server;
  CPU is this process's plus its children's (the fork server and the children it reaps).
  "isolation" is its CPU minus the in-process run's: forking, the result crossing the pipe
  as JSON and being rebuilt here. The JSON encoding and decoding of the result
  (`docingest.pipeline.isolation.wire`) are also timed alone.

Printed: a Markdown table of CPU microseconds per chunk by category (median over the runs),
one column per document, then the total per chunk, chunks, and wall time per job.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from _common import find_corpus, machine  # noqa: E402
from _cpu_ledger import CpuLedger  # noqa: E402
from _service_tools import code_version  # noqa: E402
from pydantic import SecretStr  # noqa: E402
from redis.lock import Lock  # noqa: E402

from docingest.pipeline import extract, prepare  # noqa: E402
from docingest.pipeline.chunking import ChunkingSpec, sections  # noqa: E402
from docingest.pipeline.embedders import batching, openai_compat  # noqa: E402
from docingest.pipeline.extract import pdf  # noqa: E402
from docingest.pipeline.indexing import run as indexing  # noqa: E402
from docingest.pipeline.indexing import window_vectors  # noqa: E402
from docingest.pipeline.ingest.runner import run_job  # noqa: E402
from docingest.pipeline.isolation import wire  # noqa: E402
from docingest.pipeline.jobs.state import JobSpec, JobStore  # noqa: E402
from docingest.pipeline.metadata import CONTENT_KEYS, TextTally  # noqa: E402
from docingest.pipeline.prepare import CHUNK_BATCH  # noqa: E402
from docingest.pipeline.services import Services  # noqa: E402
from docingest.pipeline.settings import Settings  # noqa: E402
from docingest.pipeline.store.fencing import DocumentFence  # noqa: E402
from docingest.pipeline.store.vector_store import VectorStore  # noqa: E402
from tests.support.redis_db import TEST_REDIS_URL, purge_keys  # noqa: E402

DOCS = (
    "txt/gutenberg-war-and-peace.txt",
    "pdf/federal-register-2020-17221.pdf",
    "docx/doj-chapter13-trustee-handbook-872p.docx",
    "html/python311-library-os.html",
)
INDEX = "profile"
FAKE_SERVER = REPO / "tests" / "support" / "embedding_server.py"

WATCHED: tuple[tuple[str, object, tuple[str, ...]], ...] = (
    ("detection", prepare, ("detect",)),
    # Extraction and chunking run as generators (the child streams), and a generator's call
    # returns at once: the functions watched are the ones doing the work inside them.
    ("extraction", extract, ("_extract_format",)),
    ("extraction", pdf, ("_open", "outline_headings", "page_labels", "_page_text",
                         "clean_lines", "page_blocks", "fill_metadata")),
    ("metadata (joined text, language)", prepare, ("file_metadata", "content_metadata")),
    ("metadata (joined text, language)", TextTally, ("add",)),
    ("chunking", sections._HeldBlocks, ("split",)),
    ("text hashes", window_vectors, ("text_hash",)),
    ("keyword (sparse) vectors", window_vectors, ("encode_document",)),
    ("embedding client: token counting", batching.TokenCounter, ("pieces",)),
    ("embedding client: request (JSON, HTTP)", openai_compat.OpenAICompatibleEmbedder,
     ("_attempt",)),
    ("embedding client: reply (base64, normalise)", openai_compat.OpenAICompatibleEmbedder,
     ("_parse",)),
    ("embedding client: batching, threads", openai_compat.OpenAICompatibleEmbedder,
     ("_embed",)),
    ("chunk records, vector reuse", window_vectors.WindowVectors, ("window",)),
    ("chunk records, vector reuse", indexing, ("chunk_records",)),
    ("store: write staged", VectorStore, ("write_chunks",)),
    ("store: publish", VectorStore, ("publish",)),
    ("store: retire", VectorStore, ("retire",)),
    ("store: reads (config, live version, reusable vectors)", VectorStore,
     ("index_config", "live_document", "stored_vectors", "count_points")),
    ("Redis: fence and store lock", DocumentFence, ("next_version", "is_current")),
    ("Redis: fence and store lock", Lock, ("acquire", "release", "extend")),
    ("Redis: job state, progress, heartbeats", JobStore,
     ("claim", "work", "update", "complete", "cancel_requested")),
)  # fmt: skip
"""(category, module or class, names): what the ledger charges to each category."""


@dataclass
class Runs:
    """The measurements of one document."""

    name: str
    chunks: int = 0
    by_category: list[dict[str, float]] = field(default_factory=list)  # per in-process run
    cpu: list[float] = field(default_factory=list)  # in-process runs
    wall: list[float] = field(default_factory=list)
    isolated_cpu: list[float] = field(default_factory=list)
    isolated_wall: list[float] = field(default_factory=list)
    wire: list[float] = field(default_factory=list)  # encode + decode of the result


def tree_cpu_seconds(pid: int, *, exclude: set[int]) -> float:
    """CPU seconds of `pid` and its descendants (with the children each has reaped)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry.name)] = int(fields[1])
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo += [child for child, parent in parents.items() if parent == current]
    ticks = 0
    for member in tree:
        if member in exclude:
            continue
        try:
            fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += sum(int(value) for value in fields[11:15])
    return ticks / os.sysconf("SC_CLK_TCK")


@contextmanager
def fake_embedder(latency_ms: float) -> Iterator[tuple[str, int]]:
    """The fake embedding server in its own process: (base URL, pid)."""
    process = subprocess.Popen(
        [sys.executable, str(FAKE_SERVER), "--port", "0", "--latency-ms", str(latency_ms)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("listening on "):
            raise RuntimeError(f"the fake embedding server said {line!r}")
        yield line.removeprefix("listening on ").strip(), process.pid
    finally:
        process.terminate()
        process.wait(10)


def run_one(services: Services, path: Path, *, exclude: set[int]) -> tuple[int, float, float]:
    """Stage `path` and run its job here; return (chunks, CPU seconds, wall seconds)."""
    job_id = uuid.uuid4().hex
    shutil.copyfile(path, services.staged_path(job_id))
    services.jobs.create(
        JobSpec(
            job_id=job_id,
            index=INDEX,
            document_id=f"{path.name}-{job_id[:8]}",
            filename=path.name,
            staged_name=job_id,
            size_bytes=path.stat().st_size,
            content_sha256=None,
            content_type=None,
            metadata={},
            force=False,
        )
    )
    cpu, started = tree_cpu_seconds(os.getpid(), exclude=exclude), time.perf_counter()
    outcome = run_job(services, job_id)
    wall = time.perf_counter() - started
    cpu = tree_cpu_seconds(os.getpid(), exclude=exclude) - cpu
    if outcome != "completed":
        raise RuntimeError(f"{path.name}: {outcome}")
    result = services.jobs.get(job_id).result or {}
    return int(result["chunks"]), cpu, wall


def wire_seconds(path: Path, settings: Settings) -> float:
    """CPU seconds to encode the prepared result as the child does (a header, batches of
    chunks, a summary) and decode it here."""
    prepared = prepare.prepare_document(
        path.read_bytes(),
        filename=path.name,
        settings=settings,
        chunking=ChunkingSpec.from_settings(settings),
    )
    chunks, metadata = prepared.chunks, prepared.metadata
    started = time.process_time()
    content = {key: metadata[key] for key in CONTENT_KEYS}
    lines = [
        wire.encode(wire.Header(metadata={k: v for k, v in metadata.items() if k not in content}))
    ]
    for start in range(0, len(chunks), CHUNK_BATCH):
        lines.append(wire.encode(wire.Chunks(chunks[start : start + CHUNK_BATCH])))
    lines.append(wire.encode(wire.Summary(metadata=content, chunk_count=len(chunks))))
    for line in lines:
        wire.decode(line)
    return time.process_time() - started


def profile(paths: list[Path], settings: Settings, *, repeat: int, fake_pid: int) -> list[Runs]:
    services = Services(settings, owns_store=True)
    exclude = {fake_pid}
    ledger = CpuLedger()
    try:
        services.ensure_index(INDEX)
        settings.staging_dir.mkdir(parents=True, exist_ok=True)
        isolated = settings.model_copy(update={"isolate_extraction": True})
        in_process = settings.model_copy(update={"isolate_extraction": False})
        all_runs = [Runs(path.name) for path in paths]
        for number in range(repeat + 1):  # the first round warms up and is not counted
            for path, runs in zip(paths, all_runs, strict=True):
                services.settings = isolated
                chunks, cpu, wall = run_one(services, path, exclude=exclude)
                services.settings = in_process
                for category, owner, names in WATCHED:
                    for name in names:
                        ledger.watch(category, owner, name)
                try:
                    ledger.reset()
                    _, own_cpu, own_wall = run_one(services, path, exclude=exclude)
                    by_category = ledger.reset()
                finally:
                    ledger.restore()
                if number == 0:
                    continue
                runs.chunks = chunks
                runs.isolated_cpu.append(cpu)
                runs.isolated_wall.append(wall)
                runs.cpu.append(own_cpu)
                runs.wall.append(own_wall)
                runs.by_category.append(by_category)
                runs.wire.append(wire_seconds(path, in_process))
        return all_runs
    finally:
        services.close()


def report(all_runs: list[Runs]) -> None:
    categories = list(dict.fromkeys(category for category, _, _ in WATCHED))
    print("\n| CPU µs per chunk | " + " | ".join(runs.name for runs in all_runs) + " |")
    print("|---|" + "---:|" * len(all_runs))

    def row(label: str, values: list[float]) -> None:
        print(f"| {label} | " + " | ".join(f"{value:,.0f}" for value in values) + " |")

    def per_chunk(runs: Runs, seconds: list[float]) -> float:
        return 1e6 * statistics.median(seconds) / runs.chunks

    for category in categories:
        charged = [[seconds.get(category, 0.0) for seconds in r.by_category] for r in all_runs]
        row(category, [per_chunk(r, each) for r, each in zip(all_runs, charged, strict=True)])
    others = [
        per_chunk(r, [cpu - sum(c.values()) for cpu, c in zip(r.cpu, r.by_category, strict=True)])
        for r in all_runs
    ]
    row("other (runner, threads, unwatched)", others)
    row("**total, in-process**", [per_chunk(r, r.cpu) for r in all_runs])
    row("isolation: fork, pipe, result rebuilt (isolated − in-process)",
        [per_chunk(r, r.isolated_cpu) - per_chunk(r, r.cpu) for r in all_runs])  # fmt: skip
    row("… of which the result's JSON encode + decode, timed alone",
        [per_chunk(r, r.wire) for r in all_runs])  # fmt: skip
    row("**total, isolated (production)**", [per_chunk(r, r.isolated_cpu) for r in all_runs])
    print("| chunks | " + " | ".join(f"{r.chunks:,}" for r in all_runs) + " |")
    print(
        "| wall s per job, isolated (in-process) | "
        + " | ".join(
            f"{statistics.median(r.isolated_wall):.2f} ({statistics.median(r.wall):.2f})"
            for r in all_runs
        )
        + " |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="counted runs per document")
    parser.add_argument("--latency-ms", type=float, default=10.0, help="of the fake embedder")
    parser.add_argument("--docs", help="comma-separated corpus paths (default: one per format)")
    args = parser.parse_args()
    corpus = find_corpus()
    paths = [corpus / name for name in (args.docs.split(",") if args.docs else DOCS)]
    loads = [", ".join(f"{load:.1f}" for load in os.getloadavg())]
    prefix = f"bench-profile-{uuid.uuid4().hex[:10]}:"
    with tempfile.TemporaryDirectory(prefix="docingest-bench-profile-") as tmp:
        with fake_embedder(args.latency_ms) as (base_url, fake_pid):
            settings = Settings(
                data_dir=Path(tmp),
                redis_url=TEST_REDIS_URL,
                redis_key_prefix=prefix,
                embedding_provider="openai",
                embedding_model="text-embedding-3-small",
                openai_base_url=base_url,
                openai_api_key=SecretStr("sk-bench"),
                edge_optimize_after_points=10**9,  # its background work would land in any run
            )
            try:
                all_runs = profile(paths, settings, repeat=args.repeat, fake_pid=fake_pid)
            finally:
                purge_keys(prefix)
    loads.append(", ".join(f"{load:.1f}" for load in os.getloadavg()))
    command = f"python bench/bench_job_profile.py --repeat {args.repeat} "
    command += f"--latency-ms {args.latency_ms:g}" + (f" --docs {args.docs}" if args.docs else "")
    print(f"\nCommand: `{command}`, on {datetime.now(UTC):%Y-%m-%d}. Machine: {machine()}.")
    print(f"Code: {code_version()}. Load average (1, 5, 15 min): {loads[0]} at start, "
          f"{loads[1]} at end. Medians of {args.repeat} runs per document.")  # fmt: skip
    report(all_runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
