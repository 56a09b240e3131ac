"""Extraction speed per format on the shared corpus: pages/s (PDF) and MB/s (all formats).

Run: `.venv/bin/python bench/bench_extraction.py [--repeat 3] [--corpus ../shared/corpus]`.
Each file is detected and extracted `--repeat` times in this process; the median time is kept.
Files that fail on purpose (corrupt, encrypted, scanned) are timed too but counted apart.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from docingest.pipeline.detect import detect  # noqa: E402
from docingest.pipeline.errors import IngestError  # noqa: E402
from docingest.pipeline.extract import extract  # noqa: E402
from docingest.pipeline.settings import Settings  # noqa: E402

FOLDERS = ("pdf", "docx", "html", "markdown", "txt")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--corpus", type=Path, default=REPO.parent / "shared" / "corpus")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    settings = Settings(data_dir=Path("/tmp/docingest-bench"))

    totals: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    slowest: list[tuple[float, str]] = []
    for folder in FOLDERS:
        for path in sorted((args.corpus / folder).iterdir()):
            data = path.read_bytes()
            times = []
            pages = 0
            failed = False
            for _ in range(args.repeat):
                started = time.perf_counter()
                try:
                    detection = detect(data, filename=path.name)
                    document = extract(data, detection, settings=settings)
                    pages = document.pages or 0
                except IngestError:
                    failed = True
                times.append(time.perf_counter() - started)
            seconds = statistics.median(times)
            row = totals[folder]
            key = "failed_" if failed else ""
            row[key + "files"] += 1
            row[key + "bytes"] += len(data)
            row[key + "seconds"] += seconds
            row["pages"] += pages
            slowest.append((seconds, f"{folder}/{path.name}"))

    machine = platform.processor() or platform.machine()
    print(f"machine: {machine}, python {platform.python_version()}")
    print(f"median of {args.repeat} runs per file\n")
    print("| format | files | MB | seconds | MB/s | pages | pages/s | failing files (s) |")
    print("|---|---|---|---|---|---|---|---|")
    for folder in FOLDERS:
        row = totals[folder]
        mb = row["bytes"] / 1e6
        mbps = mb / row["seconds"] if row["seconds"] else 0.0
        pages = int(row["pages"])
        pps = f"{pages / row['seconds']:.1f}" if pages else "-"
        print(
            f"| {folder} | {int(row['files'])} | {mb:.1f} | {row['seconds']:.2f} | {mbps:.2f} | "
            f"{pages or '-'} | {pps} | {int(row['failed_files'])} ({row['failed_seconds']:.2f}) |"
        )
    print("\nslowest files:")
    for seconds, name in sorted(slowest, reverse=True)[:5]:
        print(f"  {seconds:7.2f} s  {name}")


if __name__ == "__main__":
    main()
