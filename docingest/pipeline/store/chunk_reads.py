"""Read stored chunks by position: a document's chunks in order, and the chunks around
search hits, each in one scroll of the store (a round trip for all the hits of a search,
not one per hit)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from qdrant_client import models

from docingest.pipeline.store.filters import SearchFilter
from docingest.pipeline.store.models import CHUNK_PAYLOAD_KEYS, StoredChunk, validate_index_name
from docingest.pipeline.store.requests import LIVE, equals, to_qdrant
from docingest.pipeline.store.vector_store import VectorStore


@dataclass(frozen=True, slots=True)
class ChunkRange:
    """Chunks `first` to `last` (inclusive) of one version of one document."""

    document_id: str
    version: int
    first: int
    last: int


def read_ranges(
    store: VectorStore,
    index: str,
    ranges: Sequence[ChunkRange],
    *,
    within: SearchFilter | None = None,
) -> list[StoredChunk]:
    """Return the live chunks in `ranges` (that match `within`), ordered by document,
    version and chunk index."""
    if not ranges:
        return []
    wanted = [
        models.Filter(
            must=[
                equals("document_id", part.document_id),
                equals("version", part.version),
                models.FieldCondition(
                    key="chunk_index", range=models.Range(gte=part.first, lte=part.last)
                ),
            ]
        )
        for part in ranges
    ]
    selector = models.Filter(must=[LIVE], should=list(wanted))
    if within is not None:
        selector = to_qdrant(within, must=[selector])
    # One page holds them all (ranges of one search may overlap: at most their sum).
    limit = sum(part.last - part.first + 1 for part in ranges)
    chunks = _scroll_all(store, index, selector, limit=limit)
    return sorted(chunks, key=lambda c: (c.document_id, c.version, c.chunk_index))


def read_document_chunks(
    store: VectorStore,
    index: str,
    document_id: str,
    version: int,
    *,
    first: int,
    limit: int,
    within: SearchFilter | None = None,
) -> list[StoredChunk]:
    """Return up to `limit` live chunks of that version from chunk index `first`, in order."""
    part = ChunkRange(document_id, version, first, first + limit - 1)
    return read_ranges(store, index, [part], within=within)


def _scroll_all(
    store: VectorStore, index: str, selector: models.Filter, *, limit: int
) -> list[StoredChunk]:
    validate_index_name(index)
    chunks: list[StoredChunk] = []
    offset: models.ExtendedPointId | None = None
    while True:
        records, offset = store.engine.scroll(
            index,
            selector,
            limit=max(limit, 1),
            offset=offset,
            payload=CHUNK_PAYLOAD_KEYS,
            vectors=None,
        )
        chunks.extend(StoredChunk.from_payload(record.payload or {}) for record in records)
        if offset is None:
            return chunks
