"""onnxruntime memory options for the local model, side by side: peak RSS, RSS after, CPU.

Run: .venv/bin/python bench/bench_local_arena.py [--document pdf/irs-irm-2.3.59-400p.pdf]
     [--limit 0] [--runs 1]

Each variant runs in a fresh child process: it builds an onnxruntime session of the pinned
all-MiniLM-L6-v2 int8 model with 2 intra-op threads, then embeds the document's chunks (from
`prepare_document`, default settings) the way `LocalEmbedder` does (sorted by token count,
batched, padded to each batch's longest, mean pooling, L2 norm), in calls of 64 chunks as
`docingest/pipeline/indexing/run.py` slices them. It reports the process's peak RSS (VmHWM), its RSS
once done, CPU time per chunk, and the largest absolute difference from the first variant's
vectors. Variants (`VARIANTS`):

- today: the arena on, batches of 16 by count, intra-op threads spinning (onnxruntime's
  defaults, and the code before bounded batches, which ran the shortest batch first; every
  variant here runs the longest first, as `plan_batches` now does).
- arena off (`enable_cpu_mem_arena = False`), arena shrinkage after every run
  (`memory.enable_memory_arena_shrinkage`), `arena_extend_strategy = kSameAsRequested`,
  intra-op threads not spinning: each one change to today.
- tokens N: batches also bounded by N padded tokens; "ours" adds no spinning and shrinkage
  after the last run of each 64-chunk call, as `docingest/pipeline/embedders/local.py` does now.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(1, str(REPO / "bench"))

import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402
from _common import find_corpus, machine  # noqa: E402

SLICE = 64
VARIANTS: dict[str, dict[str, Any]] = {
    "today": {},
    "arena off": {"arena": False},
    "shrink after every run": {"shrink": "every"},
    "kSameAsRequested": {"same_as_requested": True},
    "no spinning": {"no_spin": True},
    "tokens 2048": {"tokens": 2048},
    "tokens 1024": {"tokens": 1024},
    "tokens 512": {"tokens": 512},
    "ours: tokens 512, no spinning, shrink per call": {
        "tokens": 512,
        "no_spin": True,
        "shrink": "call",
    },
}


def session(variant: dict[str, Any]) -> ort.InferenceSession:
    from docingest.pipeline.embedders.artifacts import LOCAL_MODEL, read_verified

    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    if variant.get("arena") is False:
        options.enable_cpu_mem_arena = False
    if variant.get("no_spin"):
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    provider: Any = "CPUExecutionProvider"
    if variant.get("same_as_requested"):
        provider = (provider, {"arena_extend_strategy": "kSameAsRequested"})
    data = read_verified(LOCAL_MODEL, Path(LOCAL_MODEL.installed_path()).resolve())
    return ort.InferenceSession(data, options, providers=[provider])


def embed_call(
    run: ort.InferenceSession, ids: list[list[int]], variant: dict[str, Any]
) -> np.ndarray:
    """One `embed_documents` call on token ids, batched as the variant says."""
    from docingest.pipeline.embedders.local import plan_batches

    shrink = ort.RunOptions()
    shrink.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    plan = plan_batches(
        [len(row) for row in ids], max_batch=16, max_tokens=variant.get("tokens", 10**9)
    )
    vectors = np.zeros((len(ids), 384), dtype=np.float32)
    for number, indices in enumerate(plan, start=1):
        width = max(len(ids[index]) for index in indices)
        input_ids = np.zeros((len(indices), width), dtype=np.int64)
        mask = np.zeros_like(input_ids)
        for row, index in enumerate(indices):
            input_ids[row, : len(ids[index])], mask[row, : len(ids[index])] = ids[index], 1
        last = number == len(plan)
        wanted = variant.get("shrink") == "every" or (variant.get("shrink") == "call" and last)
        feeds = {"input_ids": input_ids, "attention_mask": mask}
        feeds["token_type_ids"] = np.zeros_like(input_ids)
        output = run.run(None, feeds, shrink if wanted else None)[0]
        weights = mask[:, :, None].astype(np.float32)
        pooled = (output * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        vectors[indices] = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
    return vectors


def child(variant: dict[str, Any], ids: list[list[int]], out: Path) -> dict[str, Any]:
    from _service_tools import rss_bytes

    run = session(variant)
    embed_call(run, [[101, 102]], variant)
    cpu = time.process_time()
    vectors = [embed_call(run, ids[i : i + SLICE], variant) for i in range(0, len(ids), SLICE)]
    cpu = time.process_time() - cpu
    np.save(out, np.concatenate(vectors))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"cpu_ms": 1000 * cpu / len(ids), "peak": peak, "after": rss_bytes(os.getpid())}


def token_ids(document: Path, limit: int) -> list[list[int]]:
    from tokenizers import Tokenizer

    from docingest.pipeline.chunking import ChunkingSpec
    from docingest.pipeline.chunking.tokens import DEFAULT_TOKENIZER_PATH
    from docingest.pipeline.embedders.local import DEFAULT_MAX_SEQ_LENGTH
    from docingest.pipeline.prepare import prepare_document
    from docingest.pipeline.settings import Settings

    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(data_dir=Path(tmp))
        data = document.read_bytes()
        prepared = prepare_document(
            data,
            filename=document.name,
            settings=settings,
            chunking=ChunkingSpec.from_settings(settings),
        )
    texts = [chunk.text for chunk in prepared.chunks][: limit or None]
    tokenizer = Tokenizer.from_file(str(DEFAULT_TOKENIZER_PATH))  # as LocalEmbedder sets it up
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=DEFAULT_MAX_SEQ_LENGTH)
    return [encoding.ids for encoding in tokenizer.encode_batch(texts)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--document", default="pdf/irs-irm-2.3.59-400p.pdf")
    parser.add_argument("--limit", type=int, default=0, help="first N chunks (0: all)")
    parser.add_argument("--runs", type=int, default=1, help="rounds over the variants")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        request = json.loads(args.child)
        ids = json.loads(Path(request["ids"]).read_text())
        print(json.dumps(child(request["variant"], ids, Path(request["out"]))))
        return 0
    load_start = ", ".join(f"{load:.1f}" for load in os.getloadavg())
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in VARIANTS}
    with tempfile.TemporaryDirectory(prefix="docingest-bench-arena-") as tmp:
        ids = token_ids(find_corpus() / args.document, args.limit)
        ids_file = Path(tmp) / "ids.json"
        ids_file.write_text(json.dumps(ids))
        for _ in range(args.runs):  # rounds, so that load drifts hit every variant alike
            for number, (name, variant) in enumerate(VARIANTS.items()):
                out = Path(tmp) / f"{number}.npy"
                request = {"variant": variant, "ids": str(ids_file), "out": str(out)}
                done = subprocess.run(
                    [sys.executable, __file__, "--child", json.dumps(request)],
                    capture_output=True, text=True, check=True,
                )  # fmt: skip
                result = json.loads(done.stdout.strip().splitlines()[-1])
                result["difference"] = float(
                    np.abs(np.load(out) - np.load(Path(tmp) / "0.npy")).max()
                )
                results[name].append(result)
                print(name, result, flush=True)
    load_end = ", ".join(f"{load:.1f}" for load in os.getloadavg())
    print(
        f"\nCommand: `python bench/bench_local_arena.py --document {args.document} --limit "
        f"{args.limit} --runs {args.runs}`, on {datetime.now(UTC):%Y-%m-%d}: {len(ids)} chunks, "
        f"calls of {SLICE}. Machine: {machine()}, onnxruntime {ort.__version__}. Load average "
        f"{load_start} at start, {load_end} at end. Medians of {args.runs} run(s).\n"
    )
    print("| variant | peak RSS | RSS after | CPU ms/chunk | × today | max abs difference |")
    print("|---|---:|---:|---:|---:|---:|")
    today = statistics.median(row["cpu_ms"] for row in results["today"])
    for name, rows in results.items():
        cpu = statistics.median(row["cpu_ms"] for row in rows)
        print(
            f"| {name} | {statistics.median(row['peak'] for row in rows) / 2**20:,.0f} MB | "
            f"{statistics.median(row['after'] for row in rows) / 2**20:,.0f} MB | {cpu:.0f} | "
            f"{cpu / today:.2f} | {max(row['difference'] for row in rows):.1e} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
