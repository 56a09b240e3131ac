"""Search latency without rerank: this checkout beside a previous commit, in one run.

Run: .venv/bin/python bench/bench_rerank_latency.py --base REV [--size 20000] [--queries 200]
         [--rounds 3]

`REV` (e.g. `main` before the rerank stage) is exported with `git archive` to a temporary
directory. Each round runs `bench/bench_search_latency.py`'s `run_size` (a fresh embedded
store of `size` synthetic chunks, the same seed for both, so the same data and queries) once
with the previous code and once with this checkout, alternately, each in its own process
(Qdrant Edge allows one process per directory, and two versions of a package cannot share
one). This checkout's searches go the way the API's do: with a `Reranking` (the server's
rerank settings, none set) passed to `search`, so the rerank stage's planning is inside the
measured time even though it re-ranks nothing. The table gives the median over rounds of each
mode's p50, their ratio new / previous, and the median of each round's ratio (a round's two
runs are next to each other in time, so they share the machine's load more closely).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[1] + "/bench")
import bench_search_latency as bench
try:
    from docingest.pipeline.search import Reranking
    from docingest.pipeline.rerank import RerankDefaults
    from docingest.pipeline.settings import Settings
except ImportError:  # the previous code has no rerank stage
    Reranking = None
if Reranking is not None:
    reranking = Reranking(
        defaults=RerankDefaults.from_settings(Settings()),
        reranker_for=lambda spec: None,
        deadline_seconds=8.0,
    )
    plain = bench.search
    bench.search = lambda *a, **k: plain(*a, reranking=reranking, **k)
result = bench.run_size(int(sys.argv[2]), int(sys.argv[3]), 120.0, 7)
print("RESULT " + json.dumps(result["latencies"]))
"""


def run(tree: Path, size: int, queries: int) -> dict[str, list[float]]:
    output = subprocess.run(
        [sys.executable, "-c", CHILD, str(tree), str(size), str(queries)],
        check=True,
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
    ).stdout
    line = next(line for line in output.splitlines() if line.startswith("RESULT "))
    latencies: dict[str, list[float]] = json.loads(line.removeprefix("RESULT "))
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True)
    parser.add_argument("--size", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as base_dir:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", args.base], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", base_dir], input=archive, check=True)
        p50: dict[str, dict[str, list[float]]] = {"previous": {}, "new": {}}
        loads = [os.getloadavg()[0]]
        for round_number in range(args.rounds):
            for label, tree in (("previous", Path(base_dir)), ("new", ROOT)):
                for mode, (_n, median, _p95, _mean) in run(tree, args.size, args.queries).items():
                    p50[label].setdefault(mode, []).append(median)
                loads.append(os.getloadavg()[0])
                print(f"round {round_number + 1} {label} done", file=sys.stderr, flush=True)
    print(
        f"# {args.size} chunks, {args.queries} queries per mode, {args.rounds} rounds; "
        f"load average {min(loads):.1f}-{max(loads):.1f}"
    )
    print("| mode | previous p50 ms | new p50 ms | ratio of medians | median of round ratios |")
    print("|---|---:|---:|---:|---:|")
    for mode, values in p50["previous"].items():
        before = statistics.median(values)
        after = statistics.median(p50["new"][mode])
        paired = statistics.median(n / p for p, n in zip(values, p50["new"][mode], strict=True))
        print(f"| {mode} | {before:.2f} | {after:.2f} | {after / before:.3f} | {paired:.3f} |")


if __name__ == "__main__":
    main()
