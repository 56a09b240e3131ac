"""What excerpts, highlights and offsets cost a search: today's code against the previous
commit's, side by side in one run.

Run: .venv/bin/python bench/bench_answer_latency.py [--baseline /work/main] [--rounds 5]
         [--queries 40]

An embedded (Edge) store in a temporary directory is filled once, by this checkout, with the
real chunks of the shared corpus's long English text files (default chunking, offsets and
gaps) and random unit vectors; queries are the first eight words of sampled sentences of
the same text, each with a pre-made random query vector (no model time is measured).

Then, in rounds, a child process per variant opens the store and times `resolve_target()`
and `search()` (hybrid, top_k 10) over every query after one warm-up:

- `previous`: the `--baseline` checkout's code (no offsets, excerpts or highlights);
- `no excerpt`: this checkout with `"excerpt": false`;
- `excerpt`: this checkout as a request gets it by default (excerpt and highlights).

The variants alternate within each round, so the machine's load falls on all alike; p50 is
over every round's timings. Results: BENCHMARKS.md, "Excerpts and highlights".
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

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
INDEX = "answers"
DIMS = 384
FILES = ["rfc2616-http11.txt", "rfc6455-websocket.txt", "debian-reference.en.txt",
         "jargon-file-4.4.7.txt", "uspto-patent-aps-5700647.txt"]  # fmt: skip
SMALL = ["rfc6455-websocket.txt"]
"""With `--small` (a quick check of the script itself)."""


def prepare(data_dir: Path, queries: int) -> None:
    """Fill the store and write the queries and their vectors beside it."""
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "bench"))
    from _common import find_corpus

    from docingest.pipeline.chunking import ChunkingSpec
    from docingest.pipeline.embedders.base import EmbeddingConfig
    from docingest.pipeline.indexing.chunk_vectors import chunk_records, text_hash
    from docingest.pipeline.prepare import prepare_document
    from docingest.pipeline.search.excerpts import sentences
    from docingest.pipeline.settings import Settings
    from docingest.pipeline.sparse import encode_document
    from docingest.pipeline.store import DocumentFields, IndexConfig, VectorStore
    from docingest.pipeline.store.requests import fields_filter

    rng = np.random.default_rng(7)
    texts: list[str] = []
    with VectorStore.open(Settings(data_dir=data_dir)) as store:
        config = IndexConfig(embedding=EmbeddingConfig(model="bench-random", dimensions=DIMS))
        store.create_index(INDEX, config)
        chunks_total = 0
        for name in FILES:
            path = find_corpus() / "txt" / name
            prepared = prepare_document(
                path.read_bytes(), filename=name, settings=Settings(), chunking=ChunkingSpec()
            )
            chunks = prepared.chunks
            hashes = [text_hash(chunk.text) for chunk in chunks]
            vectors = rng.standard_normal((len(chunks), DIMS)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            fields = DocumentFields(
                filename=name, format="txt", content_sha256=None, pages=None, words=None,
                chunk_count=len(chunks),
            )  # fmt: skip
            records = chunk_records(
                chunks, hashes=hashes, vectors=dict(zip(hashes, vectors, strict=False)),
                sparse=[encode_document(chunk.text) for chunk in chunks], document_id=name,
                version=1, fields=fields, ocr=None,
            )  # fmt: skip
            store.write_chunks(INDEX, records)
            chunks_total += len(chunks)
            spans = [s for s in sentences(prepared.text) if 60 <= s[1] - s[0] <= 300]
            for start, end in [spans[i] for i in rng.choice(len(spans), queries // len(FILES))]:
                texts.append(" ".join(prepared.text[start:end].split()[:8]))
        store.engine.set_payload(INDEX, {"state": "live"}, fields_filter(state="staged"))
    query_vectors = rng.standard_normal((len(texts), DIMS)).astype(np.float32)
    query_vectors /= np.linalg.norm(query_vectors, axis=1, keepdims=True)
    (data_dir / "queries.json").write_text(json.dumps(texts))
    np.save(data_dir / "queries.npy", query_vectors)
    print(f"{chunks_total} chunks of {len(FILES)} documents, {len(texts)} queries")


def child(code: Path, data_dir: Path, excerpt: bool | None) -> None:
    """Time every query with `code`'s search; print the timings (ms) as JSON."""
    import time

    sys.path.insert(0, str(code))
    from docingest.pipeline.search import SearchRequest, resolve_target, search
    from docingest.pipeline.settings import Settings
    from docingest.pipeline.store import VectorStore

    texts = json.loads((data_dir / "queries.json").read_text())
    vectors = dict(zip(texts, np.load(data_dir / "queries.npy"), strict=True))

    class Premade:
        provider, model, dimensions, max_batch = "local", "bench-random", DIMS, 1

        def embed_query(self, text: str) -> np.ndarray:
            return vectors[text]

        def embed_documents(self, texts: object, on_progress: object = None) -> np.ndarray:
            raise NotImplementedError("the bench embeds no documents")

    embedder = Premade()
    fields: dict[str, object] = {"top_k": 10, "mode": "hybrid"}
    if excerpt is not None:
        fields["excerpt"] = excerpt
    timings = []
    with VectorStore.open(Settings(data_dir=data_dir)) as store:
        for number, text in enumerate([texts[0], *texts]):
            request = SearchRequest.model_validate({"query": text, **fields})
            started = time.perf_counter()
            target = resolve_target(store, INDEX, embedder_for=lambda _config: embedder)
            response = search(store, target, request)
            elapsed = (time.perf_counter() - started) * 1000
            assert response.results, "a search found nothing"
            if number:  # the first is a warm-up
                timings.append(elapsed)
    print(json.dumps(timings))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", type=Path, default=ROOT.parent / "main")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--child", nargs=3, metavar=("CODE", "DIR", "EXCERPT"))
    args = parser.parse_args()
    if args.child:
        code, folder, flag = args.child
        child(Path(code), Path(folder), {"none": None, "true": True, "false": False}[flag])
        return
    variants = [
        ("previous", args.baseline, "none"),
        ("no excerpt", ROOT, "false"),
        ("excerpt", ROOT, "true"),
    ]
    timings: dict[str, list[float]] = {name: [] for name, _, _ in variants}
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as folder:
        prepare(Path(folder), args.queries)
        for _ in range(args.rounds):
            for name, code, flag in variants:
                out = subprocess.run(
                    [sys.executable, __file__, "--child", str(code), folder, flag],
                    capture_output=True, text=True, cwd=code,
                )  # fmt: skip
                if out.returncode:
                    raise SystemExit(f"the {name} child failed:\n{out.stderr[-3000:]}")
                timings[name] += json.loads(out.stdout.strip().splitlines()[-1])
            loads.append(os.getloadavg()[0])
    base = statistics.median(timings["previous"])
    print(f"load average (1 min) during the run: {min(loads):.1f}-{max(loads):.1f}")
    print(f"{'variant':<12} {'n':>4} {'p50 ms':>8} {'p95 ms':>8} {'p50 / previous':>15}")
    for name, values in timings.items():
        p50 = statistics.median(values)
        p95 = statistics.quantiles(values, n=20)[-1]
        print(f"{name:<12} {len(values):>4} {p50:8.2f} {p95:8.2f} {p50 / base:15.3f}")
    added = statistics.median(timings["excerpt"]) - statistics.median(timings["no excerpt"])
    print(f"excerpts and highlights add {added:.2f} ms at p50 (top_k 10)")


if __name__ == "__main__":
    main()
