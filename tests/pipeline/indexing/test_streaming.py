"""Streaming a long document from the parsing child into the store, window by window: the real
child, the fake OpenAI-compatible server over HTTP, Qdrant in memory and the real Redis."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from docingest.pipeline.chunking import Chunk, ChunkingSpec
from docingest.pipeline.embedders.base import COUNTERS, EmbeddingConfig
from docingest.pipeline.embedders.openai_compat import OpenAICompatibleEmbedder
from docingest.pipeline.errors import Cancelled, DocumentTooLarge, Superseded
from docingest.pipeline.indexing import (
    IndexHooks,
    IndexRequest,
    IndexResult,
    index_document,
    window_vectors,
)
from docingest.pipeline.isolation.parent import Limits
from docingest.pipeline.prepare import CHUNK_BATCH, prepare_document
from docingest.pipeline.settings import ChunkUnit, Settings
from docingest.pipeline.store import IndexConfig, VectorStore
from docingest.pipeline.store.fencing import DocumentFence
from docingest.pipeline.store.requests import fields_filter
from tests.support.embedding_server import FakeEmbeddingServer
from tests.support.paths import CORPUS_DIR
from tests.support.prepared import open_isolated, prepare_isolated
from tests.support.redis_db import TestRedis
from tests.support.settings import FAKE_DIMENSIONS, FAKE_MODEL

INDEX = "docs"
DOC = "long.txt"
WINDOW = 16
CHUNKING = ChunkingSpec(chunk_size=300, chunk_overlap=0, unit=ChunkUnit.CHARS)
PARAGRAPHS = 1200
"""One chunk each: many more chunks than the run may hold (2 windows and a child's batch)."""
PDF = CORPUS_DIR / "pdf" / "ieee-tifs-individual-dp-2016.pdf"
MANUAL = CORPUS_DIR / "pdf" / "irs-irm-2.3.59-400p.pdf"
"""400 pages with an outline: sections close, and chunks go out, long before the last page."""


class InjectedCrash(Exception):
    """Stands for a worker dying mid-stream."""


def long_text(path: Path, marker: str) -> Path:
    """A text file of PARAGRAPHS distinct paragraphs, each ending with `marker`."""
    lines = [
        f"Paragraph {n} of the ledger records shipment {n * 7919 % 10007} leaving the harbour "
        f"at dawn, bound for port {n % 97}, with cargo manifest entry {n} signed twice by the "
        f"quartermaster and the customs officer on duty that morning. {marker}"
        for n in range(PARAGRAPHS)
    ]
    path.write_text("\n\n".join(lines), encoding="utf-8")
    return path


@pytest.fixture
def embedder(embedding_server: FakeEmbeddingServer) -> OpenAICompatibleEmbedder:
    values: dict[str, Any] = {
        "openai_base_url": embedding_server.base_url,
        "openai_api_key": "sk-test",
        "embedding_timeout_seconds": 5.0,
        "embedding_max_batch": 8,
    }
    settings = Settings(**values)
    return OpenAICompatibleEmbedder.from_settings(
        model=FAKE_MODEL, dimensions=FAKE_DIMENSIONS, settings=settings
    )


@pytest.fixture
def store(embedder: OpenAICompatibleEmbedder) -> Iterator[VectorStore]:
    vector_store = VectorStore.open(Settings(qdrant_url=":memory:"))
    embedding = EmbeddingConfig(provider="openai", model=FAKE_MODEL, dimensions=FAKE_DIMENSIONS)
    vector_store.create_index(INDEX, IndexConfig(embedding=embedding, chunking=CHUNKING))
    yield vector_store
    vector_store.close()


class Ingest:
    """Streams a file from the real parsing child into `index_document`, as the runner does."""

    def __init__(
        self, store: VectorStore, embedder: OpenAICompatibleEmbedder, fence: DocumentFence
    ) -> None:
        self.store, self.embedder, self.fence = store, embedder, fence

    def version(self) -> int:
        live = self.store.live_document(INDEX, DOC)
        return self.fence.next_version(INDEX, DOC, floor=live.version if live else 0)

    def __call__(
        self,
        path: Path,
        version: int | None = None,
        settings: Settings | None = None,
        window: int = WINDOW,
        **hooks: Any,
    ) -> IndexResult:
        settings = settings or Settings()
        with open_isolated(path, filename=DOC, settings=settings, chunking=CHUNKING) as prepared:
            request = IndexRequest(
                prepared,
                index=INDEX,
                document_id=DOC,
                version=self.version() if version is None else version,
            )
            return index_document(
                request,
                store=self.store,
                embedder=self.embedder,
                fence=self.fence,
                hooks=IndexHooks(**hooks),
                window=window,
            )


@pytest.fixture
def ingest(store: VectorStore, embedder: OpenAICompatibleEmbedder, redis_db: TestRedis) -> Ingest:
    return Ingest(store, embedder, DocumentFence(redis_db.client, key_prefix=redis_db.prefix))


def stored_chunks(store: VectorStore) -> list[tuple[Any, ...]]:
    """(chunk_index, text, start, end, page_start, page_end, version) of every point."""
    keys = ("chunk_index", "text", "start", "end", "page_start", "page_end", "version")
    rows = [tuple(point.payload[key] for key in keys) for point in store.live_points(INDEX)]
    return sorted(rows)


def after_embedding(
    count: int, action: Callable[[], Any]
) -> Callable[[str, int, int | None], None]:
    """An `on_progress` that runs `action` once `count` chunks have been embedded."""
    fired: list[int] = []

    def on_progress(stage: str, done: int, total: int | None) -> None:
        if stage == "embedding" and done >= count and not fired:
            fired.append(done)
            action()

    return on_progress


def test_a_streamed_pdf_stores_every_chunk_once_with_its_offsets_and_pages(
    store: VectorStore, ingest: Ingest
) -> None:
    expected = prepare_document(
        PDF.read_bytes(), filename=DOC, settings=Settings(), chunking=CHUNKING
    ).chunks
    assert len(expected) > 4 * WINDOW and expected[-1].page_end and expected[-1].page_end > 1

    result = ingest(PDF)
    assert result.chunks == len(expected) == store.count_points(INDEX, DOC, state="live")
    want = [(c.index, c.text, c.start, c.end, c.page_start, c.page_end, 1) for c in expected]
    assert stored_chunks(store) == want
    assert store.get_document(INDEX, DOC).chunks == len(expected)


def test_the_run_holds_at_most_two_windows_and_one_batch(
    tmp_path: Path, store: VectorStore, ingest: Ingest
) -> None:
    held: list[int] = []
    result = ingest(long_text(tmp_path / "long.txt", "alpha"), on_held=held.append)
    bound = 2 * WINDOW + CHUNK_BATCH
    assert result.chunks == PARAGRAPHS > 3 * bound
    assert 0 < max(held) <= bound
    assert held[-1] == 0  # every chunk taken was written


def test_nothing_of_a_new_version_is_visible_before_publish(
    tmp_path: Path, store: VectorStore, ingest: Ingest
) -> None:
    ingest(long_text(tmp_path / "old.txt", "alpha"))
    seen: dict[str, int] = {}

    def look() -> None:
        seen["staged"] = store.count_points(INDEX, DOC, version=2, state="staged")
        seen["live new"] = store.count_points(INDEX, DOC, version=2, state="live")
        seen["live old"] = store.count_points(INDEX, DOC, version=1, state="live")

    ingest(long_text(tmp_path / "new.txt", "omega"), on_progress=after_embedding(600, look))
    assert seen["staged"] >= 600 - 2 * WINDOW  # written while later windows were embedded
    assert (seen["live new"], seen["live old"]) == (0, PARAGRAPHS)
    assert {row[-1] for row in stored_chunks(store)} == {2}


def test_a_cancel_mid_stream_leaves_the_index_as_it_was_and_stops_the_child(
    tmp_path: Path, store: VectorStore, ingest: Ingest
) -> None:
    ingest(long_text(tmp_path / "old.txt", "alpha"))
    cancel: list[bool] = []
    with pytest.raises(Cancelled):
        ingest(
            long_text(tmp_path / "new.txt", "omega"),
            on_progress=after_embedding(300, lambda: cancel.append(True)),
            should_cancel=lambda: bool(cancel),
        )
    assert store.count_points(INDEX, DOC) == store.count_points(INDEX, DOC, version=1, state="live")
    assert store.count_points(INDEX, DOC) == PARAGRAPHS
    assert {row[-1] for row in stored_chunks(store)} == {1}
    # The fork server was brought back to rest (the stopped child reaped): it parses again.
    assert len(prepare_isolated(PDF, filename=PDF.name, settings=Settings()).chunks) > 0


def test_a_cancel_is_seen_within_one_batch_of_the_embedder_in_flight(
    tmp_path: Path, store: VectorStore, ingest: Ingest, embedder: OpenAICompatibleEmbedder
) -> None:
    """Issue 40: a cancel took 10.7 s under load, as a window's batches asked at most every
    0.5 s. Bounded in work instead: once the flag is up, at most the embedder's batches in
    flight finish (concurrency x max batch chunks), in a window of hundreds, whatever the
    machine's load."""
    cancel: list[int] = []
    reported: list[int] = []

    def on_progress(stage: str, done: int, total: int | None) -> None:
        if stage == "embedding":
            reported.append(done)
            if done >= 100 and not cancel:
                cancel.append(done)  # the request arrives here

    with pytest.raises(Cancelled):
        ingest(long_text(tmp_path / "long.txt", "omega"), window=400, on_progress=on_progress,
               should_cancel=lambda: bool(cancel))  # fmt: skip
    in_flight = embedder.concurrency * embedder.max_batch
    assert cancel and max(reported) - cancel[0] <= in_flight < 400 - 100
    assert store.count_points(INDEX, DOC) == 0  # nothing of it left


def test_an_upload_accepted_mid_stream_stops_the_older_attempt_and_drops_its_windows(
    tmp_path: Path, store: VectorStore, ingest: Ingest
) -> None:
    ingest(long_text(tmp_path / "old.txt", "alpha"))
    with pytest.raises(Superseded):
        ingest(
            long_text(tmp_path / "new.txt", "omega"),
            on_progress=after_embedding(300, ingest.version),  # a newer upload is accepted
        )
    assert store.count_points(INDEX, DOC, version=2) == 0  # none landed after the drop
    assert store.count_points(INDEX, DOC) == PARAGRAPHS
    assert {row[-1] for row in stored_chunks(store)} == {1}


def test_a_crash_mid_stream_then_the_redelivery_converges(
    tmp_path: Path, store: VectorStore, ingest: Ingest
) -> None:
    ingest(long_text(tmp_path / "old.txt", "alpha"))
    new = long_text(tmp_path / "new.txt", "omega")
    version = ingest.version()

    def crash() -> None:
        raise InjectedCrash()

    with pytest.raises(InjectedCrash):
        ingest(new, version, on_progress=after_embedding(500, crash))
    staged = store.count_points(INDEX, DOC, version=version, state="staged")
    assert 0 < staged < PARAGRAPHS
    assert store.count_points(INDEX, DOC, version=1, state="live") == PARAGRAPHS

    before = COUNTERS.snapshot()["inputs"]
    result = ingest(new, version)
    embedded = COUNTERS.snapshot()["inputs"] - before
    assert (result.version, result.chunks) == (version, PARAGRAPHS)
    assert embedded == PARAGRAPHS - staged  # the staged points' vectors were reused
    assert store.count_points(INDEX, DOC) == PARAGRAPHS
    assert store.count_points(INDEX, DOC, version=version, state="live") == PARAGRAPHS


def test_a_slow_consumer_does_not_spend_the_childs_wall_clock_limit(tmp_path: Path) -> None:
    """The child waits on the pipe while the worker embeds; only the time the worker waits on
    the child counts against `wall_seconds`."""
    path = long_text(tmp_path / "long.txt", "alpha")
    settings = Settings()
    limits = Limits(memory_bytes=settings.extraction_memory_bytes, cpu_seconds=60, wall_seconds=12)
    batches = 0
    with open_isolated(
        path, filename=DOC, settings=settings, chunking=CHUNKING, limits=limits
    ) as prepared:
        for _ in prepared.batches():
            batches += 1
            time.sleep(3.0)  # a slow embedder: 5 batches take longer than the limit
    assert prepared.chunk_count is not None
    assert batches == -(-prepared.chunk_count // CHUNK_BATCH) >= 4


def test_a_re_ingest_reuses_the_live_vectors_window_by_window(
    tmp_path: Path, store: VectorStore, ingest: Ingest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each window looks up the live version's vectors for its own texts, so a re-ingest holds
    no more than a window's: every unchanged chunk of a 75-window document is reused, only the
    changed ones are embedded, and no lookup returns more than a window of vectors."""
    largest = 0
    read = store.stored_vectors

    def recorded(*args: Any, **kwargs: Any) -> dict[str, Any]:
        nonlocal largest
        vectors = read(*args, **kwargs)  # the real store's answer, only measured here
        largest = max(largest, len(vectors))
        return vectors

    old = long_text(tmp_path / "old.txt", "alpha")
    ingest(old)
    paragraphs = old.read_text(encoding="utf-8").split("\n\n")
    changed = range(5, PARAGRAPHS, 100)  # one chunk in every ~6 windows
    for n in changed:
        paragraphs[n] = paragraphs[n].replace("alpha", "revised")
    new = tmp_path / "new.txt"
    new.write_text("\n\n".join(paragraphs), encoding="utf-8")

    monkeypatch.setattr(store, "stored_vectors", recorded)
    before = COUNTERS.snapshot()["inputs"]
    result = ingest(new)
    embedded = COUNTERS.snapshot()["inputs"] - before
    assert 0 < largest <= WINDOW
    assert (result.version, result.chunks) == (2, PARAGRAPHS)
    assert result.chunks_reused == PARAGRAPHS - len(changed)
    assert embedded == len(changed)
    assert store.count_points(INDEX, DOC, version=2, state="live") == PARAGRAPHS


def test_a_pdfs_first_chunks_are_sent_before_its_later_pages_are_read() -> None:
    pages_read: list[int] = []
    read_when_batched: list[int] = []
    with open_isolated(
        MANUAL,
        filename=DOC,
        settings=Settings(),
        chunking=CHUNKING,
        on_page=lambda done, total: pages_read.append(done),
    ) as prepared:
        assert prepared.chunk_count is None and "words" not in prepared.metadata
        assert prepared.metadata["sha256"] and prepared.metadata["format"] == "pdf"
        chunks = 0
        for batch in prepared.batches():
            read_when_batched.append(pages_read[-1])
            chunks += len(batch)
    # Progress lines and batches cross the pipe in the order the child wrote them.
    assert read_when_batched[0] < 100 < 400 == pages_read[-1]
    assert read_when_batched == sorted(read_when_batched) and len(read_when_batched) >= 4
    expected = prepare_document(
        MANUAL.read_bytes(), filename=DOC, settings=Settings(), chunking=CHUNKING
    )
    assert prepared.chunk_count == chunks == len(expected.chunks)
    for key in ("pages", "words", "characters", "title", "language"):
        assert prepared.metadata[key] == expected.metadata[key], key


def test_a_streamed_documents_late_fields_are_set_on_every_point_at_publish(
    store: VectorStore, ingest: Ingest
) -> None:
    staged: list[dict[str, Any]] = []

    def look() -> None:
        selector = fields_filter(document_id=DOC, state="staged")
        records, _ = store.engine.scroll(
            INDEX, selector, limit=10_000, offset=None, payload=None, vectors=None
        )
        staged.extend(record.payload or {} for record in records)

    result = ingest(MANUAL, on_progress=after_embedding(3 * WINDOW, look))
    assert staged and all(payload["chunk_count"] is None for payload in staged)
    assert all(payload["words"] is None and payload["pages"] is None for payload in staged)
    assert {payload["filename"] for payload in staged} == {DOC}
    document = store.get_document(INDEX, DOC)
    assert (document.pages, document.chunks) == (400, result.chunks) and document.words
    live = [point.payload for point in store.live_points(INDEX)]
    assert len(live) == result.chunks
    assert {(p["chunk_count"], p["pages"], p["words"]) for p in live} == {
        (result.chunks, 400, document.words)
    }


def test_a_document_failing_after_its_first_windows_leaves_the_index_as_it_was(
    tmp_path: Path, store: VectorStore, ingest: Ingest
) -> None:
    """The PDF passes the character limit on a late page, after windows of its early pages
    were written as staged: they are dropped, and the live version stays."""
    ingest(long_text(tmp_path / "old.txt", "alpha"))
    stored: list[int] = []
    with pytest.raises(DocumentTooLarge, match="more than 200,000 characters"):
        ingest(
            MANUAL,
            settings=Settings(max_extracted_chars=200_000),
            on_stored=lambda done, total: stored.append(done),
        )
    assert max(stored) > 2 * WINDOW
    assert store.count_points(INDEX, DOC, version=2) == 0
    assert store.count_points(INDEX, DOC) == PARAGRAPHS
    assert {row[-1] for row in stored_chunks(store)} == {1}


def test_the_count_comes_before_the_last_sections_chunks(tmp_path: Path) -> None:
    """A text without headings is one section, split once extraction has ended: the child
    counts it and says so before sending it, so the total is known from the first batch."""
    path = long_text(tmp_path / "long.txt", "alpha")
    with open_isolated(path, filename=DOC, settings=Settings(), chunking=CHUNKING) as prepared:
        counts = [prepared.chunk_count for _ in prepared.batches()]
    assert len(counts) >= 4 and set(counts) == {PARAGRAPHS}
    assert prepared.metadata["words"] > PARAGRAPHS


def test_a_text_repeated_across_windows_is_embedded_once(
    tmp_path: Path, store: VectorStore, ingest: Ingest
) -> None:
    """A boilerplate paragraph at chunks 40n and 40n + 17, in other windows: embedded once
    for the document, its vector kept among the run's recent ones."""
    boilerplate = (  # as long as a ledger paragraph: a chunk of its own
        "This page is intentionally left blank by order of the harbour master, who keeps the "
        "ledger of every shipment leaving at dawn and signs each entry twice with the customs "
        "officer on duty."
    )
    path = long_text(tmp_path / "long.txt", "alpha")
    paragraphs = path.read_text(encoding="utf-8").split("\n\n")
    for n in range(0, PARAGRAPHS, 40):
        paragraphs[n] = paragraphs[n + 17] = boilerplate
    path.write_text("\n\n".join(paragraphs), encoding="utf-8")

    before = COUNTERS.snapshot()["inputs"]
    result = ingest(path)
    embedded = COUNTERS.snapshot()["inputs"] - before
    assert result.chunks == PARAGRAPHS and result.chunks_reused == 0
    assert embedded == len(set(paragraphs)) == PARAGRAPHS - 2 * (PARAGRAPHS // 40) + 1
    vectors = [
        point.dense for point in store.live_points(INDEX) if point.payload["text"] == boilerplate
    ]
    assert len(vectors) == 2 * (PARAGRAPHS // 40)
    assert all(np.array_equal(vector, vectors[0]) for vector in vectors)


@pytest.mark.parametrize(("cache_bytes", "embedded_again"), [(None, 0), (0, 1)])
def test_a_repeat_is_embedded_again_once_it_has_left_the_bounded_cache(
    embedder: OpenAICompatibleEmbedder,
    monkeypatch: pytest.MonkeyPatch,
    cache_bytes: int | None,
    embedded_again: int,
) -> None:
    """With the default cache a repeat two windows later reuses its vector; with the cache
    at its floor (one window of vectors) it is embedded again."""
    if cache_bytes is not None:
        monkeypatch.setattr(window_vectors, "REPEAT_CACHE_BYTES", cache_bytes)
    embedding = EmbeddingConfig(provider="openai", model=FAKE_MODEL, dimensions=FAKE_DIMENSIONS)
    vectors = window_vectors.WindowVectors(
        IndexConfig(embedding=embedding, chunking=CHUNKING),
        embedder,
        WINDOW,
        reusable=lambda base, hashes: {},
    )
    texts = [f"Entry {n} of the ledger, signed twice." for n in range(2 * WINDOW)]
    windows = [texts[:WINDOW], texts[WINDOW:], [texts[0], "A text of its own."]]
    base, before = 0, COUNTERS.snapshot()["inputs"]
    for window in windows:
        chunks = [
            Chunk(base + i, text, 0, len(text), None, None, ()) for i, text in enumerate(window)
        ]
        result = vectors.window(chunks, base=base, on_progress=lambda *_: None)
        assert set(result.dense) >= set(result.hashes) and result.reused == 0
        base += len(chunks)
    assert len(vectors.recent) <= vectors.capacity
    assert COUNTERS.snapshot()["inputs"] - before == 2 * WINDOW + 1 + embedded_again
