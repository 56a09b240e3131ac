"""Move an index between stores: from the embedded store to a Qdrant server, or back.

`export_index` writes the index's config and every live point (vectors and payload, as stored)
as JSON Lines, then a last line with the point count; `import_index` recreates the index from
them in whatever store it is given. The same `Point` type carries points out of one engine and
into the other, so nothing is re-embedded. Dense vectors travel as base64 float32 (a quarter of
the size of JSON numbers).

An import is all or nothing: the whole file is read and checked (header, config, every point,
the count in the last line) before anything is written, so a truncated or damaged file leaves
no index behind, and an index created for it is deleted again if writing fails. An existing
index is merged into only when asked (`merge`): silently adding to it was a surprise.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

import numpy as np
from pydantic import ValidationError

from docingest.pipeline.errors import IndexConflict, IndexNotFound, InvalidExport
from docingest.pipeline.sparse import SparseTerms
from docingest.pipeline.store.models import IndexConfig
from docingest.pipeline.store.requests import Point
from docingest.pipeline.store.vector_store import VectorStore

FORMAT = "docingest-index-export"
VERSION = 2
"""2 ends the file with `{"end": true, "points": N}`; 1 (no last line) is still read."""
READABLE_VERSIONS = (1, 2)
BATCH = 256


def export_index(store: VectorStore, index: str, out: IO[str]) -> int:
    """Write index `index` (config, its live points, their count) to `out`; return the count."""
    config = store.index_config(index)
    if config is None:
        raise IndexNotFound(f"Index '{index}' does not exist.")
    header = {"format": FORMAT, "version": VERSION, "index": index}
    out.write(json.dumps({**header, "config": config.model_dump(mode="json")}) + "\n")
    written = 0
    for point in store.live_points(index):
        out.write(json.dumps(_encode(point), ensure_ascii=False) + "\n")
        written += 1
    out.write(json.dumps({"end": True, "points": written}) + "\n")
    return written


def import_index(
    store: VectorStore,
    open_lines: Callable[[], Iterable[str]],
    *,
    index: str | None = None,
    merge: bool = False,
) -> tuple[str, int]:
    """Create the exported index (named `index`, or as exported) and write its points.

    `open_lines` is called twice: the file is checked whole before anything is written.
    Raises `InvalidExport` for a file that is not a complete export, `IndexConflict` when the
    index exists and `merge` is false (or its settings differ from the file's).
    """
    name, _ = _header(_rows(open_lines()), index=index)
    existed = store.index_config(name) is not None
    if existed and not merge:  # said before the whole file is read
        raise IndexConflict(
            f"Index '{name}' already exists; importing would add the file's points to it. "
            "Pass --merge to do so, or --index to import under another name."
        )
    name, config, count = _check(open_lines(), index=index)
    store.create_index(name, config)  # with merge: IndexConflict if the settings differ
    try:
        imported = 0
        for batch in _batches(_points(open_lines())):
            store.write_points(name, batch)
            imported += len(batch)
    except BaseException:
        if not existed:  # nothing of a failed import stays behind
            store.delete_index(name)
        raise
    return name, imported


def _check(lines: Iterable[str], *, index: str | None) -> tuple[str, IndexConfig, int]:
    """Read the whole file once: its header and config, every point, the count at its end."""
    rows = _rows(lines)
    name, header = _header(rows, index=index)
    config = _config(header.get("config"))
    count, end = 0, None
    for number, row in rows:
        if end is not None:
            raise InvalidExport(f"Line {number} follows the export's last line.")
        if isinstance(row, dict) and row.get("end") is True:
            end = row
            continue
        point = _decode(row, number)
        if point.dense.size != config.embedding.dimensions:
            raise InvalidExport(
                f"Line {number} of the export holds a vector of {point.dense.size} dimensions; "
                f"the index's model has {config.embedding.dimensions}."
            )
        count += 1
    if header["version"] >= 2:
        if end is None:
            raise InvalidExport(
                f"The export ends after {count} points without its last line: the file is "
                "truncated. Export the index again."
            )
        if end.get("points") != count:
            raise InvalidExport(
                f"The export says it holds {end.get('points')} points but {count} were read."
            )
    return name, config, count


def _header(rows: Iterator[tuple[int, Any]], *, index: str | None) -> tuple[str, dict[str, Any]]:
    """The index name (`index`, or the exported one) and the header, from the first row."""
    _, header = next(rows, (1, None))
    if (
        not isinstance(header, dict)
        or header.get("format") != FORMAT
        or header.get("version") not in READABLE_VERSIONS
    ):
        raise InvalidExport(
            f"This is not a {FORMAT} file (versions {', '.join(map(str, READABLE_VERSIONS))}): "
            "its first line is not the header `docingest export` writes."
        )
    name = index or header.get("index")
    if not isinstance(name, str):
        raise InvalidExport("The export's header names no index; pass --index.")
    return name, header


def _config(raw: Any) -> IndexConfig:
    try:
        return IndexConfig.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or 'config'}: {error['msg']}"
            for error in exc.errors()[:5]
        )
        raise InvalidExport(f"The export's index config is invalid: {problems}.") from None


def _rows(lines: Iterable[str]) -> Iterator[tuple[int, Any]]:
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidExport(
                f"Line {number} of the export is not JSON ({exc.msg.removesuffix(' at')} at "
                f"column {exc.colno}): the file is truncated or damaged."
            ) from None


def _points(lines: Iterable[str]) -> Iterator[Point]:
    rows = _rows(lines)
    next(rows)  # the header, checked already
    for number, row in rows:
        if not (isinstance(row, dict) and row.get("end") is True):
            yield _decode(row, number)


def _encode(point: Point) -> dict[str, Any]:
    return {
        "id": point.id,
        "dense": base64.b64encode(point.dense.astype("<f4").tobytes()).decode("ascii"),
        "sparse": [point.sparse.indices, point.sparse.values],
        "payload": point.payload,
    }


def _decode(row: Any, number: int) -> Point:
    try:
        indices, values = row["sparse"]
        dense = np.frombuffer(base64.b64decode(row["dense"], validate=True), dtype="<f4")
        if not isinstance(row["id"], str) or not isinstance(row["payload"], dict):
            raise TypeError("id or payload")
        return Point(
            id=row["id"],
            dense=dense.copy(),
            sparse=SparseTerms(list(indices), list(values)),
            payload=row["payload"],
        )
    except (KeyError, TypeError, ValueError, binascii.Error) as exc:
        raise InvalidExport(
            f"Line {number} of the export is not a point ({type(exc).__name__}: {exc})."
        ) from None


def _batches(points: Iterable[Point]) -> Iterator[list[Point]]:
    batch: list[Point] = []
    for point in points:
        batch.append(point)
        if len(batch) == BATCH:
            yield batch
            batch = []
    if batch:
        yield batch
