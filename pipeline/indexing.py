"""Store one prepared document as a new version of itself: replace-on-reingest.

Steps, each announced through `on_step(name)`:

    check    unchanged content, metadata and filename → done, nothing embedded (a crashed
             attempt's leftover points are deleted on the way)
    reuse    dense vectors of the live version (and of this version's own staged points,
             left by a crashed attempt), by chunk text hash; none with `force`
    embed    sparse-encode every chunk; embed only the texts with no reusable vector
    write    under the document's lock: stop if superseded, upsert as staged (invisible)
    publish  stop if cancelled or superseded, then mark the version live
    retire   delete every other version

Until `publish` the old version is untouched and the new points are invisible, so a cancel or
a crash leaves the index as it was; from `publish` to `retire` both versions are live and
search shows one version per document. Point ids are deterministic, so re-running the same job
(same version) overwrites its own staged points, and a re-run after `publish` only retires.
`pipeline.store.fencing` hands out the versions: an attempt whose version is no longer the newest
drops its work (`Superseded`) instead of replacing a newer upload.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, NoReturn

import numpy as np

from pipeline.chunk_vectors import embed_missing, keyword_text, text_hash
from pipeline.embedders.base import Embedder, check_embedder_matches
from pipeline.errors import Cancelled, IndexNotFound, NoTextFound, Superseded
from pipeline.metadata import ocr_of_pages, ocr_summary
from pipeline.prepare import Prepared
from pipeline.sparse import average_length, encode_document
from pipeline.store import ChunkRecord, DocumentFields, IndexConfig, StoredDocument, VectorStore
from pipeline.store.fencing import DEFAULT_LOCK_TIMEOUT, KEEP_ALIVE_TIMEOUT, DocumentFence

ProgressReporter = Callable[[str, int, int], None]
"""Called with (stage, done, total): stage "embedding" or "storing", counts of chunks."""

STEPS = ("check", "reuse", "embed", "write", "publish", "retire")
EMBED_CONCURRENCY = 4
"""Embedder batches per slice (`embed_missing`): cancellation is checked between slices."""
WRITE_SLICE = 256
"""Points per `write_chunks` call: progress and cancellation are checked between calls."""


@dataclass(frozen=True, slots=True)
class IndexRequest:
    """One prepared document to store as `version` of `document_id` in `index`."""

    prepared: Prepared
    index: str
    document_id: str
    version: int
    """From `DocumentFence.next_version`, floored at the store's live version."""
    user_metadata: Mapping[str, Any] = field(default_factory=dict)
    force: bool = False
    """Re-embed every chunk and rewrite unchanged content (e.g. the model changed under the
    same name)."""


def _ignore(name: str) -> None:
    return None


def _ignore_progress(stage: str, done: int, total: int) -> None:
    return None


def _never() -> bool:
    return False


@dataclass(frozen=True, slots=True)
class IndexHooks:
    """How a caller follows and steers one `index_document` run."""

    on_progress: ProgressReporter = _ignore_progress
    should_cancel: Callable[[], bool] = _never
    """Polled between slices and before publishing; true → `Cancelled`, index as it was."""
    on_step: Callable[[str], None] = _ignore
    """Hears each of `STEPS` as it begins."""


NO_HOOKS = IndexHooks()


@dataclass(frozen=True, slots=True)
class IndexResult:
    """What a finished job reports (the contract's job `result`)."""

    document_id: str
    version: int
    format: str | None
    pages: int | None
    words: int | None
    chunks: int
    chunks_reused: int
    unchanged: bool
    ocr_pages: int = 0
    """Pages whose text came from OCR."""


def index_document(
    request: IndexRequest,
    *,
    store: VectorStore,
    embedder: Embedder,
    fence: DocumentFence,
    hooks: IndexHooks = NO_HOOKS,
    embed_slice: int | None = None,
    lock_timeout: float = KEEP_ALIVE_TIMEOUT,
) -> IndexResult:
    """Store `request.prepared` as its version of the document and retire every other one.

    Raises `Superseded` if a newer version was handed out meanwhile, `Cancelled` if
    `hooks.should_cancel()` turned true before publishing; either way the index is as it was.
    `embed_slice` is the number of texts per `embed_documents` call (default: the embedder's
    `max_batch` times EMBED_CONCURRENCY). `lock_timeout` is the TTL of the document's store
    lock, renewed while this attempt holds it (see `_Run.lock`).
    """
    if not request.prepared.chunks:
        raise NoTextFound("The document has no text to index.")
    run = _Run(request, store, fence, hooks, lock_timeout)

    hooks.on_step("check")
    config, live = run.check(embedder)
    if live is not None and (early := run.finish_early(live)) is not None:
        return early

    hooks.on_step("reuse")
    reusable = run.reusable_vectors(live)

    hooks.on_step("embed")
    slice_size = embed_slice or embedder.max_batch * EMBED_CONCURRENCY
    records, reused = run.embed(config, reusable, embedder=embedder, slice_size=slice_size)

    run.write_publish_retire(records)  # the steps "write", "publish" and "retire"
    meta = request.prepared.metadata
    ocr = ocr_summary(meta.get("ocr"))
    return IndexResult(
        document_id=request.document_id,
        version=request.version,
        format=meta.get("format"),
        pages=meta.get("pages"),
        words=meta.get("words"),
        chunks=len(records),
        chunks_reused=reused,
        unchanged=False,
        ocr_pages=len(ocr["pages"]) if ocr else 0,
    )


@dataclass(frozen=True, slots=True)
class _Run:
    """One `index_document` call: its request, where it writes, and its steps."""

    request: IndexRequest
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
        if request.force or not _same_document(live, request):
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

    def reusable_vectors(self, live: StoredDocument | None) -> dict[str, np.ndarray]:
        """Dense vectors by text hash: this version's staged points (a crashed attempt's)
        and the live version's; none with `force`, which re-embeds everything."""
        request = self.request
        if request.force:
            return {}
        index, document_id = request.index, request.document_id
        reusable = self.store.stored_vectors(index, document_id, request.version)
        if live is not None:
            reusable.update(self.store.stored_vectors(index, document_id, live.version))
        return reusable

    def embed(
        self,
        config: IndexConfig,
        reusable: dict[str, np.ndarray],
        *,
        embedder: Embedder,
        slice_size: int,
    ) -> tuple[list[ChunkRecord], int]:
        """Sparse-encode every chunk, embed the texts with no reusable vector; return the
        records to write and how many chunks reused a vector."""
        chunks = self.request.prepared.chunks
        hashes = [text_hash(chunk.text) for chunk in chunks]
        avg_len = average_length(config.chunking.chunk_size, config.chunking.unit)
        sparse = [encode_document(keyword_text(chunk), avg_len=avg_len) for chunk in chunks]
        reused = sum(1 for digest in hashes if digest in reusable)
        progress = self.hooks.on_progress
        vectors = embed_missing(
            chunks,
            hashes,
            reusable,
            embedder=embedder,
            slice_size=slice_size,
            on_progress=lambda done, total: progress("embedding", done, total),
            cancelled=self.hooks.should_cancel,
        )
        fields = _document_fields(self.request)
        ocr = self.request.prepared.metadata.get("ocr")
        records = [
            ChunkRecord(
                document_id=self.request.document_id,
                version=self.request.version,
                chunk_index=chunk.index,
                text=chunk.text,
                text_hash=digest,
                start=chunk.start,
                end=chunk.end,
                page_start=chunk.page_start,
                page_end=chunk.page_end,
                headings=list(chunk.headings),
                dense=vectors[digest],
                sparse=terms,
                document=fields,
                ocr=ocr_of_pages(ocr, chunk.page_start, chunk.page_end),
            )
            for chunk, digest, terms in zip(chunks, hashes, sparse, strict=True)
        ]
        return records, reused

    def write_publish_retire(self, records: list[ChunkRecord]) -> None:
        """Under the document's lock: write as staged, publish, retire the other versions;
        stop (dropping the staged points) if cancelled or superseded before publishing."""
        index, document_id = self.request.index, self.request.document_id
        version, store = self.request.version, self.store
        step, progress, cancelled = (
            self.hooks.on_step,
            self.hooks.on_progress,
            self.hooks.should_cancel,
        )
        with self.lock():
            step("write")
            self.stop_if_stale()
            progress("storing", 0, len(records))
            for start in range(0, len(records), WRITE_SLICE):
                if cancelled():
                    self.drop(Cancelled())
                store.write_chunks(index, records[start : start + WRITE_SLICE])
                progress("storing", min(start + WRITE_SLICE, len(records)), len(records))

            step("publish")
            if cancelled():
                self.drop(Cancelled())
            self.stop_if_stale()
            store.publish(index, document_id, version)

            step("retire")
            store.retire(index, document_id, keep_version=version)

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


def _same_document(live: StoredDocument, request: IndexRequest) -> bool:
    """Whether storing `request` would change nothing a search or listing shows."""
    meta = request.prepared.metadata
    return (
        live.content_sha256 == meta.get("sha256")
        and live.metadata == dict(request.user_metadata)
        and live.filename == meta.get("filename")
    )


def _document_fields(request: IndexRequest) -> DocumentFields:
    """The document-level payload every chunk of this version carries."""
    meta = request.prepared.metadata
    return DocumentFields(
        filename=meta.get("filename"),
        format=meta.get("format"),
        content_sha256=meta.get("sha256"),
        pages=meta.get("pages"),
        words=meta.get("words"),
        chunk_count=len(request.prepared.chunks),
        title=meta.get("title"),
        author=meta.get("author"),
        language=meta.get("language"),
        ingested_at=meta.get("ingested_at"),
        metadata=dict(request.user_metadata),
        ocr=ocr_summary(meta.get("ocr")),
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
