"""Pathological shapes against the per-document bounds (issue 24), and the corpus's largest.

Run: `.venv/bin/python bench/bench_bounded.py [--reader-chunks-per-second 100] [--corpus]`.

Each shape is built here (`tests/support/bounded_files.py`: a CSV of 2 million columns, an
XLSX of a million rows, an e-mail of 50,000 MIME parts) and opened the way a job opens it
(`open_prepared`: the limited parsing child, default settings) by a reader that takes chunks
at `--reader-chunks-per-second`, as a worker embedding them would. Reported: the outcome,
the seconds from open to it, and the chunks the reader had taken by then (what a worker
would have embedded for nothing). `--corpus` also counts the chunks of every corpus file
over 200 KB with the default chunking (in this process, OCR off) and prints the largest.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import find_corpus, machine

from docingest.pipeline.chunking import ChunkingSpec
from docingest.pipeline.errors import IngestError
from docingest.pipeline.isolation.parent import open_prepared
from docingest.pipeline.prepare import Preparer, PrepareRequest
from docingest.pipeline.settings import Settings
from tests.support import bounded_files

SHAPES: dict[str, tuple[str, Callable[[], bytes]]] = {
    "csv, 2,000,000 columns": ("wide.csv", bounded_files.wide_csv),
    "xlsx, 1,000,000 rows": ("tall.xlsx", bounded_files.tall_xlsx),
    "eml, 50,000 parts": ("parts.eml", bounded_files.many_part_email),
}


def open_like_a_job(path: Path, *, rate: float) -> tuple[str, float, int]:
    settings = Settings()
    request = PrepareRequest(
        path, filename=path.name, chunking=ChunkingSpec.from_settings(settings)
    )
    started, taken = time.perf_counter(), 0
    try:
        with open_prepared(request, settings=settings) as prepared:
            for batch in prepared.batches():
                taken += len(batch)
                time.sleep(len(batch) / rate)
        outcome = "completed"
    except IngestError as exc:
        outcome = exc.code
    return outcome, time.perf_counter() - started, taken


def corpus_counts() -> None:
    settings = Settings(isolate_extraction=False, ocr="off")
    spec = ChunkingSpec.from_settings(settings)
    root = find_corpus()
    counts = []
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.stat().st_size < 200_000 or path.suffix in (".py", ".zip"):
            continue
        try:
            preparer = Preparer.start(
                path.read_bytes(), filename=path.name, settings=settings, chunking=spec
            )
            counts.append((sum(1 for _ in preparer.chunks()), path.relative_to(root)))
        except IngestError:
            continue
    for count, name in sorted(counts, reverse=True)[:5]:
        print(f"| {name} | {count:,} |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reader-chunks-per-second", type=float, default=100.0)
    parser.add_argument("--corpus", action="store_true")
    args = parser.parse_args()
    print(machine())
    if args.corpus:
        corpus_counts()
    with tempfile.TemporaryDirectory() as folder:
        for label, (name, build) in SHAPES.items():
            path = Path(folder) / name
            path.write_bytes(build())
            outcome, seconds, taken = open_like_a_job(path, rate=args.reader_chunks_per_second)
            size = path.stat().st_size / 2**20
            print(f"| {label} | {size:.1f} MB | {outcome} | {seconds:.1f} s | {taken:,} |")
            path.unlink()


if __name__ == "__main__":
    main()
