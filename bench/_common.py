"""What every benchmark script needs: the shared corpus and a one-line machine description."""

from __future__ import annotations

import math
import os
import platform
import re
import statistics
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def find_corpus() -> Path:
    """The shared sample corpus: `DOCINGEST_CORPUS_DIR`, else `../shared/corpus`."""
    for candidate in (os.environ.get("DOCINGEST_CORPUS_DIR"), REPO.parent / "shared" / "corpus"):
        if candidate and (Path(candidate) / "README.md").is_file():
            return Path(candidate)
    return Path("/work/shared/corpus")


def machine() -> str:
    """CPU model, CPU count and Python version, for the benchmark record."""
    cpuinfo = Path("/proc/cpuinfo")
    names = re.findall(r"model name\s*:\s*(.+)", cpuinfo.read_text()) if cpuinfo.exists() else []
    model = names[0] if names else platform.machine()
    return f"{model}, {os.cpu_count()} CPUs, Python {platform.python_version()}"


def evaluate(
    rankings: dict[str, list[str]], qrels: dict[str, dict[str, int]], *, top_k: int = 10
) -> tuple[float, float]:
    """Return mean nDCG@k and recall@k over the judged queries (trec_eval / BEIR definitions:
    linear gain, log2 discount, ideal DCG from every judged document)."""
    ndcgs, recalls = [], []
    for query_id, judgments in qrels.items():
        top = rankings.get(query_id, [])[:top_k]
        dcg = sum(judgments.get(doc, 0) / math.log2(rank + 2) for rank, doc in enumerate(top))
        ideal = sorted((g for g in judgments.values() if g > 0), reverse=True)[:top_k]
        idcg = sum(gain / math.log2(rank + 2) for rank, gain in enumerate(ideal))
        relevant = {doc for doc, gain in judgments.items() if gain > 0}
        ndcgs.append(dcg / idcg if idcg else 0.0)
        recalls.append(len(relevant.intersection(top)) / len(relevant) if relevant else 0.0)
    return statistics.fmean(ndcgs), statistics.fmean(recalls)
