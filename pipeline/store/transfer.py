"""Move an index between stores: from the embedded store to a Qdrant server, or back.

`export_index` writes the index's config and every live point (vectors and payload, as stored)
as JSON Lines; `import_index` recreates the index from them in whatever store it is given. The
same `Point` type carries points out of one engine and into the other, so nothing is
re-embedded. Dense vectors travel as base64 float32 (a quarter of the size of JSON numbers).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Iterator
from typing import IO, Any

import numpy as np

from pipeline.errors import IndexNotFound
from pipeline.sparse import SparseTerms
from pipeline.store.models import IndexConfig
from pipeline.store.requests import Point
from pipeline.store.vector_store import VectorStore

FORMAT = "docingest-index-export"
VERSION = 1
BATCH = 256


def export_index(store: VectorStore, index: str, out: IO[str]) -> int:
    """Write index `index` (config, then its live points) to `out`; return the points written."""
    config = store.index_config(index)
    if config is None:
        raise IndexNotFound(f"Index '{index}' does not exist.")
    header = {"format": FORMAT, "version": VERSION, "index": index}
    out.write(json.dumps({**header, "config": config.model_dump(mode="json")}) + "\n")
    written = 0
    for point in store.live_points(index):
        out.write(json.dumps(_encode(point), ensure_ascii=False) + "\n")
        written += 1
    return written


def import_index(
    store: VectorStore, lines: Iterable[str], *, index: str | None = None
) -> tuple[str, int]:
    """Create the exported index (named `index`, or as exported) and write its points."""
    rows = iter(lines)
    header = json.loads(next(rows, "{}"))
    if header.get("format") != FORMAT or header.get("version") != VERSION:
        raise ValueError(f"not a {FORMAT} file (version {VERSION})")
    name = index or header["index"]
    store.create_index(name, IndexConfig.model_validate(header["config"]))
    imported = 0
    for batch in _batches(_decode(json.loads(row)) for row in rows if row.strip()):
        store.write_points(name, batch)
        imported += len(batch)
    return name, imported


def _encode(point: Point) -> dict[str, Any]:
    return {
        "id": point.id,
        "dense": base64.b64encode(point.dense.astype("<f4").tobytes()).decode("ascii"),
        "sparse": [point.sparse.indices, point.sparse.values],
        "payload": point.payload,
    }


def _decode(row: dict[str, Any]) -> Point:
    indices, values = row["sparse"]
    return Point(
        id=row["id"],
        dense=np.frombuffer(base64.b64decode(row["dense"]), dtype="<f4").copy(),
        sparse=SparseTerms(list(indices), list(values)),
        payload=row["payload"],
    )


def _batches(points: Iterable[Point]) -> Iterator[list[Point]]:
    batch: list[Point] = []
    for point in points:
        batch.append(point)
        if len(batch) == BATCH:
            yield batch
            batch = []
    if batch:
        yield batch
