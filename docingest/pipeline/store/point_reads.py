"""Reading stored points back as they are: a version's vectors (for reuse by a re-upload),
every live point (for export), any selection a page at a time; apart from
`docingest.pipeline.store.vector_store` so each module stays small; `VectorStore` inherits them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
from qdrant_client import models

from docingest.pipeline.store.engine import Engine
from docingest.pipeline.store.models import validate_index_name
from docingest.pipeline.store.requests import (
    DENSE,
    KEYWORD,
    Point,
    equals,
    fields_filter,
    point_from_record,
)

_SCROLL_PAGE = 256


class PointReads:
    """Point reads; the class using it provides `engine`."""

    engine: Engine

    def stored_vectors(
        self,
        index: str,
        document_id: str,
        version: int,
        *,
        text_hashes: Sequence[str] | None = None,
        chunk_indexes: range | None = None,
    ) -> dict[str, np.ndarray]:
        """Return text_hash → dense vector for the points of that version (for reuse), only
        those with one of `text_hashes` and a chunk index in `chunk_indexes` if given."""
        vectors: dict[str, np.ndarray] = {}
        conditions: list[models.Condition] = [
            equals("document_id", document_id),
            equals("version", version),
        ]
        if text_hashes is not None:
            if not text_hashes:
                return vectors
            any_of = models.MatchAny(any=list(dict.fromkeys(text_hashes)))
            conditions.append(models.FieldCondition(key="text_hash", match=any_of))
        if chunk_indexes is not None:
            bounds = models.Range(gte=chunk_indexes.start, lt=chunk_indexes.stop)
            conditions.append(models.FieldCondition(key="chunk_index", range=bounds))
        selector = models.Filter(must=conditions)
        for record in self._scroll(index, selector, payload=["text_hash"], vectors=[DENSE]):
            dense = record.vector[DENSE] if isinstance(record.vector, dict) else None
            if record.payload and dense is not None:
                vectors[record.payload["text_hash"]] = np.asarray(dense, dtype=np.float32)
        return vectors

    def live_points(self, index: str) -> Iterator[Point]:
        """Yield every live point of the index as stored (for export)."""
        live = fields_filter(state="live")
        for record in self._scroll(index, live, payload=None, vectors=[DENSE, KEYWORD]):
            yield point_from_record(record)

    def _scroll(
        self,
        index: str,
        selector: models.Filter,
        *,
        payload: Sequence[str] | None,
        vectors: Sequence[str] | None = None,
    ) -> Iterator[models.Record]:
        """Yield the matching points with `payload` keys (None: all) and `vectors`."""
        validate_index_name(index)
        offset: models.ExtendedPointId | None = None
        while True:
            records, offset = self.engine.scroll(
                index, selector, limit=_SCROLL_PAGE, offset=offset, payload=payload, vectors=vectors
            )
            yield from records
            if offset is None:
                return
