"""Builds in a child process, handed over to the serving process: a raw-Edge prototype (issue 41).

Run: .venv/bin/python bench/bench_edge_handover.py probe [--points 100000] [--dimensions 384]
     .venv/bin/python bench/bench_edge_handover.py ingest [--points 25000] [--dimensions 384]
         [--vectors random|words] [--rate 1200] [--policies inproc handover handover-idle-merge]

qdrant-edge-py 0.9 holds the GIL through every call, `optimize()` included, and one process at
a time may open a shard directory. So a build can run beside searches only in another process,
on its own copy, and the serving process must then open what was built. Both modes measure
that with Edge alone (no service), in `$TMPDIR`, with the store's own shard config:

- `probe`: build and merge a shard of `--points`, then time (in fresh processes) opening it
  and the longest stall of a thread ticking every 5 ms meanwhile (the GIL held); whether a
  second process can open it while the first has it; copying its directory (`/dev/shm` and
  `/var/tmp`); and hybrid search with 10,000 and 20,000 points not yet indexed.
- `ingest`: one process writes `--points` points in 64-point batches at up to `--rate` a second
  while a thread runs hybrid searches back to back, under each policy in turn:
  `inproc`, today's (builds in this process, `edge_optimizer`'s byte budget, no merges);
  `handover`, a spawned child that keeps a replica (every batch is sent to it), builds with
  merges every 8 s, closes, copies its directory and hands the copy over, which the server
  opens, catches up from its journal, swaps in and closes the old one (it never optimizes);
  `handover-idle-merge`, the same child building as today (no merges) and merging only after
  2 s without writes. Reports points/s written, the searches' p50/p99/max, those over 150 ms
  and 1 s, the longest stall, the p50 once settled, segments, and each build or handover.

Not the service: no HTTP, fusion in Edge only, no excerpts, so searches are ~10 ms faster than
through `serve`; compare the policies with each other (BENCHMARKS.md, "Sustained ingestion").
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as edge
from qdrant_client import models

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from _common import find_corpus, machine  # noqa: E402

from docingest.pipeline.sparse import SparseTerms  # noqa: E402
from docingest.pipeline.store import edge_convert as convert  # noqa: E402
from docingest.pipeline.store.edge import DENSE_QUANTIZATION  # noqa: E402
from docingest.pipeline.store.edge_optimizer import OptimizerPolicy  # noqa: E402
from docingest.pipeline.store.requests import CORE_INDEXES, DENSE, KEYWORD, Point  # noqa: E402

BATCH = 64
HANDOFF_SECONDS = 8.0
IDLE_MERGE_SECONDS = 2.0
Batch = list[dict[str, Any]]


def shard_config(dimensions: int, *, merging: bool) -> edge.EdgeConfig:
    """The store's shard config; `merging`: Edge's default merging, segments up to 200,000."""
    optimizers = OptimizerPolicy().shard_optimizers(dimensions)
    if merging:
        optimizers = edge.EdgeOptimizersConfig(
            indexing_threshold=optimizers.indexing_threshold,
            max_segment_size=200_000 * 4 * dimensions // 1024,
            default_segment_number=0,
        )
    return edge.EdgeConfig(
        vectors={DENSE: edge.EdgeVectorParams(size=dimensions, distance=edge.Distance.Cosine)},
        sparse_vectors={KEYWORD: edge.EdgeSparseVectorParams(modifier=edge.Modifier.Idf)},
        optimizers=optimizers,
        quantization_config=DENSE_QUANTIZATION,
    )


def create_shard(path: Path, dimensions: int, *, merging: bool) -> edge.EdgeShard:
    shard = edge.EdgeShard.create(str(path), shard_config(dimensions, merging=merging))
    for field, schema in CORE_INDEXES.items():
        shard.update(
            edge.UpdateOperation.create_field_index(field, convert.PAYLOAD_SCHEMAS[schema])
        )
    shard.flush()
    return shard


def make_rows(points: int, dimensions: int, vectors: str) -> list[dict[str, Any]]:
    """Chunks of War and Peace (150 words), their vectors, keyword terms and payloads."""
    words = (find_corpus() / "txt/gutenberg-war-and-peace.txt").read_text("utf-8").split()
    span = len(words) - 150
    texts = [" ".join(words[(i * 150) % span : (i * 150) % span + 150]) for i in range(points)]
    if vectors == "words":  # as tests/support/embedding_server.word_vectors
        dense = np.full((points, dimensions), 0.01, dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                hashed = zlib.crc32(word.encode())
                dense[row, hashed % dimensions] += 1.0 if hashed & 0x80000000 else -1.0
    else:
        dense = np.random.default_rng(1).standard_normal((points, dimensions)).astype(np.float32)
    dense /= np.linalg.norm(dense, axis=1, keepdims=True)
    rows = []
    for i, text in enumerate(texts):
        terms = sorted({zlib.crc32(w.encode()) % 1_000_000 for w in text.lower().split()})
        payload = {
            "document_id": f"d{i // 500}", "version": 1, "state": "live", "chunk_index": i % 500,
            "text_hash": uuid.uuid5(uuid.NAMESPACE_DNS, str(i)).hex, "text": text,
            "ingested_at": "2026-12-07T00:00:00Z", "access": ["public"],
        }  # fmt: skip
        rows.append({"id": str(uuid.uuid5(uuid.NAMESPACE_OID, str(i))), "dense": dense[i],
                     "terms": terms, "payload": payload})  # fmt: skip
    return rows


def apply(shard: edge.EdgeShard, batch: Batch) -> None:
    points = [
        convert.to_point(
            Point(
                row["id"],
                row["dense"],
                SparseTerms(row["terms"], [1.0] * len(row["terms"])),
                row["payload"],
            )  # fmt: skip
        )
        for row in batch
    ]
    shard.update(edge.UpdateOperation.upsert_points(points))


def hybrid(vector: np.ndarray) -> edge.QueryRequest:
    live = edge.Filter(must=[edge.FieldCondition(key="state", match=edge.MatchValue("live"))])
    terms = edge.SparseVector(indices=[11, 900, 5003, 70001], values=[1.0] * 4)
    return edge.QueryRequest(
        limit=10,
        prefetches=[
            edge.Prefetch(
                limit=50,
                query=convert.nearest(vector.tolist(), DENSE),
                filter=live,
                params=convert.DENSE_SEARCH,
            ),  # fmt: skip
            edge.Prefetch(limit=50, query=edge.Query.Nearest(terms, using=KEYWORD), filter=live),
        ],
        query=convert.to_fusion(models.FusionQuery(fusion=models.Fusion.RRF)),
        with_payload=["document_id", "text"],
    )


class Ticker:
    """A thread waking every 5 ms: its longest late wake-up is the longest the GIL was held."""

    def __init__(self) -> None:
        self.longest = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        last = time.perf_counter()
        while not self._stop.is_set():
            time.sleep(0.005)
            now = time.perf_counter()
            self.longest = max(self.longest, now - last - 0.005)
            last = now

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.longest


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


# --- the child: a replica that builds and hands copies over ---------------------------------


def child_main(directory: str, dimensions: int, policy: str, inbox: Any, outbox: Any) -> None:
    merging = policy == "handover"
    shard = edge.EdgeShard.load(directory, shard_config(dimensions, merging=merging))
    applied, since_build, generation = 0, 0, 0
    last_handoff = quiet_since = time.monotonic()
    merged = True

    def hand_over(kind: str, *, merge: bool) -> None:
        nonlocal shard, generation, last_handoff
        if merge:
            shard.close()
            shard = edge.EdgeShard.load(directory, shard_config(dimensions, merging=True))
        started = time.perf_counter()
        shard.optimize()
        shard.close()  # flushes; a copy of an open shard could catch a write half done
        built = time.perf_counter()
        generation += 1
        target = f"{directory}.{generation}"
        shutil.copytree(directory, target)
        copied = time.perf_counter()
        shard = edge.EdgeShard.load(directory, shard_config(dimensions, merging=merging))
        outbox.put((applied, target, kind, round(built - started, 2), round(copied - built, 2)))
        last_handoff = time.monotonic()

    while True:
        try:
            message = inbox.get(timeout=0.2)
        except queue.Empty:
            message = None
        while message is not None:
            if message == "stop":
                shard.close()
                return
            applied, batch = message
            apply(shard, batch)
            since_build += len(batch)
            merged, quiet_since = False, time.monotonic()
            try:
                message = inbox.get_nowait()
            except queue.Empty:
                message = None
        now = time.monotonic()
        if since_build and now - last_handoff >= HANDOFF_SECONDS:
            hand_over("build", merge=False)
            since_build = 0
        elif (
            not merging
            and not merged
            and not since_build
            and now - quiet_since >= IDLE_MERGE_SECONDS
        ):
            hand_over("merge", merge=True)
            merged = True


# --- the serving process ---------------------------------------------------------------------


class Server:
    def __init__(self, root: Path, dimensions: int, policy: str) -> None:
        self.root, self.dimensions, self.policy = root, dimensions, policy
        self.path = root / "serving.0"
        create_shard(self.path, dimensions, merging=False).close()
        self.shard = edge.EdgeShard.load(str(self.path), None)
        self.swap = threading.Lock()  # a call on the shard, or the swap: never both
        self.write = threading.Lock()  # the engine's write lock
        self.journal: list[tuple[int, Batch]] = []
        self.seq = 0
        self.pending = 0
        self.events: list[Any] = []
        self.done = threading.Event()
        self.last: tuple[int, str] = (-1, "")
        self.inbox: Any = None
        self.outbox: Any = None

    def write_batch(self, batch: Batch) -> None:
        with self.write:
            self.seq += 1
            with self.swap:
                apply(self.shard, batch)
            self.pending += len(batch)
            if self.inbox is not None:
                self.journal.append((self.seq, batch))
                self.inbox.put((self.seq, batch))

    def search(self, vector: np.ndarray) -> None:
        with self.swap:
            self.shard.query(hybrid(vector))

    def settled(self) -> bool:
        if self.policy == "inproc":
            return not self.pending
        wanted = "merge" if self.policy == "handover-idle-merge" else "build"
        return self.last[0] == self.seq and self.last[1] == wanted

    def build_in_process(self) -> None:
        """Today's policy: build here once the byte budget's points were written."""
        budget = OptimizerPolicy().points_before_build(self.dimensions)
        while not (self.done.is_set() and self.settled()):
            time.sleep(0.05)
            if self.pending >= budget or (self.done.is_set() and self.pending):
                points, self.pending = self.pending, 0
                started = time.perf_counter()
                with self.swap:
                    self.shard.optimize()
                    self.shard.flush()
                self.events.append(["build", points, round(time.perf_counter() - started, 3)])

    def take_handovers(self) -> None:
        """Open each copy the child hands over, catch it up from the journal, swap it in."""
        while not (self.done.is_set() and self.settled()):
            try:
                applied, target, kind, build_s, copy_s = self.outbox.get(timeout=0.2)
            except queue.Empty:
                continue
            started = time.perf_counter()
            new = edge.EdgeShard.load(target, None)
            opened = time.perf_counter()
            done = applied
            while True:  # catch up outside the write lock, the last few batches under it
                with self.write:
                    tail = [(seq, batch) for seq, batch in self.journal if seq > done]
                    if len(tail) <= 4:
                        for _, batch in tail:
                            apply(new, batch)
                        with self.swap:
                            old, self.shard = self.shard, new
                        self.journal = [(seq, b) for seq, b in self.journal if seq > applied]
                        break
                for _, batch in tail:
                    apply(new, batch)
                done = tail[-1][0]
            caught_up = time.perf_counter()
            old.close()
            closed = time.perf_counter()
            threading.Thread(target=shutil.rmtree, args=(self.path,), daemon=True).start()
            self.path = Path(target)
            self.last = (applied, kind)
            seconds = {"child_build": build_s, "child_copy": copy_s, "open": opened - started,
                       "catch_up": caught_up - opened, "close": closed - caught_up}  # fmt: skip
            self.events.append([kind, applied, {k: round(v, 3) for k, v in seconds.items()}])


def ingest(args: argparse.Namespace, policy: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix=f"handover-{policy}-"))
    server = Server(root, args.dimensions, policy)
    child = None
    if policy == "inproc":
        helper = threading.Thread(target=server.build_in_process, daemon=True)
    else:
        replica = root / "replica"
        shutil.copytree(server.path, replica)
        context = mp.get_context("spawn")  # never fork a process holding Edge's threads
        server.inbox, server.outbox = context.Queue(), context.Queue()
        child = context.Process(
            target=child_main,
            args=(str(replica), args.dimensions, policy, server.inbox, server.outbox),
            daemon=True,
        )
        child.start()
        helper = threading.Thread(target=server.take_handovers, daemon=True)
    helper.start()
    queries = np.stack([rows[i]["dense"] for i in range(0, len(rows), max(1, len(rows) // 500))])
    latencies: list[float] = []
    stop = threading.Event()

    def searcher() -> None:
        while not stop.is_set():
            started = time.perf_counter()
            server.search(queries[len(latencies) % len(queries)])
            latencies.append(time.perf_counter() - started)

    searching = threading.Thread(target=searcher, daemon=True)
    ticker = Ticker()
    searching.start()
    started = time.perf_counter()
    for first in range(0, len(rows), BATCH):
        server.write_batch(rows[first : first + BATCH])
        ahead = (first + BATCH) / args.rate - (time.perf_counter() - started)
        if ahead > 0:
            time.sleep(ahead)
    written = time.perf_counter() - started
    server.done.set()
    helper.join()
    settled = time.perf_counter() - started
    stop.set()
    searching.join()
    longest_stall = ticker.stop()
    idle = []
    for vector in queries[:60]:
        begun = time.perf_counter()
        server.search(vector)
        idle.append(time.perf_counter() - begun)
    if child is not None:
        server.inbox.put("stop")
        child.join(timeout=60)
    segments = len(os.listdir(server.path / "segments"))
    server.shard.close()
    shutil.rmtree(root, ignore_errors=True)
    return {
        "policy": policy, "points_per_s": round(len(rows) / written),
        "settled_s": round(settled, 1),
        "searches": len(latencies), "p50_ms": ms(percentile(latencies, 0.5)),
        "p99_ms": ms(percentile(latencies, 0.99)), "max_ms": ms(max(latencies)),
        "over_150ms": sum(x > 0.150 for x in latencies), "over_1s": sum(x > 1 for x in latencies),
        "longest_stall_ms": ms(longest_stall), "idle_p50_ms": ms(percentile(idle, 0.5)),
        "segments": segments, "events": server.events,
    }  # fmt: skip


# --- probe: open, lock, copy, unindexed points -------------------------------------------------

OPEN_SCRIPT = """
import json, sys, time, threading
sys.path.insert(0, sys.argv[2])
from bench_edge_handover import Ticker, edge
ticker = Ticker(); started = time.perf_counter()
shard = edge.EdgeShard.load(sys.argv[1], None)
opened = time.perf_counter() - started; stall = ticker.stop()
ticker = Ticker(); started = time.perf_counter(); shard.close()
print(json.dumps({"open_ms": round(opened * 1000), "open_stall_ms": round(stall * 1000),
                  "close_ms": round((time.perf_counter() - started) * 1000),
                  "close_stall_ms": round(ticker.stop() * 1000)}))
"""


def probe(args: argparse.Namespace) -> None:
    root = Path(tempfile.mkdtemp(prefix="handover-probe-"))
    rows = make_rows(args.points + 20_000, args.dimensions, args.vectors)
    path = root / "shard"
    shard = create_shard(path, args.dimensions, merging=True)
    for first in range(0, args.points, 500):
        apply(shard, rows[first : min(first + 500, args.points)])
    started = time.perf_counter()
    shard.optimize()
    print(f"built {args.points:,} points in {time.perf_counter() - started:.1f} s,",
          f"{len(os.listdir(path / 'segments'))} segments")  # fmt: skip
    shard.close()
    opener = [sys.executable, "-c", OPEN_SCRIPT, str(path), str(Path(__file__).parent)]
    for _ in range(3):
        print("open in a fresh process:", subprocess.run(opener, capture_output=True, text=True,
              check=True).stdout.strip())  # fmt: skip
    held = edge.EdgeShard.load(str(path), None)
    second = subprocess.run(opener, capture_output=True, text=True)
    print("open while another process has it:", (second.stderr.strip().splitlines() or ["ok"])[-1])
    held.close()
    for target in (Path("/dev/shm") / f"{root.name}-copy", Path("/var/tmp") / f"{root.name}-copy"):
        started = time.perf_counter()
        shutil.copytree(path, target)
        os.sync()
        print(f"copy to {target.parent} (with sync): {time.perf_counter() - started:.2f} s")
        shutil.rmtree(target)
    shard = edge.EdgeShard.load(str(path), None)
    queries = [row["dense"] for row in rows[:: max(1, len(rows) // 40)]]
    written = args.points
    for unindexed in (0, 10_000, 20_000):
        for first in range(written, args.points + unindexed, 500):
            apply(shard, rows[first : min(first + 500, args.points + unindexed)])
        written = args.points + unindexed
        times = []
        for vector in queries:
            started = time.perf_counter()
            shard.query(hybrid(vector))
            times.append(time.perf_counter() - started)
        print(f"hybrid with {unindexed:,} points unindexed: p50 {ms(percentile(times, 0.5))} ms,",
              f"max {ms(max(times))} ms")  # fmt: skip
    shard.close()
    shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["probe", "ingest"])
    parser.add_argument("--points", type=int)
    parser.add_argument("--dimensions", type=int, default=384)
    parser.add_argument("--vectors", choices=["random", "words"], default="random")
    parser.add_argument("--rate", type=float, default=1200.0, help="most points a second")
    parser.add_argument("--policies", nargs="+", default=["inproc", "handover"],
                        choices=["inproc", "handover", "handover-idle-merge"])  # fmt: skip
    args = parser.parse_args()
    print(
        machine(),
        f"qdrant-edge {getattr(edge, '__version__', '0.9')}",
        f"TMPDIR {tempfile.gettempdir()}",
    )
    if args.mode == "probe":
        args.points = args.points or 100_000
        probe(args)
        return
    args.points = args.points or 25_000
    rows = make_rows(args.points, args.dimensions, args.vectors)
    for policy in args.policies:
        print(json.dumps(ingest(args, policy, rows)), flush=True)


if __name__ == "__main__":
    main()
