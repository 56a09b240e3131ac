"""Store one prepared document as a new version of itself: replace-on-reingest.

Steps, each announced through `on_step(name)`:

    check    unchanged content, metadata and filename → done, nothing embedded (a crashed
             attempt's leftover points are deleted on the way)
    reuse    (announced only: each window reads its own) dense vectors of the live version
             (and of this version's own staged points, left by a crashed attempt), by chunk
             text hash; none with `force`
    embed    announced before the document's lock is taken; then, per window:
    write    under the lock, window by window: stop if cancelled or superseded, sparse-encode
             the window, embed the texts with no reusable vector (stop if cancelled after
             each of the embedder's batches), upsert it as staged
             (invisible) on a writer thread while the next window is embedded
    publish  stop if cancelled or superseded, then mark the version live
    retire   delete every other version

Where the store `writes_live` (the embedded engine), a document of at most
`live_write_chunks` chunks is not staged: its windows are held, and `publish` writes them all
live in one update, which searches see whole or not at all. A publish on that engine copies
every point that a build indexed meanwhile back for a second build; a larger document is
staged as above (`docingest.pipeline.store.edge_optimizer` waits for the publish of staged points).

Until `publish` the old version is untouched and the new points are invisible, so a cancel or
a crash leaves the index as it was; from `publish` to `retire` both versions are live and
search shows one version per document. Point ids are deterministic, so re-running the same job
(same version) overwrites its own staged points, and a re-run after `publish` only retires.
`docingest.pipeline.store.fencing` hands out the versions: an attempt whose version is no longer the
newest drops its work (`Superseded`) instead of replacing a newer upload.

Streaming. The chunks arrive as a `PreparedStream` (from the parsing child, in batches), and
are embedded and written `window` at a time: this process holds one window being embedded,
one being written and the few batches the child has sent ahead, never the whole document.
What needs the whole document, and where it comes from:

- the unchanged-content check (file sha256, filename, user metadata): the child's header
  carries them before it extracts anything;
- the document-level payload every point carries: the file's fields (name, format, hash) are
  written with each window; those known only once the whole document is extracted (pages,
  words, title, author, language, OCR summary, `chunk_count`) are set on every point of the
  version by `publish`, in the same update that makes them live. So the first window is
  embedded while the child is still reading later pages (`docingest.pipeline.prepare.Preparer`);
- the keyword vectors: BM25's length normalisation uses a per-index average
  (`sparse.average_length` of the chunk size), not the document's, so each chunk is encoded
  alone; IDF is the store's;
- progress: the total is None (reported so) until extraction has ended, when the child's
  summary gives `chunk_count` (before the last section's chunks); reused chunks are counted
  as their window reaches them;
- vector reuse: each window reads the live version's vectors for its own text hashes, and
  this version's staged ones (a crashed attempt's) at its own chunk indexes
  (`reusable_vectors`), so a re-ingest holds no more vectors than a window's;
- repeated texts are embedded once while their vector is among the run's recent ones (a
  bounded cache, `docingest.pipeline.indexing.window_vectors.REPEAT_CACHE_BYTES`).

The lock is held from the first window to `retire` (it used to be from the first write):
a newer upload waiting for it is let in within one window, when this attempt sees it is
stale and drops its points. `embedding` and `storing` overlap, so each stage's busy time
is measured here and told to `IndexHooks.on_busy` (`docingest.pipeline.ingest.stage_clock` records
it).
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import Any, NoReturn

import numpy as np

from docingest.pipeline.chunking import Chunk
from docingest.pipeline.embedders.base import Embedder, check_embedder_matches
from docingest.pipeline.errors import (
    Cancelled,
    ControlSignal,
    IndexNotFound,
    NoTextFound,
    PermanentError,
    RequestError,
    Superseded,
)
from docingest.pipeline.indexing.chunk_vectors import chunk_records, document_title
from docingest.pipeline.indexing.request import NO_HOOKS, IndexHooks, IndexRequest, IndexResult
from docingest.pipeline.indexing.window_vectors import VectorLookup, WindowVectors
from docingest.pipeline.indexing.writer import BackgroundWriter, HeldCount, WindowSink, windows
from docingest.pipeline.keys import JobStage
from docingest.pipeline.metadata import ocr_summary
from docingest.pipeline.prepare import PreparedStream
from docingest.pipeline.store import (
    ChunkRecord,
    DocumentFields,
    IndexConfig,
    StoredDocument,
    VectorStore,
)
from docingest.pipeline.store.fencing import DEFAULT_LOCK_TIMEOUT, KEEP_ALIVE_TIMEOUT, DocumentFence

NO_CHUNKS = "The document has no text to index."


def index_document(
    request: IndexRequest,
    *,
    store: VectorStore,
    embedder: Embedder,
    fence: DocumentFence,
    window: int,
    live_write_chunks: int = 0,
    hooks: IndexHooks = NO_HOOKS,
    lock_timeout: float = KEEP_ALIVE_TIMEOUT,
) -> IndexResult:
    """Store `request.prepared` as its version of the document and retire every other one.

    Raises `Superseded` if a newer version was handed out meanwhile, `Cancelled` if
    `hooks.should_cancel()` turned true before publishing, and the stream's `PermanentError`
    if the document fails part-way; in each case the index is as it was. `window` is the
    most chunks embedded (in one `embed_documents` call) and written at once
    (`window_chunks`). Where the store `writes_live`, a document of at most
    `live_write_chunks` chunks is held and written once, live (0: always staged).
    `lock_timeout` is the TTL of the document's store lock, renewed while this attempt holds
    it (see `_Run.lock`).
    """
    document = request.prepared
    run = _Run(request, document, store, fence, hooks, lock_timeout)

    hooks.on_step("check")
    config, live = run.check(embedder)
    if request.access is None and live is not None and live.access is not None:
        run = replace(run, request=replace(request, access=live.access))
    if live is not None and (early := run.finish_early(live)) is not None:
        return early

    hooks.on_step("reuse")
    reusable = run.reusable_vectors(live)

    hooks.on_step("embed")
    title = document_title(document.metadata.get("filename"), request.user_metadata)
    embed = WindowVectors(config, embedder, window, reusable, title=title)
    live_limit = live_write_chunks if store.writes_live else 0
    stats = run.stream_publish_retire(embed, live_limit)  # the steps "write", "publish", "retire"
    meta = document.metadata
    ocr = ocr_summary(meta.get("ocr"))
    return IndexResult(
        document_id=request.document_id,
        version=request.version,
        format=meta.get("format"),
        pages=meta.get("pages"),
        words=meta.get("words"),
        chunks=stats.chunks,
        chunks_reused=stats.reused,
        unchanged=False,
        ocr_pages=len(ocr["pages"]) if ocr else 0,
        format_note=meta.get("format_note"),
    )


@dataclass(slots=True)
class _Stats:
    """What the windows of one run came to, and the busy time of each stage."""

    chunks: int = 0
    reused: int = 0
    embedding_seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class _Run:
    """One `index_document` call: its request, where it writes, and its steps."""

    request: IndexRequest
    document: PreparedStream
    store: VectorStore
    fence: DocumentFence
    hooks: IndexHooks
    lock_timeout: float

    def check(self, embedder: Embedder) -> tuple[IndexConfig, StoredDocument | None]:
        """Return the index's config and the live version; refuse a wrong model or a stale
        version."""
        request = self.request
        config = self.store.index_config(request.index)
        if config is None:
            raise IndexNotFound(f"Index '{request.index}' does not exist.")
        check_embedder_matches(request.index, config.embedding, embedder)
        if not self.is_current():
            raise Superseded()
        return config, self.store.live_document(request.index, request.document_id)

    def finish_early(self, live: StoredDocument) -> IndexResult | None:
        """The result if the live version makes storing unnecessary, else None."""
        request, store = self.request, self.store
        if live.version > request.version:
            raise Superseded()
        if live.version == request.version:  # a re-run of this job after it published
            with self.lock():
                self.hooks.on_step("retire")
                store.retire(request.index, request.document_id, keep_version=request.version)
            return _stored_result(live, unchanged=False)
        if request.force or not _same_document(live, request, self.document.metadata):
            return None
        if store.count_points(request.index, request.document_id) != live.chunks:
            self.clear_leftovers(live_version=live.version)
        return _stored_result(live, unchanged=True)

    def clear_leftovers(self, *, live_version: int) -> None:
        """Delete the points of versions other than the live one, left by crashed attempts.

        Only while this attempt's version is the newest handed out: then every other version
        belongs to an older attempt, which can no longer publish; a newer one may be writing.
        """
        with self.lock():
            if self.is_current():
                self.store.retire(
                    self.request.index, self.request.document_id, keep_version=live_version
                )

    def reusable_vectors(self, live: StoredDocument | None) -> VectorLookup:
        """How a window finds its reusable dense vectors, by text hash: this version's staged
        points at the window's own chunk indexes (a crashed attempt's: this attempt has not
        written them yet, so what is found does not depend on the writer thread's pace), and
        the live version's points with the window's texts; none with `force`, which re-embeds
        everything. Read per window, so what is held stays bounded by the window."""
        request = self.request
        if request.force:
            return lambda base, hashes: {}
        index, document_id, store = request.index, request.document_id, self.store

        def lookup(base: int, hashes: list[str]) -> dict[str, np.ndarray]:
            reusable = store.stored_vectors(
                index, document_id, request.version, chunk_indexes=range(base, base + len(hashes))
            )
            if live is not None:
                reusable.update(
                    store.stored_vectors(index, document_id, live.version, text_hashes=hashes)
                )
            return reusable

        return lookup

    def stream_publish_retire(self, embed: WindowVectors, live_limit: int) -> _Stats:
        """Under the document's lock: embed and write the windows as staged, publish, retire
        the other versions; stop (dropping the staged points) if cancelled or superseded
        before publishing, or if the document turns out bad (a `PermanentError` from the
        stream, such as a late page past the size limit). A document of at most `live_limit`
        chunks is held instead, and written live at the publish."""
        index, document_id = self.request.index, self.request.document_id
        version, store, step = self.request.version, self.store, self.hooks.on_step
        with self.lock():
            step("write")
            held = HeldCount(self.hooks.on_held)

            def write(records: list[ChunkRecord]) -> None:
                store.write_chunks(index, records)
                held.add(-len(records))

            writer = BackgroundWriter(write, name="store-write")
            sink = WindowSink(writer, limit=live_limit)
            try:
                stats = self.write_windows(embed, sink, held)
            except (ControlSignal, PermanentError, RequestError) as stop:  # the writer is idle:
                self.drop(stop)  # nothing lands after (a bad file fails the same way again)
            publish_started = time.perf_counter()
            step("publish")
            if self.hooks.should_cancel():
                self.drop(Cancelled())
            self.stop_if_stale()
            content = _document_fields(self.request, self.document).content_payload()
            if sink.held is not None:  # never staged: written once, already live
                store.write_live(index, sink.held, content=content)
                held.add(-len(sink.held))
            else:
                store.publish(index, document_id, version, content=content)

            step("retire")
            store.retire(index, document_id, keep_version=version)
        storing = writer.busy_seconds + time.perf_counter() - publish_started
        self.hooks.on_busy(JobStage.EMBEDDING, stats.embedding_seconds)
        self.hooks.on_busy(JobStage.STORING, storing)
        return stats

    def write_windows(
        self, embed: WindowVectors, sink: WindowSink[ChunkRecord], held: HeldCount
    ) -> _Stats:
        """Embed each window, then hand it to `sink` (its writer stores it staged while the
        next one is embedded, or it holds it for one live write at publish)."""
        progress, cancelled = self.hooks.on_progress, self.hooks.should_cancel
        document, stats = self.document, _Stats()
        fields = _document_fields(self.request, document)  # the file's; the rest at publish
        progress(JobStage.EMBEDDING, 0, document.chunk_count)
        with sink.writer:
            for window in windows(held.taking(self.document.batches()), embed.size):
                if cancelled():  # raised, not dropped: a write may be in flight
                    raise Cancelled()
                if not self.is_current():
                    raise Superseded()
                started = time.perf_counter()
                records, reused = self.records_for(window, embed, fields, base=stats.chunks)
                stats.embedding_seconds += time.perf_counter() - started
                stats.chunks, stats.reused = stats.chunks + len(records), stats.reused + reused
                sink.put(records)  # once the previous window is stored
                self.hooks.on_stored(stats.chunks - len(records), document.chunk_count)
            total = stats.chunks
            if total == 0:  # e.g. headings only: known once the child has read it all
                raise NoTextFound(NO_CHUNKS)
            if document.chunk_count != total:
                raise ValueError(f"the document counted {document.chunk_count} chunks, not {total}")
            progress(JobStage.STORING, total - sink.unwritten, total)  # the last write
        progress(JobStage.STORING, total, total)
        return stats

    def records_for(
        self, chunks: list[Chunk], embed: WindowVectors, fields: DocumentFields, *, base: int
    ) -> tuple[list[ChunkRecord], int]:
        """The window's records (`base`: chunks before it), and how many chunks reused a
        stored vector."""
        total, progress = self.document.chunk_count, self.hooks.on_progress
        cancelled = self.hooks.should_cancel

        def embedded(done: int, _: int) -> None:
            progress(JobStage.EMBEDDING, base + done, total)
            # After every batch of the embedder, not every so many seconds: the work a cancel
            # waits for is then one batch (per request in flight), however loaded the machine;
            # a Redis read per batch is small beside embedding it.
            if cancelled():
                raise Cancelled()

        window = embed.window(chunks, base=base, on_progress=embedded)
        records = chunk_records(
            chunks,
            hashes=window.hashes,
            vectors=window.dense,
            sparse=window.sparse,
            document_id=self.request.document_id,
            version=self.request.version,
            fields=fields,
            ocr=self.document.metadata.get("ocr"),
        )
        return records, window.reused

    def lock(self) -> AbstractContextManager[None]:
        """The document's store lock, kept alive while held: an attempt killed mid-write frees
        it within `lock_timeout` s, and one that waits behind a live holder waits as long as it
        writes (up to DEFAULT_LOCK_TIMEOUT)."""
        return self.fence.lock(
            self.request.index,
            self.request.document_id,
            timeout=self.lock_timeout,
            blocking_timeout=DEFAULT_LOCK_TIMEOUT,
            keep_alive=True,
        )

    def is_current(self) -> bool:
        request = self.request
        return self.fence.is_current(request.index, request.document_id, request.version)

    def stop_if_stale(self) -> None:
        if not self.is_current():
            self.drop(Superseded())

    def drop(self, error: Exception) -> NoReturn:
        """Delete this attempt's staged points and raise `error`."""
        request = self.request
        self.store.discard(request.index, request.document_id, request.version)
        raise error


def _same_document(live: StoredDocument, request: IndexRequest, meta: dict[str, Any]) -> bool:
    """Whether storing `request` (its document's metadata `meta`) would change nothing a
    search or listing shows."""
    return (
        live.content_sha256 == meta.get("sha256")
        and live.metadata == dict(request.user_metadata)
        and live.filename == meta.get("filename")
        and live.access == request.access
    )


def _document_fields(request: IndexRequest, document: PreparedStream) -> DocumentFields:
    """The document-level payload every chunk of this version carries."""
    meta = document.metadata
    return DocumentFields(
        filename=meta.get("filename"),
        format=meta.get("format"),
        content_sha256=meta.get("sha256"),
        pages=meta.get("pages"),
        words=meta.get("words"),
        chunk_count=document.chunk_count,
        title=meta.get("title"),
        author=meta.get("author"),
        language=meta.get("language"),
        ingested_at=meta.get("ingested_at"),
        metadata=dict(request.user_metadata),
        ocr=ocr_summary(meta.get("ocr")),
        access=request.access,
    )


def _stored_result(live: StoredDocument, *, unchanged: bool) -> IndexResult:
    return IndexResult(
        document_id=live.document_id,
        version=live.version,
        format=live.format,
        pages=live.pages,
        words=live.words,
        chunks=live.chunks,
        chunks_reused=0,
        unchanged=unchanged,
        ocr_pages=len(live.ocr["pages"]) if live.ocr else 0,
    )
