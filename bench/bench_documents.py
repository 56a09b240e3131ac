"""Document listing cost against index size, and a metadata PATCH of a 5,000-chunk document.

Run: `.venv/bin/python bench/bench_documents.py [--small 100] [--large 10000] [--chunks 5000]`
(Redis at 127.0.0.1:6379 DB 15 for the PATCH's fence and lock; the embedded store, Edge, in a
temporary directory).

Listing: two indexes of `--small` and `--large` one-chunk documents; a page of 100 listed
a page at a time (`VectorStore.document_page`, from the start and from the middle) and, side
by side, the previous way (scroll every live document record and sort them, then take the
page). The ratio large/small is what matters: near 1 means O(documents listed).

PATCH: one document of `--chunks` chunks (384-dimension vectors), its metadata replaced by
`docingest.pipeline.documents.patch_metadata` (copy to a new version, publish, retire); side by
side, the naive `set_payload` of the new metadata on all its points by filter, which is quicker but
lets a search see a mix while it runs on a Qdrant server.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from _common import machine  # noqa: E402
from _service_tools import code_version  # noqa: E402

from docingest.pipeline.documents import patch_metadata  # noqa: E402
from docingest.pipeline.embedders.base import EmbeddingConfig  # noqa: E402
from docingest.pipeline.services import Services  # noqa: E402
from docingest.pipeline.settings import Settings  # noqa: E402
from docingest.pipeline.sparse import encode_document  # noqa: E402
from docingest.pipeline.store import ChunkRecord, DocumentFields, IndexConfig, VectorStore  # noqa: E402
from docingest.pipeline.store.models import DOCUMENT_PAYLOAD_KEYS  # noqa: E402
from docingest.pipeline.store.requests import fields_filter, point_of  # noqa: E402

PATCH_CHUNKS = 5000
DIMENSIONS = 384
PAGE = 100
REPEATS = 5
CONFIG = IndexConfig(
    embedding=EmbeddingConfig(provider="local", model="bench", dimensions=DIMENSIONS)
)


def chunk(document_id: str, chunk_index: int, chunks: int, rng: np.random.Generator) -> ChunkRecord:
    text = f"Section {chunk_index} of {document_id}: harbour tariffs and shipping schedules."
    vector = rng.normal(size=DIMENSIONS).astype(np.float32)
    fields = DocumentFields(
        filename=f"{document_id}.txt", format="text", content_sha256=None, pages=None,
        words=10 * chunks, chunk_count=chunks, metadata={"team": "old", "n": chunk_index % 7},
        ingested_at="2026-01-01T00:00:00Z",
    )  # fmt: skip
    return ChunkRecord(
        document_id=document_id, version=1, chunk_index=chunk_index, text=text,
        text_hash=uuid.uuid4().hex, start=0, end=len(text), page_start=None, page_end=None,
        headings=[], dense=vector / np.linalg.norm(vector), sparse=encode_document(text),
        document=fields,
    )  # fmt: skip


def fill(store: VectorStore, index: str, documents: int, rng: np.random.Generator) -> None:
    """`documents` live one-chunk documents, written as an import writes points."""
    store.create_index(index, CONFIG)
    batch = []
    for number in range(documents):
        point = point_of(index, chunk(f"doc-{number:06d}", 0, 1, rng))
        point.payload["state"] = "live"
        batch.append(point)
        if len(batch) == 512:
            store.write_points(index, batch)
            batch = []
    if batch:
        store.write_points(index, batch)


def previous_page(store: VectorStore, index: str, after: str | None) -> list[str]:
    """The listing before this change: every live document record, sorted, then the page."""
    selector = fields_filter(state="live", chunk_index=0)
    ids = sorted(
        str((record.payload or {})["document_id"])
        for record in store._scroll(index, selector, payload=list(DOCUMENT_PAYLOAD_KEYS))
    )
    start = 0 if after is None else next(i for i, d in enumerate(ids) if d > after)
    return ids[start : start + PAGE]


def timed(action: object) -> float:
    samples = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        action()  # type: ignore[operator]
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def bench_listing(store: VectorStore, small: int, large: int) -> None:
    rng = np.random.default_rng(1)
    fill(store, "small", small, rng)
    fill(store, "large", large, rng)
    store.list_documents("small"), store.list_documents("large")  # one-off checks, caches
    print(f"\nListing a page of {PAGE} (median of {REPEATS}), ms:")
    print(f"{'':34}{small:>10} docs{large:>10} docs{'ratio':>9}")
    middle = {"small": f"doc-{small // 2:06d}", "large": f"doc-{large // 2:06d}"}
    for label, after in (("first page", None), ("a page from the middle", "middle")):
        rows = {
            "document_page (this)": lambda index, a=after: store.document_page(
                index, limit=PAGE, after=middle[index] if a else None
            ),
            "scroll all + sort (previous)": lambda index, a=after: previous_page(
                store, index, middle[index] if a else None
            ),
        }
        for name, run in rows.items():
            low = timed(lambda run=run: run("small")) * 1000
            high = timed(lambda run=run: run("large")) * 1000
            print(f"{name + ', ' + label:34}{low:>15.1f}{high:>15.1f}{high / low:>8.1f}x")
    started = time.perf_counter()
    info = store.get_index("large")
    assert info is not None and info.documents == large
    print(
        f"counting {large} documents (IndexInfo): {(time.perf_counter() - started) * 1000:.1f} ms"
    )


def bench_patch(data_dir: Path, chunks: int) -> None:
    settings = Settings(
        data_dir=data_dir / "patch",
        redis_url="redis://127.0.0.1:6379/15",
        redis_key_prefix=f"bench-{uuid.uuid4().hex[:8]}:",
    )
    services = Services(settings, owns_store=True)
    try:
        store = services.store
        store.create_index("patch", CONFIG)
        rng = np.random.default_rng(2)
        for name in ("big", "naive"):
            version = services.next_version("patch", name)
            assert version == 1
            store.write_chunks("patch", [chunk(name, n, chunks, rng) for n in range(chunks)])
            store.publish("patch", name, version)
        started = time.perf_counter()
        document = patch_metadata(services, "patch", "big", {"team": "new", "year": 2026})
        patched = time.perf_counter() - started
        assert document.version == 2 and store.count_points("patch", "big", version=2) == chunks
        started = time.perf_counter()
        store.engine.set_payload(
            "patch", {"metadata": {"team": "new"}}, fields_filter(document_id="naive")
        )
        naive = time.perf_counter() - started
        print(f"\nPATCH of a {chunks}-chunk document's metadata:")
        print(f"  patch_metadata (copy, publish, retire): {patched:.2f} s")
        print(f"  set_payload by filter (naive, a mix):   {naive:.2f} s  ({patched / naive:.1f}x)")
    finally:
        services.redis.delete(*services.redis.keys(f"{settings.redis_key_prefix}*") or ["-"])
        services.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=100)
    parser.add_argument("--large", type=int, default=10_000)
    parser.add_argument("--chunks", type=int, default=PATCH_CHUNKS)
    options = parser.parse_args()
    print(f"machine: {machine()}; {code_version()}; load average {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as directory:
        with VectorStore.open(Settings(data_dir=Path(directory) / "listing")) as store:
            bench_listing(store, options.small, options.large)
        bench_patch(Path(directory), options.chunks)
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
