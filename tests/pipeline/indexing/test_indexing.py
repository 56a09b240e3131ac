"""Replace-on-reingest with the real local model, Qdrant in memory and the real Redis (DB 15)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from docingest.pipeline.chunking import ChunkingSpec
from docingest.pipeline.embedders.base import COUNTERS, EmbeddingConfig
from docingest.pipeline.embedders.local import LocalEmbedder
from docingest.pipeline.errors import Cancelled, Superseded
from docingest.pipeline.indexing import IndexHooks, IndexRequest, IndexResult, index_document
from docingest.pipeline.indexing.request import STEPS
from docingest.pipeline.ingest.file import window_chunks
from docingest.pipeline.prepare import PreparedDocument, prepare_document
from docingest.pipeline.search import SearchMode, SearchRequest, resolve_target, search
from docingest.pipeline.settings import ChunkUnit, Settings
from docingest.pipeline.store import IndexConfig, VectorStore
from docingest.pipeline.store.fencing import DocumentFence
from tests.support.prepared import stream_of
from tests.support.redis_db import TestRedis

INDEX = "docs"
DOC = "notes.txt"
CHUNKING = ChunkingSpec(chunk_size=150, chunk_overlap=0, unit=ChunkUnit.CHARS)
"""Small chunks: each paragraph below (with or without a marker) is one chunk."""

PARAGRAPHS = [
    "Glaciers in the northern valley retreated by forty metres last decade, exposing moraine "
    "ridges that geologists mapped with drones.",
    "The bakery on Mill Street proofs its sourdough overnight and bakes at dawn in a wood-fired "
    "brick oven.",
    "Volunteers counted migrating cranes at the wetland reserve and reported record numbers in "
    "early October.",
    "The city council approved a budget for repaving cycle lanes and installing new crossings "
    "near schools.",
    "A string quartet rehearsed the late Beethoven quartets in the old chapel, whose acoustics "
    "suit chamber music.",
]
OLD_ONLY = "The lighthouse keeper recorded storm surges in a leather logbook every winter."
NEW_ONLY = "Quantum dot displays reach wider colour gamuts than phosphor backlights in televisions."
EXTRA = [
    "The ferry timetable changes in spring, when evening crossings run every forty minutes.",
    "Archivists scanned the parish registers so families can trace ancestors from home.",
]


class InjectedCrash(Exception):
    """Stands for a worker dying between two steps."""


@pytest.fixture(scope="module")
def embedder() -> LocalEmbedder:
    return LocalEmbedder.load()


@pytest.fixture(params=["qdrant-client", "edge"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[VectorStore]:
    """Each engine: qdrant-client stages every window and publishes; Edge writes these small
    documents once, live, at the end (`live_write_chunks`)."""
    qdrant_url = ":memory:" if request.param == "qdrant-client" else None
    vector_store = VectorStore.open(Settings(qdrant_url=qdrant_url, data_dir=tmp_path))
    config = IndexConfig(
        embedding=EmbeddingConfig(provider="local", model="all-MiniLM-L6-v2", dimensions=384),
        chunking=ChunkingSpec(chunk_size=CHUNKING.chunk_size, chunk_overlap=0),
    )
    vector_store.create_index(INDEX, config)
    yield vector_store
    vector_store.close()


@pytest.fixture
def fence(redis_db: TestRedis) -> DocumentFence:
    return DocumentFence(redis_db.client, key_prefix=redis_db.prefix)


def prepare(paragraphs: list[str], *, marker: str = "") -> PreparedDocument:
    text = "\n\n".join(f"{paragraph}{marker}" for paragraph in paragraphs)
    return prepare_document(text.encode(), filename=DOC, settings=Settings(), chunking=CHUNKING)


OLD = prepare([*PARAGRAPHS, OLD_ONLY], marker=" Revision alpha.")
NEW = prepare([*PARAGRAPHS, NEW_ONLY], marker=" Revision omega.")


class Ingest:
    """Calls `index_document` the way a worker does: a fresh version, floored at the store's."""

    def __init__(self, store: VectorStore, embedder: LocalEmbedder, fence: DocumentFence) -> None:
        self.store, self.embedder, self.fence = store, embedder, fence

    def version(self) -> int:
        live = self.store.live_document(INDEX, DOC)
        return self.fence.next_version(INDEX, DOC, floor=live.version if live else 0)

    def __call__(
        self,
        prepared: PreparedDocument,
        version: int | None = None,
        *,
        user_metadata: dict[str, Any] | None = None,
        force: bool = False,
        window: int | None = None,
        live_write_chunks: int | None = None,
        **hooks: Any,
    ) -> IndexResult:
        request = IndexRequest(
            stream_of(prepared.chunks, prepared.metadata),
            index=INDEX,
            document_id=DOC,
            version=self.version() if version is None else version,
            user_metadata=user_metadata or {},
            force=force,
        )
        return index_document(
            request,
            store=self.store,
            embedder=self.embedder,
            fence=self.fence,
            hooks=IndexHooks(**hooks),
            window=window or window_chunks(Settings(), self.embedder),
            live_write_chunks=(
                Settings().live_write_chunks if live_write_chunks is None else live_write_chunks
            ),
        )


@pytest.fixture
def ingest(store: VectorStore, embedder: LocalEmbedder, fence: DocumentFence) -> Ingest:
    return Ingest(store, embedder, fence)


def embedded_inputs(action: Callable[[], Any]) -> tuple[Any, int]:
    """Run `action`; return its result and how many texts were embedded meanwhile."""
    before = COUNTERS.snapshot()["inputs"]
    result = action()
    return result, COUNTERS.snapshot()["inputs"] - before


def texts_of(prepared: PreparedDocument) -> set[str]:
    return {chunk.text for chunk in prepared.chunks}


def found_texts(
    store: VectorStore, embedder: LocalEmbedder, query: str, mode: SearchMode = "hybrid"
) -> set[str]:
    request = SearchRequest(query=query, top_k=50, mode=mode, filter={"document_id": DOC})
    target = resolve_target(store, INDEX, embedder_for=lambda _config: embedder)
    return {result.text for result in search(store, target, request).results}


def crash_at(step: str) -> Callable[[str], None]:
    def on_step(name: str) -> None:
        if name == step:
            raise InjectedCrash(name)

    return on_step


def assert_one_complete_version(store: VectorStore, embedder: LocalEmbedder) -> None:
    """Every search shows all chunks of exactly one version, and that version is complete."""
    for query in (OLD_ONLY, NEW_ONLY, "sourdough bakery"):
        found = found_texts(store, embedder, query)
        versions = [(1, OLD), (2, NEW)]
        matches = [(v, p) for v, p in versions if found and found <= texts_of(p)]
        assert len(matches) == 1, f"{query!r} found a mix or nothing: {sorted(found)}"
        version, prepared = matches[0]
        assert found == texts_of(prepared)
        live = store.count_points(INDEX, DOC, version=version, state="live")
        assert live == len(prepared.chunks)


def test_first_ingest_stores_every_chunk_live(store: VectorStore, ingest: Ingest) -> None:
    result, embedded = embedded_inputs(lambda: ingest(OLD, user_metadata={"team": "geo"}))
    assert result == IndexResult(DOC, 1, "txt", None, OLD.metadata["words"], 6, 0, False)
    assert embedded == 6
    assert store.count_points(INDEX, DOC, state="live") == 6
    assert store.count_points(INDEX, DOC, state="staged") == 0
    document = store.get_document(INDEX, DOC)
    assert (document.version, document.chunks, document.metadata) == (1, 6, {"team": "geo"})
    assert document.content_sha256 == OLD.metadata["sha256"]


def test_a_changed_document_re_embeds_only_its_changed_chunks(
    store: VectorStore, embedder: LocalEmbedder, ingest: Ingest
) -> None:
    ingest(prepare([*PARAGRAPHS, OLD_ONLY]))
    changed = prepare([PARAGRAPHS[0], NEW_ONLY, *PARAGRAPHS[2:], EXTRA[0]])
    result, embedded = embedded_inputs(lambda: ingest(changed))
    assert (result.version, result.chunks, result.chunks_reused) == (2, 6, 4)
    assert embedded == 2
    assert store.count_points(INDEX, DOC) == 6
    assert store.count_points(INDEX, DOC, version=2, state="live") == 6
    assert found_texts(store, embedder, "lighthouse keeper logbook", "keyword") == set()
    assert found_texts(store, embedder, "sourdough") == texts_of(changed)


def test_repeated_chunks_are_embedded_once(store: VectorStore, ingest: Ingest) -> None:
    result, embedded = embedded_inputs(lambda: ingest(prepare(PARAGRAPHS[:2] * 3)))
    assert (result.chunks, embedded) == (6, 2)
    assert store.count_points(INDEX, DOC) == 6


def test_unchanged_content_is_not_embedded_again(store: VectorStore, ingest: Ingest) -> None:
    ingest(OLD, user_metadata={"team": "geo"})
    result, embedded = embedded_inputs(lambda: ingest(OLD, user_metadata={"team": "geo"}))
    assert result.unchanged and (result.version, result.chunks, result.chunks_reused) == (1, 6, 0)
    assert embedded == 0
    assert store.count_points(INDEX, DOC) == 6


def test_an_unchanged_upload_clears_a_crashed_attempts_leftovers(
    store: VectorStore, ingest: Ingest
) -> None:
    ingest(OLD)
    with pytest.raises(InjectedCrash):  # staged, even on Edge, so something is left over
        ingest(NEW, on_step=crash_at("publish"), live_write_chunks=0)
    assert store.count_points(INDEX, DOC, state="staged") == 6
    result, embedded = embedded_inputs(lambda: ingest(OLD))
    assert result.unchanged and (result.version, embedded) == (1, 0)
    assert store.count_points(INDEX, DOC) == store.count_points(INDEX, DOC, version=1) == 6


def test_new_metadata_makes_a_new_version_without_embedding(
    store: VectorStore, ingest: Ingest
) -> None:
    ingest(OLD, user_metadata={"team": "geo"})
    result, embedded = embedded_inputs(lambda: ingest(OLD, user_metadata={"team": "birds"}))
    assert not result.unchanged and (result.version, result.chunks_reused) == (2, 6)
    assert embedded == 0
    assert store.get_document(INDEX, DOC).metadata == {"team": "birds"}
    assert store.count_points(INDEX, DOC) == 6


def test_force_re_embeds_unchanged_content(store: VectorStore, ingest: Ingest) -> None:
    ingest(OLD)
    result, embedded = embedded_inputs(lambda: ingest(OLD, force=True))
    assert not result.unchanged and (result.version, result.chunks_reused) == (2, 0)
    assert embedded == 6
    assert store.count_points(INDEX, DOC) == store.count_points(INDEX, DOC, version=2) == 6


def test_re_running_the_same_job_writes_no_duplicates(store: VectorStore, ingest: Ingest) -> None:
    version = ingest.version()
    first = ingest(OLD, version)
    again, embedded = embedded_inputs(lambda: ingest(OLD, version))
    assert (again.version, again.chunks, embedded) == (first.version, 6, 0)
    assert store.count_points(INDEX, DOC) == 6


@pytest.mark.parametrize("step", STEPS)
def test_a_crash_at_any_step_leaves_one_complete_version_and_a_re_run_completes(
    store: VectorStore, embedder: LocalEmbedder, ingest: Ingest, step: str
) -> None:
    ingest(OLD)
    version = ingest.version()
    with pytest.raises(InjectedCrash):
        ingest(NEW, version, on_step=crash_at(step))
    assert_one_complete_version(store, embedder)

    result, embedded = embedded_inputs(lambda: ingest(NEW, version))
    assert result.version == version == 2
    if step == "retire" or (step == "publish" and not store.writes_live):
        assert embedded == 0  # the staged or published vectors are reused
    if step == "publish" and store.writes_live:
        assert embedded > 0  # held for the live write, which never happened: nothing to reuse
    assert store.count_points(INDEX, DOC) == store.count_points(INDEX, DOC, version=2) == 6
    assert store.count_points(INDEX, DOC, state="live") == 6
    assert found_texts(store, embedder, OLD_ONLY) == texts_of(NEW)


def test_the_embedded_store_writes_a_small_document_once_live_and_a_long_one_staged(
    store: VectorStore, ingest: Ingest
) -> None:
    """On Edge a document within `live_write_chunks` reaches the store only at its publish,
    already live (so no build indexes it before a publish copies it back); past the limit,
    and on qdrant-client always, its windows are staged first."""
    ingest(OLD)
    at_publish: list[int] = []

    def ingest_counting(document: PreparedDocument, **options: Any) -> None:
        version = ingest.version()

        def count_this_version(step: str) -> None:
            if step == "publish":
                at_publish.append(store.count_points(INDEX, DOC, version=version))

        ingest(document, version, on_step=count_this_version, **options)

    ingest_counting(NEW)
    ingest_counting(OLD, live_write_chunks=5, window=2)  # 6 chunks: past the limit
    assert at_publish == ([0, 6] if store.writes_live else [6, 6])
    assert store.count_points(INDEX, DOC) == store.count_points(INDEX, DOC, state="live") == 6


def test_searches_during_a_re_ingest_never_see_a_mix_or_nothing(
    store: VectorStore, embedder: LocalEmbedder, ingest: Ingest
) -> None:
    ingest(OLD)
    seen: list[set[str]] = []
    done = threading.Event()

    def searcher() -> None:
        modes: list[SearchMode] = ["hybrid", "vector", "keyword"]
        while not done.is_set():
            for mode in modes:
                seen.append(found_texts(store, embedder, "revision sourdough cranes", mode))

    def wait_for_searches(count: int) -> int:
        deadline = time.monotonic() + 30
        while len(seen) < count and time.monotonic() < deadline:
            time.sleep(0.005)
        return len(seen)

    def slow_step(name: str) -> None:
        wait_for_searches(len(seen) + 2)  # a whole search runs at every step boundary

    thread = threading.Thread(target=searcher)
    thread.start()
    try:
        before = wait_for_searches(3)
        ingest(NEW, on_step=slow_step)
        during = wait_for_searches(len(seen) + 2) - before  # two more start after the ingest
    finally:
        done.set()
        thread.join()
    old, new = texts_of(OLD), texts_of(NEW)
    assert during >= len(STEPS) + 2
    for found in seen:
        assert found and (found <= old or found <= new), sorted(found)
    assert all(found <= old for found in seen[:before]) and seen[-1] <= new


def test_a_stale_attempt_never_replaces_a_newer_version(
    store: VectorStore, embedder: LocalEmbedder, ingest: Ingest
) -> None:
    stale = ingest.version()
    newer = ingest.version()
    ingest(NEW, newer)
    with pytest.raises(Superseded) as caught:
        ingest(OLD, stale)
    assert caught.value.code == "superseded"
    assert store.count_points(INDEX, DOC) == store.count_points(INDEX, DOC, version=newer) == 6
    assert found_texts(store, embedder, OLD_ONLY) == texts_of(NEW)


def test_an_attempt_overtaken_while_embedding_drops_its_work(
    store: VectorStore, embedder: LocalEmbedder, ingest: Ingest
) -> None:
    def newer_upload_finishes(name: str) -> None:
        if name == "embed":
            ingest(NEW)

    with pytest.raises(Superseded):
        ingest(OLD, on_step=newer_upload_finishes)
    assert store.get_document(INDEX, DOC).version == 2
    assert store.count_points(INDEX, DOC) == store.count_points(INDEX, DOC, version=2) == 6


def test_an_upload_accepted_before_publish_stops_the_older_attempt(
    store: VectorStore, embedder: LocalEmbedder, ingest: Ingest
) -> None:
    ingest(OLD)

    def newer_upload_accepted(name: str) -> None:
        if name == "publish":
            ingest.version()

    with pytest.raises(Superseded):
        ingest(NEW, on_step=newer_upload_accepted)
    assert store.count_points(INDEX, DOC) == store.count_points(INDEX, DOC, version=1) == 6
    assert found_texts(store, embedder, NEW_ONLY) == texts_of(OLD)


@pytest.mark.parametrize("when", ["embed", "write", "publish"])
def test_cancel_leaves_the_index_as_it_was(
    store: VectorStore, embedder: LocalEmbedder, ingest: Ingest, when: str
) -> None:
    ingest(OLD)
    cancel = threading.Event()

    def on_step(name: str) -> None:
        if name == when:
            cancel.set()

    with pytest.raises(Cancelled) as caught:
        ingest(NEW, on_step=on_step, should_cancel=cancel.is_set)
    assert caught.value.code == "cancelled"
    assert store.count_points(INDEX, DOC) == store.count_points(INDEX, DOC, version=1) == 6
    assert store.count_points(INDEX, DOC, state="staged") == 0
    assert found_texts(store, embedder, NEW_ONLY) == texts_of(OLD)
    assert ingest(NEW).version == 3  # and the document can be uploaded again at once


def test_progress_counts_reused_chunks_and_cancel_is_checked_per_window(
    store: VectorStore, ingest: Ingest
) -> None:
    ingest(prepare([*PARAGRAPHS, OLD_ONLY]))
    changed = prepare([*PARAGRAPHS, NEW_ONLY, *EXTRA])
    reports: list[tuple[str, int, int]] = []
    checks: list[int] = []

    def should_cancel() -> bool:
        checks.append(len(reports))
        return False

    result = ingest(
        changed,
        on_progress=lambda *report: reports.append(report),
        should_cancel=should_cancel,
        window=1,
    )
    assert result.chunks_reused == 5
    embedding = [(done, total) for stage, done, total in reports if stage == "embedding"]
    # Windows of one chunk: a reused chunk is counted as its window passes, like an embedded one.
    assert embedding[0] == (0, 8) and embedding[-1] == (8, 8)
    assert [done for done, _ in embedding] == sorted(done for done, _ in embedding)
    assert {done for done, _ in embedding} == set(range(9))
    assert [r for r in reports if r[0] == "storing"][-1] == ("storing", 8, 8)
    assert len(checks) >= 3 + 2  # one per embedded window, then while writing and at publish


def test_deleting_a_document_removes_every_point(store: VectorStore, ingest: Ingest) -> None:
    ingest(OLD)
    with pytest.raises(InjectedCrash):  # leaves a staged version behind
        ingest(NEW, on_step=crash_at("publish"), live_write_chunks=0)
    assert store.count_points(INDEX, DOC, state="staged") == 6
    assert store.delete_document(INDEX, DOC)
    assert store.count_points(INDEX, DOC) == 0
    assert store.live_document(INDEX, DOC) is None


def test_an_embedder_of_another_model_is_refused(
    store: VectorStore, embedder: LocalEmbedder, fence: DocumentFence
) -> None:
    other = IndexConfig(
        embedding=EmbeddingConfig(provider="openai", model="text-embedding-3-small", dimensions=384)
    )
    store.create_index("other", other)
    with pytest.raises(ValueError, match="text-embedding-3-small"):
        index_document(
            IndexRequest(
                stream_of(OLD.chunks, OLD.metadata), index="other", document_id=DOC, version=1
            ),
            store=store,
            embedder=embedder,
            fence=fence,
            window=window_chunks(Settings(), embedder),
        )
    assert store.count_points("other") == 0
