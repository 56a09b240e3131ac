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

import hashlib
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, NoReturn

import numpy as np

from pipeline.chunking import Chunk
from pipeline.embedders.base import Embedder, check_embedder_matches
from pipeline.errors import Cancelled, IndexNotFound, NoTextFound, Superseded
from pipeline.metadata import ocr_of_pages, ocr_summary
from pipeline.prepare import Prepared
from pipeline.sparse import average_length, encode_document
from pipeline.store import ChunkRecord, DocumentFields, StoredDocument, VectorStore
from pipeline.store.fencing import DEFAULT_LOCK_TIMEOUT, KEEP_ALIVE_TIMEOUT, DocumentFence

ProgressReporter = Callable[[str, int, int], None]
"""Called with (stage, done, total): stage "embedding" or "storing", counts of chunks."""

STEPS = ("check", "reuse", "embed", "write", "publish", "retire")
EMBED_CONCURRENCY = 4
"""Embedder batches per slice: cancellation is checked between slices."""
WRITE_SLICE = 256
"""Points per `write_chunks` call: progress and cancellation are checked between calls."""


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


def text_hash(text: str) -> str:
    """Return the sha256 hex digest of a chunk's text (the key of vector reuse)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def keyword_text(chunk: Chunk) -> str:
    """Return the text a chunk's keyword vector is built from: its heading path and text."""
    return "\n".join([*chunk.headings, chunk.text])


def index_document(
    prepared: Prepared,
    *,
    index: str,
    document_id: str,
    version: int,
    user_metadata: dict[str, Any],
    store: VectorStore,
    embedder: Embedder,
    fence: DocumentFence,
    force: bool = False,
    on_progress: ProgressReporter | None = None,
    should_cancel: Callable[[], bool] | None = None,
    on_step: Callable[[str], None] | None = None,
    embed_slice: int | None = None,
    lock_timeout: float = KEEP_ALIVE_TIMEOUT,
) -> IndexResult:
    """Store `prepared` as `version` of `document_id` and retire every other version.

    Raises `Superseded` if a newer version was handed out meanwhile, `Cancelled` if
    `should_cancel()` turned true before publishing; either way the index is as it was.
    `embed_slice` is the number of texts per `embed_documents` call (default: the embedder's
    `max_batch` times EMBED_CONCURRENCY). `lock_timeout` is the TTL of the document's store
    lock, renewed while this attempt holds it (see `_store_lock`).
    """
    step = on_step or _ignore
    progress = on_progress or _ignore_progress
    cancelled = should_cancel or _never
    chunks = prepared.chunks
    meta = prepared.metadata
    if not chunks:
        raise NoTextFound("The document has no text to index.")

    step("check")
    config = store.index_config(index)
    if config is None:
        raise IndexNotFound(f"Index '{index}' does not exist.")
    check_embedder_matches(index, config.embedding, embedder)
    if not fence.is_current(index, document_id, version):
        raise Superseded()
    live = store.live_document(index, document_id)
    if live is not None:
        if live.version > version:
            raise Superseded()
        if live.version == version:  # a re-run of this job after it published: finish it
            with _store_lock(fence, index, document_id, lock_timeout):
                step("retire")
                store.retire(index, document_id, keep_version=version)
            return _stored_result(live, unchanged=False)
        if not force and _same_document(live, meta, user_metadata):
            if store.count_points(index, document_id) != live.chunks:
                _clear_leftovers(
                    store,
                    fence,
                    index,
                    document_id,
                    live_version=live.version,
                    version=version,
                    lock_timeout=lock_timeout,
                )
            return _stored_result(live, unchanged=True)

    step("reuse")
    reusable: dict[str, np.ndarray] = {}
    if not force:  # force re-embeds everything (e.g. the model changed under the same name)
        reusable = store.stored_vectors(index, document_id, version)  # a crashed attempt's
        if live is not None:
            reusable.update(store.stored_vectors(index, document_id, live.version))

    step("embed")
    hashes = [text_hash(chunk.text) for chunk in chunks]
    avg_len = average_length(config.chunking.chunk_size, config.chunking.unit)
    sparse = [encode_document(keyword_text(chunk), avg_len=avg_len) for chunk in chunks]
    reused = sum(1 for digest in hashes if digest in reusable)
    vectors = _embed_missing(
        chunks,
        hashes,
        reusable,
        embedder=embedder,
        slice_size=embed_slice or embedder.max_batch * EMBED_CONCURRENCY,
        progress=progress,
        cancelled=cancelled,
    )

    fields = DocumentFields(
        filename=meta.get("filename"),
        format=meta.get("format"),
        content_sha256=meta.get("sha256"),
        pages=meta.get("pages"),
        words=meta.get("words"),
        chunk_count=len(chunks),
        title=meta.get("title"),
        author=meta.get("author"),
        language=meta.get("language"),
        ingested_at=meta.get("ingested_at"),
        metadata=dict(user_metadata),
        ocr=ocr_summary(meta.get("ocr")),
    )
    records = [
        ChunkRecord(
            document_id=document_id,
            version=version,
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
            ocr=ocr_of_pages(meta.get("ocr"), chunk.page_start, chunk.page_end),
        )
        for chunk, digest, terms in zip(chunks, hashes, sparse, strict=True)
    ]

    with _store_lock(fence, index, document_id, lock_timeout):
        step("write")
        _stop_if_stale(store, fence, index, document_id, version)
        progress("storing", 0, len(records))
        for start in range(0, len(records), WRITE_SLICE):
            if cancelled():
                _drop(store, index, document_id, version, Cancelled())
            store.write_chunks(index, records[start : start + WRITE_SLICE])
            progress("storing", min(start + WRITE_SLICE, len(records)), len(records))

        step("publish")
        if cancelled():
            _drop(store, index, document_id, version, Cancelled())
        _stop_if_stale(store, fence, index, document_id, version)
        store.publish(index, document_id, version)

        step("retire")
        store.retire(index, document_id, keep_version=version)

    return IndexResult(
        document_id=document_id,
        version=version,
        format=meta.get("format"),
        pages=meta.get("pages"),
        words=meta.get("words"),
        chunks=len(chunks),
        chunks_reused=reused,
        unchanged=False,
        ocr_pages=len(fields.ocr["pages"]) if fields.ocr else 0,
    )


def _embed_missing(
    chunks: Sequence[Chunk],
    hashes: Sequence[str],
    reusable: dict[str, np.ndarray],
    *,
    embedder: Embedder,
    slice_size: int,
    progress: ProgressReporter,
    cancelled: Callable[[], bool],
) -> dict[str, np.ndarray]:
    """Return text hash → vector for every chunk, embedding each missing text once."""
    vectors = dict(reusable)
    missing: dict[str, str] = {}  # hash → text, first occurrence; repeated chunks embed once
    weight: dict[str, int] = {}  # chunks sharing each missing text
    for chunk, digest in zip(chunks, hashes, strict=True):
        if digest not in vectors:
            missing.setdefault(digest, chunk.text)
            weight[digest] = weight.get(digest, 0) + 1
    total = len(chunks)
    done = total - sum(weight.values())
    progress("embedding", done, total)
    todo = list(missing.items())
    for start in range(0, len(todo), slice_size):
        if cancelled():
            raise Cancelled()
        batch = todo[start : start + slice_size]
        base = done

        def report(count: int, base: int = base) -> None:
            progress("embedding", base + count, total)  # ≤ the exact count below

        embedded = embedder.embed_documents([text for _, text in batch], on_progress=report)
        if embedded.shape != (len(batch), embedder.dimensions):
            raise ValueError(f"the embedder returned shape {embedded.shape} for {len(batch)}")
        for (digest, _), vector in zip(batch, embedded, strict=True):
            vectors[digest] = vector
            done += weight[digest]
        progress("embedding", done, total)
    return vectors


def _same_document(
    live: StoredDocument, meta: dict[str, Any], user_metadata: dict[str, Any]
) -> bool:
    """Whether storing `meta` would change nothing a search or listing shows."""
    return (
        live.content_sha256 == meta.get("sha256")
        and live.metadata == user_metadata
        and live.filename == meta.get("filename")
    )


def _clear_leftovers(
    store: VectorStore,
    fence: DocumentFence,
    index: str,
    document_id: str,
    *,
    live_version: int,
    version: int,
    lock_timeout: float,
) -> None:
    """Delete the points of versions other than the live one, left by crashed attempts.

    Only while `version` (this attempt's) is the newest handed out: then every other version
    belongs to an older attempt, which can no longer publish; a newer one may be writing.
    """
    with _store_lock(fence, index, document_id, lock_timeout):
        if fence.is_current(index, document_id, version):
            store.retire(index, document_id, keep_version=live_version)


def _store_lock(
    fence: DocumentFence, index: str, document_id: str, timeout: float
) -> AbstractContextManager[None]:
    """The document's store lock, kept alive while held: an attempt killed mid-write frees it
    within `timeout` s, and one that waits behind a live holder waits as long as it writes
    (up to DEFAULT_LOCK_TIMEOUT)."""
    return fence.lock(
        index, document_id, timeout=timeout, blocking_timeout=DEFAULT_LOCK_TIMEOUT, keep_alive=True
    )


def _stop_if_stale(
    store: VectorStore, fence: DocumentFence, index: str, document_id: str, version: int
) -> None:
    if not fence.is_current(index, document_id, version):
        _drop(store, index, document_id, version, Superseded())


def _drop(
    store: VectorStore, index: str, document_id: str, version: int, error: Exception
) -> NoReturn:
    """Delete this attempt's staged points and raise `error`."""
    store.discard(index, document_id, version)
    raise error


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


def _ignore(name: str) -> None:
    return None


def _ignore_progress(stage: str, done: int, total: int) -> None:
    return None


def _never() -> bool:
    return False
