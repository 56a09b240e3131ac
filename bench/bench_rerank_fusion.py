"""Should a re-ranker's order replace the first stage's, or be fused with it (RRF)?

Run: .venv/bin/python bench/bench_rerank_fusion.py [--candidates 50 100] [--seeds 5]

No re-ranking model can run here (BENCHMARKS.md, "Rerank: replace or fuse"), so this simulates
re-rankers of known quality on SciFact's real judgments and measures both ways of using them.

- First stage: plain BM25 over the 5,183 abstracts ("title text"), as the published re-ranker
  figures use (BEIR's BM25 top-100; this BM25 is the corpus's sanity-check one, nDCG@10 0.665,
  the published BM25 figure).
- A simulated re-ranker scores each of the first `candidates` documents of a query as
  `signal * relevance + N(0, 1)` (relevance the qrels grade, 0 or 1 on SciFact). `signal` sets
  its quality: 0 is noise, large is an oracle. `--correlated` adds half the first stage's
  standardised score to it, a re-ranker that shares some of BM25's view.
- `replace`: the candidates in the re-ranker's order. `fuse`: RRF (k = 60) of the first-stage
  rank and the re-ranker's rank over the same candidates, as hybrid search fuses.

nDCG@10 and R@10 as BEIR computes them, mean over `--seeds` draws of the noise. For each signal
the table gives the re-ranker's own quality (replace) next to fuse, so the published figures
(ms-marco-MiniLM-L-6-v2 0.688 ... jina-reranker-v1-turbo 0.739 on BM25 top-100) can be placed
on it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import find_corpus, machine
from bench_retrieval import bm25_rankings, load_dataset

from docingest.evaluate import mean_ndcg_and_recall

SIGNALS = (0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0)
RRF_K = 60


def rerank_runs(
    first: dict[str, list[str]],
    qrels: dict[str, dict[str, int]],
    *,
    candidates: int,
    signal: float,
    seed: int,
    correlated: bool,
) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Return (replace, fuse) rankings for one simulated re-ranker."""
    rng = np.random.default_rng(seed)
    replace, fuse = {}, {}
    for query_id, ranking in first.items():
        pool = ranking[:candidates]
        judged = qrels.get(query_id, {})
        relevance = np.array([judged.get(doc, 0) for doc in pool], dtype=float)
        scores = signal * relevance + rng.standard_normal(len(pool))
        if correlated and len(pool) > 1:
            ranks = np.arange(len(pool), dtype=float)
            scores += 0.5 * -(ranks - ranks.mean()) / ranks.std()
        order = sorted(range(len(pool)), key=lambda i: -scores[i])
        replace[query_id] = [pool[i] for i in order]
        rerank_rank = {i: rank for rank, i in enumerate(order)}
        fused = {
            i: 1 / (RRF_K + i + 1) + 1 / (RRF_K + rerank_rank[i] + 1) for i in range(len(pool))
        }
        fuse[query_id] = [pool[i] for i in sorted(fused, key=lambda i: -fused[i])]
    return replace, fuse


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=int, nargs="+", default=[50, 100])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--correlated", action="store_true")
    args = parser.parse_args()
    data = load_dataset("scifact", find_corpus() / "retrieval", None)
    first = bm25_rankings(data, depth=max(args.candidates))
    base = mean_ndcg_and_recall(first, data.qrels)
    print(f"# {machine()}, load {os.getloadavg()[0]:.1f}")
    print(f"# SciFact test, {len(data.queries)} queries; BM25 nDCG@10 {base[0]:.3f}")
    print(f"# correlated re-ranker: {args.correlated}; seeds: {args.seeds}")
    print(
        "| candidates | signal | replace nDCG@10 | fuse nDCG@10 | fuse - replace "
        "| replace R@10 | fuse R@10 |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for candidates in args.candidates:
        for signal in SIGNALS:
            rows = [
                (mean_ndcg_and_recall(replace, data.qrels), mean_ndcg_and_recall(fuse, data.qrels))
                for replace, fuse in (
                    rerank_runs(
                        first,
                        data.qrels,
                        candidates=candidates,
                        signal=signal,
                        seed=seed,
                        correlated=args.correlated,
                    )
                    for seed in range(args.seeds)
                )
            ]
            r_ndcg = statistics.fmean(r[0][0] for r in rows)
            f_ndcg = statistics.fmean(r[1][0] for r in rows)
            r_rec = statistics.fmean(r[0][1] for r in rows)
            f_rec = statistics.fmean(r[1][1] for r in rows)
            print(
                f"| {candidates} | {signal:g} | {r_ndcg:.3f} | {f_ndcg:.3f} | "
                f"{f_ndcg - r_ndcg:+.3f} | {r_rec:.3f} | {f_rec:.3f} |"
            )


if __name__ == "__main__":
    main()
