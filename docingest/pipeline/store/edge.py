"""The embedded engine: one Qdrant Edge shard per index under `data_dir/edge`.

Layout: `edge/docingest.lock` (the owning process's pid), and per index a directory named like
its server collection, holding `shard/` (Edge's own files: segments, WAL) and `index.json` (the
index config, docingest's). `index.json` is written last when an index is created, so an index
exists exactly when it has one; a directory without it is a creation cut short and is replaced.
A deleted index's directory is renamed away first, then removed.

Locks, and why:
- `edge/docingest.lock` (a file lock): Edge lets one process own a shard directory; a second
  process fails at once with a message naming the first (`StoreLocked`).
- `_lifecycle` (a condition variable): guards the table of open shards. Every call borrows a
  shard under it and returns it after; deleting an index or closing the store waits until no
  call holds the shard, so no thread ever uses a closed shard.
- Nothing around reads and writes themselves: qdrant-edge-py 0.9 holds the GIL for the length
  of every call, so calls on a shard never overlap anyway, and Edge's own locks keep a shard
  consistent across its internal threads. The API's searches and the in-process worker's
  writes interleave call by call.
- Optimization (HNSW building, segment merging, vacuum) and the flushes that let Edge
  truncate its WAL run in `EdgeOptimizer`'s thread, also on a borrowed shard; see
  `docingest.pipeline.store.edge_optimizer` for when and what they cost.

Open shards cost threads and memory of their own (Edge starts its own threads per shard),
so a shard is open only while it is used: loaded on its first call, and closed by the
optimizer's thread once no call has used it for `edge_idle_close_seconds` and nothing is
due on it (so loading it again needs no check by the optimizer). Idle indexes then cost the
process nothing (BENCHMARKS.md, "Idle indexes").
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import qdrant_edge as edge
from qdrant_client import models

from docingest.pipeline.errors import IndexNotFound
from docingest.pipeline.settings import Settings
from docingest.pipeline.store import edge_convert as convert
from docingest.pipeline.store.edge_optimizer import EdgeOptimizer, OptimizerPolicy
from docingest.pipeline.store.models import IndexConfig
from docingest.pipeline.store.process_lock import ProcessLock
from docingest.pipeline.store.requests import CORE_INDEXES, DENSE, KEYWORD, Point

log = logging.getLogger(__name__)

CONFIG_FILE = "index.json"
SHARD_DIR = "shard"
DENSE_QUANTIZATION = edge.ScalarQuantizationConfig(
    type=edge.ScalarType.Int8, quantile=0.99, memory=edge.Memory.Pinned
)
"""int8 copies of the dense vectors, in RAM, built with each HNSW index: the graph is built
and searched on them (a build costs less CPU, a search reads a quarter of float32's bytes),
and the candidates are rescored with the float32 originals, which stay memory-mapped, so
scores are exact cosines. The build's CPU and the recall against an exact search are in
BENCHMARKS.md, "Embedded store". Points not yet indexed are scanned in float32, exactly. Part
of a shard's config, so it applies to indexes created from this release on; older shards keep
float32-only HNSW indexes."""


@dataclass
class _OpenShard:
    shard: edge.EdgeShard
    borrowed: int = 0
    last_used: float = field(default_factory=time.monotonic)


class EdgeEngine:
    """The `Engine` over Qdrant Edge shards in one directory, owned by this process."""

    writes_live = True

    def __init__(self, root: Path, *, settings: Settings, process_lock: ProcessLock) -> None:
        self.root = root
        self.location = str(root)
        self._settings = settings
        self._process_lock = process_lock
        self._lifecycle = threading.Condition(threading.RLock())
        self._open: dict[str, _OpenShard] = {}
        self._idle_closed: set[str] = set()
        """Indexes whose shard this process closed with nothing due (see `close_idle`)."""
        self._closed = False
        self.optimizer = EdgeOptimizer(self, OptimizerPolicy.from_settings(settings))

    @classmethod
    def open(cls, settings: Settings) -> EdgeEngine:
        """Take `data_dir/edge` for this process (else `StoreLocked`) and start the optimizer.

        Indexes written by the previous release's local mode (`data_dir/qdrant`) are copied in
        first (`docingest.pipeline.store.legacy`).
        """
        root = settings.data_dir / "edge"
        process_lock = ProcessLock(root)
        try:
            engine = cls(root, settings=settings, process_lock=process_lock)
            from docingest.pipeline.store.legacy import migrate_local_mode

            migrate_local_mode(
                settings.data_dir / "qdrant", engine, prefix=settings.collection_prefix
            )
        except BaseException:
            process_lock.release()
            raise
        engine.optimizer.start()
        return engine

    # --- lifecycle ----------------------------------------------------------------------

    def _directory(self, index: str) -> Path:
        return self.root / (self._settings.collection_prefix + index)

    @contextmanager
    def _borrow(self, index: str, *, activity: bool = True) -> Iterator[edge.EdgeShard]:
        """Yield the index's shard, loading it on first use; `IndexNotFound` if none.
        `activity`: the call counts as the index's use (the optimizer's own do not, or a
        shard it keeps working on would never be idle enough to close)."""
        with self._lifecycle:
            if self._closed:
                raise RuntimeError("the vector store is closed")
            entry = self._open.get(index)
            if entry is None:
                directory = self._directory(index)
                if not (directory / CONFIG_FILE).is_file():
                    raise IndexNotFound(f"Index '{index}' does not exist.")
                config = self.index_config(index)
                entry = self._open[index] = _OpenShard(
                    edge.EdgeShard.load(str(directory / SHARD_DIR), self._load_config(config))
                )
                # closed by us with nothing due, or of unknown history: look at it once
                unknown = index not in self._idle_closed
                self._idle_closed.discard(index)
                self.optimizer.opened(index, _dimensions(config), check=unknown)
            entry.borrowed += 1
        try:
            yield entry.shard
        finally:
            with self._lifecycle:
                entry.borrowed -= 1
                if activity:
                    entry.last_used = time.monotonic()
                self._lifecycle.notify_all()

    def close_idle(self, *, idle_seconds: float, keep: Callable[[str], bool]) -> list[str]:
        """Close the shards no call has used for `idle_seconds`, except those `keep` names
        (work is due on them); return their indexes. A closed shard is loaded again by its
        next call."""
        now = time.monotonic()
        closed = []
        with self._lifecycle:
            for index, entry in list(self._open.items()):
                if entry.borrowed or now - entry.last_used < idle_seconds or keep(index):
                    continue
                self._close_shard(index)
                self._idle_closed.add(index)
                closed.append(index)
        return closed

    def open_shards(self) -> int:
        """How many shards are open now."""
        with self._lifecycle:
            return len(self._open)

    def _close_shard(self, index: str) -> None:
        """Close the index's open shard once no call holds it (caller holds `_lifecycle`)."""
        entry = self._open.get(index)
        if entry is None:
            return
        self._lifecycle.wait_for(lambda: entry.borrowed == 0)
        del self._open[index]
        entry.shard.flush()
        entry.shard.close()

    def ping(self) -> None:
        if self._closed:
            raise RuntimeError("the vector store is closed")

    def close(self) -> None:
        self.optimizer.stop()
        with self._lifecycle:
            if self._closed:
                return
            for index in list(self._open):
                self._close_shard(index)
            self._closed = True
        self._process_lock.release()

    def locked(self) -> threading.Condition:
        return self._lifecycle

    # --- indexes ------------------------------------------------------------------------

    def list_indexes(self) -> list[str]:
        prefix = self._settings.collection_prefix
        if not self.root.is_dir():
            return []
        return sorted(
            path.name[len(prefix) :]
            for path in self.root.iterdir()
            if path.name.startswith(prefix) and (path / CONFIG_FILE).is_file()
        )

    def create_index(self, index: str, config: IndexConfig) -> None:
        directory = self._directory(index)
        with self._lifecycle:
            if (directory / CONFIG_FILE).is_file():
                raise FileExistsError(f"index '{index}' exists")
            self._close_shard(index)
            shutil.rmtree(directory, ignore_errors=True)  # a creation cut short
            shard = edge.EdgeShard.create(str(directory / SHARD_DIR), self._shard_config(config))
            for field, schema in CORE_INDEXES.items():
                shard.update(
                    edge.UpdateOperation.create_field_index(field, convert.PAYLOAD_SCHEMAS[schema])
                )
            # so a range's exclusion of booleans (edge_convert._range) reads an index
            shard.update(
                edge.UpdateOperation.create_field_index(
                    convert.BOOL_KEYS, edge.PayloadSchemaType.Keyword
                )
            )
            shard.flush()
            self._open[index] = _OpenShard(shard)
            self.optimizer.opened(index, _dimensions(config), check=False)
            _write_atomically(directory / CONFIG_FILE, config.model_dump_json())

    def _shard_config(self, config: IndexConfig) -> edge.EdgeConfig:
        return edge.EdgeConfig(
            vectors={
                DENSE: edge.EdgeVectorParams(
                    size=_dimensions(config), distance=edge.Distance.Cosine
                )
            },
            sparse_vectors={KEYWORD: edge.EdgeSparseVectorParams(modifier=edge.Modifier.Idf)},
            optimizers=self.optimizer.policy.shard_optimizers(_dimensions(config)),
            quantization_config=DENSE_QUANTIZATION,
        )

    def _load_config(self, config: IndexConfig | None) -> edge.EdgeConfig | None:
        """The vectors as created and this release's optimizer thresholds, which Edge writes
        over the shard's own (an index made by an earlier release gets today's policy); the
        rest (quantization, HNSW) stays as the shard has it."""
        if not _dimensions(config):
            return None
        assert config is not None
        created = self._shard_config(config)
        return edge.EdgeConfig(
            vectors=created.vectors,
            sparse_vectors=created.sparse_vectors,
            optimizers=created.optimizers,
        )

    def replace_config(self, index: str, config: IndexConfig) -> None:
        path = self._directory(index) / CONFIG_FILE
        with self._lifecycle:
            if not path.is_file():
                raise IndexNotFound(f"Index '{index}' does not exist.")
            _write_atomically(path, config.model_dump_json())

    def index_config(self, index: str) -> IndexConfig | None:
        path = self._directory(index) / CONFIG_FILE
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError as exc:
            raise IndexNotFound(f"Index '{index}' does not exist.") from exc
        return IndexConfig.model_validate_json(text)

    def index_exists(self, index: str) -> bool:
        # No foreign shard can sit here (the directory is ours alone): a directory without a
        # config is a creation cut short, which `create_index` replaces, not a conflict.
        return (self._directory(index) / CONFIG_FILE).is_file()

    def delete_index(self, index: str) -> bool:
        directory = self._directory(index)
        with self._lifecycle:
            if not (directory / CONFIG_FILE).is_file():
                return False
            self._close_shard(index)
            self._idle_closed.discard(index)
            doomed = self.root / f".deleted-{uuid.uuid4().hex}"
            directory.rename(doomed)  # atomic: the index is gone even if removal stops here
        self.optimizer.forget(index)
        shutil.rmtree(doomed, ignore_errors=True)
        return True

    # --- points -------------------------------------------------------------------------

    def payload_indexes(self, index: str) -> set[str] | None:
        with self._borrow(index) as shard:
            return set(shard.info().payload_schema)

    def create_payload_index(self, index: str, path: str, schema: models.PayloadSchemaType) -> None:
        operation = edge.UpdateOperation.create_field_index(path, convert.PAYLOAD_SCHEMAS[schema])
        with self._borrow(index) as shard:
            shard.update(operation)

    def upsert(self, index: str, points: Sequence[Point]) -> None:
        operation = edge.UpdateOperation.upsert_points([convert.to_point(p) for p in points])
        with self._borrow(index) as shard:
            shard.update(operation)
        # A live write (`VectorStore.write_live`) is searched at once; staged points wait for
        # their publish, which reports them again (see `set_payload`).
        live = any(point.payload.get("state") == "live" for point in points)
        self.optimizer.written(index, len(points), searchable=live)

    def set_payload(self, index: str, payload: dict[str, Any], selector: models.Filter) -> None:
        """Set `payload` on the selected points (a publish, or a metadata change: live points
        either way). Points in an indexed segment are copied back to the appendable one
        (Edge's segments are immutable once built), so they count as written."""
        edge_filter = convert.to_filter(selector)
        operation = edge.UpdateOperation.set_payload_by_filter(edge_filter, payload)
        with self._borrow(index) as shard:
            moved = shard.count(edge.CountRequest(exact=True, filter=edge_filter))
            shard.update(operation)
        self.optimizer.written(index, moved, searchable=True)

    def count(self, index: str, selector: models.Filter) -> int:
        request = edge.CountRequest(exact=True, filter=convert.to_filter(selector))
        with self._borrow(index) as shard:
            return shard.count(request)

    def delete(self, index: str, selector: models.Filter) -> None:
        operation = edge.UpdateOperation.delete_points_by_filter(convert.to_filter(selector))
        with self._borrow(index) as shard:
            shard.update(operation)
        self.optimizer.written(index, 1, searchable=False)

    def scroll(
        self,
        index: str,
        selector: models.Filter,
        *,
        limit: int,
        offset: models.ExtendedPointId | None,
        payload: Sequence[str] | None,
        vectors: Sequence[str] | None,
        order_by: str | None = None,
    ) -> tuple[list[models.Record], models.ExtendedPointId | None]:
        request = edge.ScrollRequest(
            offset=str(offset) if offset is not None else None,
            limit=limit,
            filter=convert.to_filter(selector),
            with_payload=convert.payload_keys(payload) if payload is not None else True,
            with_vector=list(vectors) if vectors else False,
            order_by=edge.OrderBy(order_by, edge.Direction.Asc) if order_by is not None else None,
        )
        with self._borrow(index) as shard:
            records, next_offset = shard.scroll(request)
        following = str(next_offset) if next_offset is not None else None
        return [convert.to_record(record) for record in records], following

    def query_batch(
        self, index: str, requests: Sequence[models.QueryRequest]
    ) -> list[list[models.ScoredPoint]]:
        batch = edge.QueryBatchRequest([convert.to_query(request) for request in requests])
        with self._borrow(index) as shard:
            results = shard.query_batch(batch)
        return [convert.to_scored(points) for points in results]

    def query_fused(
        self,
        index: str,
        *,
        prefetch: Sequence[models.Prefetch],
        query: models.FusionQuery | models.RrfQuery,
        limit: int,
        with_payload: Sequence[str],
    ) -> list[models.ScoredPoint]:
        request = edge.QueryRequest(
            limit=limit,
            prefetches=[convert.to_prefetch(stage) for stage in prefetch],
            query=convert.to_fusion(query),
            with_payload=convert.payload_keys(with_payload),
        )
        with self._borrow(index) as shard:
            return convert.to_scored(shard.query(request))

    # --- maintenance --------------------------------------------------------------------

    def flush(self, index: str) -> float:
        """Persist the index's segments so Edge can truncate its WAL; return the seconds taken."""
        return self._timed(index, edge.EdgeShard.flush)

    def optimize(self, index: str) -> float:
        """Run Edge's optimizers on the index until none has work; return the seconds taken."""
        return self._timed(index, edge.EdgeShard.optimize)

    def _timed(self, index: str, operation: Callable[[edge.EdgeShard], object]) -> float:
        """Run `operation` on the index's shard; return its seconds (0 if the index is gone)."""
        started = time.perf_counter()
        try:
            with self._borrow(index, activity=False) as shard:
                operation(shard)
        except IndexNotFound:
            return 0.0
        return time.perf_counter() - started

    def pending_points(self, index: str) -> int:
        """Return the points whose dense vector is not in an HNSW index yet.

        Edge counts every sparse vector as indexed (its inverted index is always up to date),
        so the dense share of `indexed_vectors_count` is what remains after those."""
        with_keywords = edge.CountRequest(
            exact=True, filter=edge.Filter(must=[edge.HasVectorCondition(KEYWORD)])
        )
        with self._borrow(index) as shard:
            info = shard.info()
            sparse = shard.count(with_keywords)
        return max(0, info.points_count - (info.indexed_vectors_count - sparse))


def _dimensions(config: IndexConfig | None) -> int:
    return (config.embedding.dimensions or 0) if config is not None else 0


def _write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
    with open(temporary, "w", encoding="utf-8") as file:
        file.write(text)
        file.flush()
        os.fsync(file.fileno())
    temporary.replace(path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
