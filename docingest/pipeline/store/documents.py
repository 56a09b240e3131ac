"""Document records in the store: payload indexes, ordered pages, counts and version copies.

A document is its chunk_index 0 point of the highest live version
(`docingest.pipeline.store.models`);
`docingest.pipeline.store.ordering` reads those points in `document_id` order a page at a time. This
module holds what the listing, the counts and a metadata PATCH need from the engine, so
`VectorStore` stays the one entry point and each part stays small.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from qdrant_client import models

from docingest.pipeline.store.engine import Engine
from docingest.pipeline.store.filters import SearchFilter
from docingest.pipeline.store.models import (
    DOCUMENT_PAYLOAD_KEYS,
    StoredDocument,
    point_id,
    stored_document,
)
from docingest.pipeline.store.ordering import (
    ORDER_PREFIX,
    newest_versions,
    order_field,
    order_payload,
    ordered,
)
from docingest.pipeline.store.requests import (
    DENSE,
    KEYWORD,
    LIVE,
    Point,
    equals,
    point_from_record,
    to_qdrant,
)

log = logging.getLogger(__name__)

MAX_PAGE = 1000
"""The most documents one listing page holds (the API's `limit` bound)."""
_FIRST = equals("chunk_index", 0)
_COPY_PAGE = 256


class PayloadIndexes:
    """The payload indexes of each index, read once per process and created on first use."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._known: dict[str, set[str] | None] = {}
        self._searched: set[tuple[str, str]] = set()
        self._forgotten: dict[str, int] = {}
        """How often each index was forgotten: a read that a `forget` overtook is not kept."""
        self._lock = threading.Lock()

    def known(self, index: str, *, refresh: bool = False) -> set[str] | None:
        """The indexed paths; None when the engine keeps no payload indexes (local mode).

        The engine is read outside `_lock`: it takes locks of its own, and `create_index`
        holds the engine's while it forgets the index here, so holding `_lock` across the
        read could deadlock the two (a listing beside an index being created did)."""
        with self._lock:
            if not refresh and index in self._known:
                return self._known[index]
            generation = self._forgotten.get(index, 0)
        paths = self._engine.payload_indexes(index)
        with self._lock:
            if self._forgotten.get(index, 0) != generation:
                return paths  # the index was dropped or made anew meanwhile: keep nothing
            if refresh or index not in self._known:
                self._known[index] = paths
            return self._known[index]

    def ensure(self, index: str, path: str, schema: models.PayloadSchemaType) -> None:
        known = self.known(index)
        if known is None or path in known:
            return
        self._engine.create_payload_index(index, path, schema)
        with self._lock:
            known.add(path)

    def can_order_by(self, index: str, field: str) -> bool:
        """Whether `field` may be ordered by: it has an index, or the engine needs none.

        Refreshed once, since another process may have made it; and once per process the
        records are searched for the field, and it is indexed if any has it (points written
        around `_write`, such as those a store migration copies, carry it without one)."""
        known = self.known(index)
        if known is None or field in known:
            return True
        known = self.known(index, refresh=True)
        if known is None or field in known:
            return True
        with self._lock:
            if (index, field) in self._searched:
                return False
            self._searched.add((index, field))
        present = models.Filter(
            must_not=[models.IsEmptyCondition(is_empty=models.PayloadField(key=field))]
        )
        if not self._engine.count(index, present):
            return False
        self.ensure(index, field, models.PayloadSchemaType.INTEGER)
        return True

    def forget(self, index: str) -> None:
        with self._lock:
            self._known.pop(index, None)
            self._forgotten[index] = self._forgotten.get(index, 0) + 1
            self._searched = {pair for pair in self._searched if pair[0] != index}

    def ensure_order_fields(self, index: str, payloads: Sequence[Mapping[str, Any]]) -> None:
        """Give each `doc_order_<n>` the payloads carry an integer index (ordering needs one)."""
        depth = max(
            (sum(1 for key in payload if key.startswith(ORDER_PREFIX)) for payload in payloads),
            default=0,
        )
        for level in range(depth):
            self.ensure(index, order_field(level), models.PayloadSchemaType.INTEGER)


@dataclass(frozen=True, slots=True)
class DocumentPage:
    documents: list[StoredDocument]
    next_after: str | None
    """The last document_id of the page when more may follow, else None."""


class DocumentRecords:
    """Listing, counting and copying documents; safe to share by threads."""

    def __init__(self, engine: Engine, indexes: PayloadIndexes) -> None:
        self._engine = engine
        self._indexes = indexes
        self._backfilled: set[str] = set()
        self._lock = threading.Lock()

    # --- listing ------------------------------------------------------------------------

    def iterate(
        self,
        index: str,
        *,
        search_filter: SearchFilter | None = None,
        after: str | None = None,
        batch: int = MAX_PAGE,
    ) -> Iterator[StoredDocument]:
        """Yield each listed document (highest live version) after `after`, in id order."""
        self._backfill_once(index)
        own: list[models.Condition] = [LIVE, _FIRST]
        if search_filter is not None:
            own.append(to_qdrant(search_filter))
        keys = list(DOCUMENT_PAYLOAD_KEYS)

        def fetch(
            conditions: Sequence[models.Condition], field: str | None, limit: int
        ) -> list[dict[str, Any]]:
            if field is not None and not self._indexes.can_order_by(index, field):
                return []  # no document's id is that long
            selector = models.Filter(must=[*own, *conditions])
            wanted = keys if field is None else [*keys, field]
            records, _ = self._engine.scroll(
                index, selector, limit=limit, offset=None, payload=wanted, vectors=None,
                order_by=field,
            )  # fmt: skip
            return [record.payload or {} for record in records]

        for payload in newest_versions(ordered(fetch, after=after, batch=batch)):
            yield stored_document(payload)

    def page(
        self,
        index: str,
        *,
        limit: int,
        search_filter: SearchFilter | None = None,
        after: str | None = None,
    ) -> DocumentPage:
        """Return up to `limit` documents after `after` and where the next page starts."""
        if not 1 <= limit <= MAX_PAGE:
            raise ValueError(f"limit must be 1 to {MAX_PAGE}")
        documents: list[StoredDocument] = []
        # one more than asked says whether a next page exists
        for document in self.iterate(
            index, search_filter=search_filter, after=after, batch=limit + 1
        ):
            if len(documents) == limit:
                return DocumentPage(documents, documents[-1].document_id)
            documents.append(document)
        return DocumentPage(documents, None)

    def count(self, index: str, *, search_filter: SearchFilter | None = None) -> tuple[int, int]:
        """(documents, chunks) live (and matching `search_filter`: what a caller may see),
        from two engine counts, without reading a record.

        For the moment between a publish and the retire of a replaced document both its
        versions are live, and count both."""
        documents = self._engine.count(index, to_qdrant(search_filter, must=[LIVE, _FIRST]))
        chunks = self._engine.count(index, to_qdrant(search_filter, must=[LIVE]))
        return documents, chunks

    def match_all(
        self, index: str, search_filter: SearchFilter, *, among: SearchFilter | None = None
    ) -> bool:
        """Whether every live document of the index (that `among` matches) matches
        `search_filter` (an engine count of the documents it leaves out: none), whatever the
        filter's spelling."""
        left_out = to_qdrant(among, must=[LIVE, _FIRST])
        left_out.must_not = [to_qdrant(search_filter)]
        return self._engine.count(index, left_out) == 0

    def _backfill_once(self, index: str) -> None:
        """Give the records written before documents were ordered (by an older release, or
        imported from its export) their order keys, once per index and process."""
        with self._lock:
            if index in self._backfilled:
                return
        missing = models.Filter(
            must=[_FIRST, models.IsEmptyCondition(is_empty=models.PayloadField(key=order_field(0)))]
        )
        done, seen = 0, set[str]()
        while True:
            records, _ = self._engine.scroll(
                index, missing, limit=256, offset=None, payload=["document_id"], vectors=None
            )
            if not records:
                break
            ids = {str((record.payload or {})["document_id"]) for record in records}
            if ids <= seen:  # an engine that would not take the keys: do not loop forever
                log.warning("could not give documents of index %r their order keys", index)
                break
            seen |= ids
            for document_id in ids:
                payload = order_payload(document_id)
                self._indexes.ensure_order_fields(index, [payload])
                selector = models.Filter(must=[_FIRST, equals("document_id", document_id)])
                self._engine.set_payload(index, dict(payload), selector)
            done += len(ids)
        if done:
            log.info("gave %d documents of index %r their order keys", done, index)
        with self._lock:
            self._backfilled.add(index)

    def forget(self, index: str) -> None:
        with self._lock:
            self._backfilled.discard(index)

    # --- versions -----------------------------------------------------------------------

    def copy_version(
        self,
        index: str,
        document_id: str,
        *,
        source: int,
        target: int,
        changes: Mapping[str, Any],
    ) -> Iterator[list[Point]]:
        """Yield the points of `source` as staged points of `target` with `changes` applied
        to their payload, a page at a time (vectors copied as stored, nothing re-embedded)."""
        selector = models.Filter(
            must=[equals("document_id", document_id), equals("version", source)]
        )
        offset: models.ExtendedPointId | None = None
        while True:
            records, offset = self._engine.scroll(
                index,
                selector,
                limit=_COPY_PAGE,
                offset=offset,
                payload=None,
                vectors=[DENSE, KEYWORD],
            )
            points = []
            for record in records:
                point = point_from_record(record)
                payload = {**point.payload, **changes, "version": target, "state": "staged"}
                new_id = point_id(index, document_id, target, int(payload["chunk_index"]))
                points.append(Point(new_id, point.dense, point.sparse, payload))
            if points:
                yield points
            if offset is None:
                return
