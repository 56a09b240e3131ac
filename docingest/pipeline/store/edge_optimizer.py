"""When the embedded store builds its HNSW indexes, merges segments and drops deleted points.

Edge runs no optimizer of its own: points land in an appendable segment that search scans
point by point until `EdgeShard.optimize()` turns it into an HNSW-indexed segment. That call is
the price of fast search, and qdrant-edge-py 0.9 holds the GIL for its whole length, so every
thread of the process (the API, the worker, heartbeats) pauses while it runs. No thread of ours
can run beside it, so the policy bounds each pause instead of placing it:

- A shard is optimized as soon as `after_points` live points were written (published, or
  changed) since its last run, idle or not. A build's length grows with its points times
  their dimensions, so the default is a fixed size of dense vectors (`BUILD_VECTOR_BYTES`:
  about 2,000 points of 1,536 dimensions, 8,000 of 384), and searches scan at most about that
  many unindexed live points. Waiting for an idle store instead, as this thread once did, let
  a build grow to 20,000 points under steady searches, and the pause with it (BENCHMARKS.md,
  "Sustained ingestion").
- Staged points wait for their publish (`STAGED_BUILD_FACTOR`), and small documents are not
  staged at all (`docingest.pipeline.indexing.run`): a build that indexes a point before its publish
  builds it twice.
- Segments are never merged (`NO_MERGES`), so every pause stays one build's however large the
  index grows; vacuum (segments whose points were mostly deleted) still runs.
- A shard loaded from disk is checked once (a run with nothing to do costs µs).
- A build is followed by a flush of the shard's unflushed writes: one pause, not two.

The same thread closes the shards that have been idle for `idle_close_seconds` (see
`docingest.pipeline.store.edge`), once nothing is due on them, so idle indexes hold no threads.

The same thread flushes: Edge writes every update to its WAL and truncates the WAL only when
the shard is flushed, which nothing else does before `close`. Unflushed, the WAL grows by the
full size of every point written (about 3 KB a chunk) and a crash replays all of it at the
next start. A shard written to is flushed `FLUSH_INTERVAL_SECONDS` after its first unflushed
write, as a Qdrant server flushes its segments every 5 s by default.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import qdrant_edge as edge

from docingest.pipeline import metrics
from docingest.pipeline.settings import Settings

if TYPE_CHECKING:
    from docingest.pipeline.store.edge import EdgeEngine

log = logging.getLogger(__name__)

CHECK_INTERVAL_SECONDS = 0.5
BETWEEN_BUILDS_SECONDS = 0.05
FLUSH_INTERVAL_SECONDS = 5.0
SLOW_FLUSH_SECONDS = 0.05
"""A flush this long is logged: it paused the process (bench/bench_sustained.py names it)."""


BUILD_VECTOR_BYTES = 12 * 2**20
"""Dense vectors (float32) written before a build runs, unless `edge_optimize_after_points`
says otherwise: the size that bounds one build's pause (BENCHMARKS.md, "Sustained ingestion")."""
STAGED_BUILD_FACTOR = 3
"""Staged points (written, not yet published) do not make a build due until there are this
many times `after_points` of them: publishing a point that a build has indexed moves it back
to the appendable segment (a payload change to an indexed point is a copy), so building
before the publish builds it twice (BENCHMARKS.md, "Sustained ingestion")."""
NO_MERGES = 1_000_000
"""Edge merges segments only while a shard has more than this many: never, in effect. A merge
rebuilds the merged segment's graph, so merging as the index grows cost three times the
builds themselves and paused for seconds (BENCHMARKS.md, "Sustained ingestion"); each
segment costs a search a fraction of a millisecond instead."""
MIN_AFTER_POINTS = 1000
MAX_AFTER_POINTS = 20_000


@dataclass(frozen=True, slots=True)
class OptimizerPolicy:
    after_points: int | None = None
    """Points written before a build; None: `BUILD_VECTOR_BYTES` of the index's vectors."""
    idle_close_seconds: float = 60.0

    @classmethod
    def from_settings(cls, settings: Settings) -> OptimizerPolicy:
        return cls(settings.edge_optimize_after_points, settings.edge_idle_close_seconds)

    def points_before_build(self, dimensions: int) -> int:
        if self.after_points is not None:
            return self.after_points
        fitting = BUILD_VECTOR_BYTES // (4 * max(1, dimensions))
        return max(MIN_AFTER_POINTS, min(MAX_AFTER_POINTS, fitting))

    def shard_optimizers(self, dimensions: int) -> edge.EdgeOptimizersConfig:
        """Edge's thresholds (in KiB of float32 dense vectors) matching this policy."""
        vector_bytes = 4 * max(1, dimensions)
        after = self.points_before_build(dimensions)

        def kib(points: int) -> int:
            return max(1, -(-points * vector_bytes // 1024))

        return edge.EdgeOptimizersConfig(
            indexing_threshold=kib(after // 2),
            max_segment_size=kib(after * 3 // 2),
            default_segment_number=NO_MERGES,
        )


@dataclass
class _Due:
    pending: dict[str, int] = field(default_factory=dict)
    """Points written, moved or deleted since the index's last build."""
    searchable: dict[str, int] = field(default_factory=dict)
    """Of those, points made searchable (published): a build waits for them (see `_is_due`)."""
    threshold: dict[str, int] = field(default_factory=dict)
    unflushed_since: dict[str, float] = field(default_factory=dict)


class EdgeOptimizer:
    """A daemon thread that runs `EdgeEngine.optimize` on shards as the policy says."""

    def __init__(self, engine: EdgeEngine, policy: OptimizerPolicy) -> None:
        self._engine = engine
        self.policy = policy
        self._due = _Due()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        """Set when a build falls due: started at once, it covers one publish, not several."""
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="edge-optimizer", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    # --- what the engine reports ----------------------------------------------------------

    def opened(self, index: str, dimensions: int, *, check: bool) -> None:
        """Hear that the index's shard was opened (`check`: its history is unknown, as when
        loaded from disk, so look at it once)."""
        threshold = self.policy.points_before_build(dimensions)
        with self._lock:
            self._due.threshold[index] = threshold
            if check:
                for counts in (self._due.pending, self._due.searchable):
                    counts[index] = max(counts.get(index, 0), threshold)

    def written(self, index: str, points: int, *, searchable: bool) -> None:
        """Hear that `points` were written, moved or deleted (0: only payloads changed);
        `searchable`: they are live (published, or written live)."""
        with self._lock:
            self._due.pending[index] = self._due.pending.get(index, 0) + points
            if searchable:
                self._due.searchable[index] = self._due.searchable.get(index, 0) + points
            self._due.unflushed_since.setdefault(index, time.monotonic())
            if self._is_due(index):
                self._wake.set()

    def busy_with(self, index: str) -> bool:
        """Whether an optimization or a flush is due on the index (its shard stays open)."""
        with self._lock:
            return self._is_due(index) or index in self._due.unflushed_since

    def _is_due(self, index: str) -> bool:  # caller holds `_lock`
        """Due once `threshold` points were made searchable, or once staged points alone
        reach `STAGED_BUILD_FACTOR` times it (a long document's)."""
        threshold = self._due.threshold.get(index, MIN_AFTER_POINTS)
        return (
            self._due.searchable.get(index, 0) >= threshold
            or self._due.pending.get(index, 0) >= STAGED_BUILD_FACTOR * threshold
        )

    def forget(self, index: str) -> None:
        with self._lock:
            self._due.pending.pop(index, None)
            self._due.searchable.pop(index, None)
            self._due.threshold.pop(index, None)
            self._due.unflushed_since.pop(index, None)

    # --- the thread ---------------------------------------------------------------------

    def due(self) -> str | None:
        """Return the index to optimize now (the one with the most written since), if any."""
        with self._lock:
            candidates = [
                (pending, index)
                for index, pending in self._due.pending.items()
                if self._is_due(index)
            ]
        return max(candidates)[1] if candidates else None

    def flush_due(self) -> list[str]:
        """Return the indexes whose oldest unflushed write is `FLUSH_INTERVAL_SECONDS` old."""
        now = time.monotonic()
        with self._lock:
            return [
                index
                for index, since in self._due.unflushed_since.items()
                if now - since >= FLUSH_INTERVAL_SECONDS
            ]

    def flush(self, index: str) -> float:
        with self._lock:  # a write from here on is flushed next time
            self._due.unflushed_since.pop(index, None)
        seconds = self._engine.flush(index)
        metrics.STORE_FLUSH_SECONDS.observe(seconds)
        if seconds >= SLOW_FLUSH_SECONDS:
            log.info("flushed index %s in %.2f s", index, seconds)
        return seconds

    def run_once(self, index: str) -> float:
        """Build the index's due points, then flush it if it has unflushed writes: one pause
        instead of two a few seconds apart."""
        with self._lock:
            pending = self._due.pending.pop(index, 0)
            self._due.searchable.pop(index, None)
            unflushed = index in self._due.unflushed_since
        seconds = self._engine.optimize(index)
        metrics.STORE_OPTIMIZE_SECONDS.observe(seconds)
        log.info("optimized index %s (%d points written since) in %.2f s", index, pending, seconds)
        if unflushed:
            self.flush(index)
        return seconds

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(CHECK_INTERVAL_SECONDS)
            self._wake.clear()
            if self._stop.is_set():
                return
            for written in self.flush_due():
                try:
                    self.flush(written)
                except Exception:  # never let the thread die: the next write makes it due again
                    log.exception("flushing index %s failed", written)
            try:
                self._engine.close_idle(
                    idle_seconds=self.policy.idle_close_seconds, keep=self.busy_with
                )
            except Exception:
                log.exception("closing idle shards failed")
            # Every due shard in turn: a loaded shard's first check costs microseconds, and 100
            # of them one per tick kept 100 shards open a minute.
            while (due := self.due()) is not None and not self._stop.is_set():
                try:
                    self.run_once(due)
                except Exception:
                    log.exception("optimizing index %s failed", due)
                    break
                # A search that waited through this build runs before the next one starts
                # (two documents published together built back to back held one search 3.6 s).
                self._stop.wait(BETWEEN_BUILDS_SECONDS)
