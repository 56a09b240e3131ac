"""Move indexes written by the previous release (qdrant-client local mode under
`data_dir/qdrant`) into the embedded Edge store, on the first start that finds them.

Every collection made by docingest is copied point by point (vectors, payload and state, so a
staged version stays staged and the live one stays live), then the old directory is renamed
`qdrant.migrated` and kept: nothing is deleted, and a copy cut short is redone from the start
on the next start. Local mode loads a whole collection into memory, which bounds what it could
ever hold to a few hundred thousand chunks; the copy streams 256 points at a time.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from qdrant_client import models

from docingest.pipeline.errors import StoreLocked
from docingest.pipeline.store.process_lock import ProcessLock
from docingest.pipeline.store.requests import point_from_record, stored_config

if TYPE_CHECKING:
    from qdrant_client import QdrantClient

    from docingest.pipeline.store.edge import EdgeEngine

log = logging.getLogger(__name__)

MIGRATED_SUFFIX = ".migrated"
_PAGE = 256


def migrate_local_mode(legacy: Path, engine: EdgeEngine, *, prefix: str) -> int:
    """Copy every docingest collection under `legacy` into `engine`; return how many."""
    if not (legacy / "collection").is_dir():
        return 0
    from qdrant_client import QdrantClient

    try:
        holder = ProcessLock(legacy)  # a previous release's process may still hold it
    except StoreLocked as exc:
        raise StoreLocked(
            f"{exc.message} (a previous docingest release; its local-mode store is migrated "
            "to the embedded store when it has stopped)"
        ) from exc
    try:
        client = QdrantClient(path=str(legacy), force_disable_check_same_thread=True)
        try:
            copied = _copy_collections(client, engine, prefix)
        finally:
            client.close()
    finally:
        holder.release()
    target = legacy.with_name(legacy.name + MIGRATED_SUFFIX)
    legacy.rename(target)
    log.warning(
        "moved %d index(es) from the previous local-mode store into %s; the old files are kept "
        "in %s (delete them when the new store serves)",
        copied,
        engine.location,
        target,
    )
    return copied


def _copy_collections(client: QdrantClient, engine: EdgeEngine, prefix: str) -> int:
    copied = 0
    for collection in client.get_collections().collections:
        if not collection.name.startswith(prefix):
            continue
        config = stored_config(client.get_collection(collection.name).config.metadata)
        if config is None:  # not docingest's
            continue
        index = collection.name[len(prefix) :]
        if index in engine.list_indexes():  # a copy cut short: redo it
            engine.delete_index(index)
        engine.create_index(index, config)
        offset: models.ExtendedPointId | None = None
        while True:
            records, offset = client.scroll(
                collection.name, limit=_PAGE, offset=offset, with_payload=True, with_vectors=True
            )
            points = [point_from_record(record) for record in records]
            if points:
                engine.upsert(index, points)
            if offset is None:
                break
        log.info("migrated index %s: %d points", index, engine.count(index, models.Filter()))
        copied += 1
    return copied
