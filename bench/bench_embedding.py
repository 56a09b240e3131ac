"""Embed corpus chunks through the OpenAI-compatible provider and the naive way, on a fake server.

Run: .venv/bin/python bench/bench_embedding.py [--latency-ms 100] [--sizes 1000 10000]
     [--runs 3] [--naive-limit 1000] [--write]

The fake server (tests/support/embedding_server.py, run as a subprocess so it does not share
our GIL) answers each request no sooner than `--latency-ms` after receiving it, whatever its
size, like a remote API whose cost is the round trip. Chunks are ~200-word windows of War and Peace,
cycling through the book.

- naive: one request per chunk, in sequence (`client.embeddings.create(input=[text])` in a
  loop, as old tutorial code does). Measured once on the first `--naive-limit` chunks and
  extrapolated linearly beyond them (it costs one round trip per chunk).
- provider: `OpenAICompatibleEmbedder` with the default settings (2,048 inputs and 300,000
  tokens per request, 4 requests in flight), model text-embedding-3-small (1,536 dims, exact
  cl100k token counts). Median of `--runs` runs.
- bound: ceil(requests / concurrency) x latency, with `requests` from the batch planner's real
  plan: the best any client can do with these limits, ignoring its own CPU time. "token
  counting" is the time the planner alone takes (tiktoken over every chunk), which the bound
  leaves out and no request can start without.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import openai
from pydantic import SecretStr

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from docingest.pipeline.embedders.base import COUNTERS  # noqa: E402
from docingest.pipeline.embedders.batching import plan_batches, token_counter  # noqa: E402
from docingest.pipeline.embedders.openai_compat import OpenAICompatibleEmbedder  # noqa: E402
from docingest.pipeline.settings import Settings  # noqa: E402

MODEL = "text-embedding-3-small"
BEGIN = "<!-- bench_embedding.py: begin -->"
END = "<!-- bench_embedding.py: end -->"


def find_corpus() -> Path:
    for candidate in (os.environ.get("DOCINGEST_CORPUS_DIR"), ROOT.parent / "shared" / "corpus"):
        if candidate and (Path(candidate) / "README.md").is_file():
            return Path(candidate)
    raise SystemExit("corpus not found; set DOCINGEST_CORPUS_DIR")


def load_chunks(count: int, words_per_chunk: int = 200) -> list[str]:
    text = (find_corpus() / "txt" / "gutenberg-war-and-peace.txt").read_text(encoding="utf-8")
    words = text.split()
    starts = range(0, len(words) - words_per_chunk, words_per_chunk)
    return [
        " ".join(words[starts[i % len(starts)] : starts[i % len(starts)] + words_per_chunk])
        for i in range(count)
    ]


def start_server(latency_ms: float) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "support" / "embedding_server.py"), "--port", "0"]
        + ["--latency-ms", str(latency_ms)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("listening on "):
        process.kill()
        raise SystemExit(f"the fake server did not start: {line!r}")
    return process, line.removeprefix("listening on ").strip()


def time_naive(base_url: str, chunks: list[str]) -> float:
    client = openai.OpenAI(api_key="sk-bench", base_url=base_url, max_retries=0)
    try:
        started = time.perf_counter()
        for text in chunks:
            client.embeddings.create(input=[text], model=MODEL)
        return time.perf_counter() - started
    finally:
        client.close()


def time_provider(settings: Settings, chunks: list[str]) -> tuple[float, int]:
    embedder = OpenAICompatibleEmbedder.from_settings(
        model=MODEL, dimensions=None, settings=settings
    )
    try:
        before = COUNTERS.snapshot()["requests"]
        started = time.perf_counter()
        vectors = embedder.embed_documents(chunks)
        elapsed = time.perf_counter() - started
        assert vectors.shape == (len(chunks), 1536)
        return elapsed, COUNTERS.snapshot()["requests"] - before
    finally:
        embedder.close()


def machine() -> str:
    cpu = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    return (
        f"{os.cpu_count()} CPUs ({cpu}), Python {platform.python_version()}, "
        f"load average at start {load}"
    )


def write_section(report: str) -> None:
    """Put the report between our markers in BENCHMARKS.md, leaving other sections alone."""
    path = ROOT / "BENCHMARKS.md"
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    block = f"{BEGIN}\n{report}\n{END}"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + block + rest.split(END, 1)[1]
    else:
        section = (
            "### OpenAI-compatible provider\n\n"
            f"{block}\n\n"
            "### Local model\n\n"
            "- all-MiniLM-L6-v2 (int8 ONNX), chunks/s: _to be added by the local-model "
            "benchmark_\n"
        )
        if "\n## Embedding\n" in f"\n{text}":
            head, rest = f"\n{text}".split("\n## Embedding\n", 1)
            text = f"{head}\n## Embedding\n\n{section}\n{rest.lstrip()}".lstrip("\n")
        else:
            text = text.rstrip("\n") + f"\n\n## Embedding\n\n{section}"
    path.write_text(text.rstrip("\n") + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--latency-ms", type=float, default=100.0)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--naive-limit", type=int, default=1000)
    parser.add_argument("--write", action="store_true", help="update BENCHMARKS.md")
    args = parser.parse_args()

    latency = args.latency_ms / 1000
    chunks = load_chunks(max(args.sizes))
    process, base_url = start_server(args.latency_ms)
    settings = Settings(openai_base_url=base_url, openai_api_key=SecretStr("sk-bench"))
    counter = token_counter(MODEL)
    header = (
        "| chunks | tokens/chunk | requests (plan) | lower bound | token counting "
        "| this provider | × bound | × (bound + counting) | naive, 1 request/chunk | speed-up |"
    )
    rows = [header, "|" + "---:|" * 10]
    met: list[str] = []
    try:
        time_provider(settings, chunks[:50])  # warm up: tiktoken, connections
        naive_count = min(args.naive_limit, max(args.sizes))
        naive_seconds = time_naive(base_url, chunks[:naive_count])
        per_chunk = naive_seconds / naive_count
        for size in args.sizes:
            part = chunks[:size]
            started = time.perf_counter()
            plan = plan_batches(
                part,
                counter=counter,
                max_batch=settings.embedding_max_batch,
                max_batch_tokens=settings.embedding_max_batch_tokens,
                max_input_tokens=8191,
            )
            counting = time.perf_counter() - started
            bound = math.ceil(len(plan) / settings.embedding_concurrency) * latency
            runs = [time_provider(settings, part) for _ in range(args.runs)]
            assert all(sent == len(plan) for _, sent in runs), (runs, len(plan))
            seconds = statistics.median(elapsed for elapsed, _ in runs)
            naive = per_chunk * size
            how = "measured" if size <= naive_count else f"extrapolated from {naive_count}"
            tokens = sum(batch.tokens for batch in plan) / size
            rows.append(
                f"| {size:,} | {tokens:.0f} | {len(plan)} | {bound:.2f} s | {counting:.2f} s "
                f"| {seconds:.2f} s | {seconds / bound:.2f} | {seconds / (bound + counting):.2f} "
                f"| {naive:.1f} s ({how}) | {naive / seconds:.0f}× |"
            )
            met.append(
                f"{size:,} chunks: {seconds / bound:.2f}× the bound "
                f"({'within' if seconds <= 1.3 * bound else 'NOT within'} 1.3×), "
                f"{naive / seconds:.0f}× faster than naive "
                f"({'≥' if naive / seconds >= 50 else 'NOT ≥'} 50×)"
            )
    finally:
        process.terminate()
        process.wait(timeout=10)

    command = "python bench/bench_embedding.py " + " ".join(sys.argv[1:])
    report = "\n".join(
        [
            f"Command: `{command.strip()}`, on {datetime.now(UTC):%Y-%m-%d}. Machine: {machine()}.",
            f"Fake server latency {args.latency_ms:g} ms per request; provider times are the "
            f"median of {args.runs} runs; {MODEL}, default settings (2,048 inputs and "
            "300,000 tokens per request, 4 in flight).",
            "",
            *rows,
            "",
            *(f"- {line}" for line in met),
            "",
            "The lower bound counts round trips only. The client also spends CPU on every "
            'chunk: exact cl100k token counting (the "token counting" column; the first '
            "request cannot leave before its last input is counted), and reading, JSON-parsing "
            "and base64-decoding ~8 MB of reply per 1,100 chunks. At 100 ms per request that "
            "CPU, not the network, sets the pace, so the 1.3×-of-bound target is out of reach "
            "on this machine; against a real API, where a 270k-token request takes seconds, "
            "counting overlaps the requests in flight. The naive loop pays one round trip per "
            "chunk.",
        ]
    )
    print(report)
    if args.write:
        write_section(report)


if __name__ == "__main__":
    main()
