"""When the embedded store builds its HNSW indexes, merges segments and drops deleted points.

Edge runs no optimizer of its own: points land in an appendable segment that search scans
point by point until `EdgeShard.optimize()` turns it into an HNSW-indexed segment. That call is
the price of fast search, and qdrant-edge-py 0.9 holds the GIL for its whole length, so every
thread of the process (the API, the worker, heartbeats) pauses while it runs. The policy keeps
each pause short and puts it where it hurts least:

- A shard is optimized once `after_points` points were written (or deleted) since its last
  run, so one run indexes about that many points (its pause is in BENCHMARKS.md, "Embedded
  store") and searches scan at most about that many unindexed points one by one.
- A due shard waits for the store to be idle for `idle_seconds`; past twice its budget it runs
  anyway, so steady ingestion cannot starve indexing.
- Segments are capped at 1.5 × `after_points` (`max_segment_size`), so merging never rebuilds
  a large segment: a run's pause stays bounded however large the index grows.
- A shard loaded from disk is checked once when idle (a run with nothing to do costs µs).

The same thread closes the shards that have been idle for `idle_close_seconds` (see
`pipeline.store.edge`), once nothing is due on them, so idle indexes hold no threads.

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

from pipeline import metrics
from pipeline.settings import Settings

if TYPE_CHECKING:
    from pipeline.store.edge import EdgeEngine

log = logging.getLogger(__name__)

CHECK_INTERVAL_SECONDS = 0.5
FLUSH_INTERVAL_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class OptimizerPolicy:
    after_points: int
    idle_seconds: float
    idle_close_seconds: float = 60.0

    @classmethod
    def from_settings(cls, settings: Settings) -> OptimizerPolicy:
        return cls(
            settings.edge_optimize_after_points,
            settings.edge_optimize_idle_seconds,
            settings.edge_idle_close_seconds,
        )

    def shard_optimizers(self, dimensions: int) -> edge.EdgeOptimizersConfig:
        """Edge's thresholds (in KiB of float32 dense vectors) matching this policy."""

        def kib(points: int) -> int:
            return max(1, -(-points * dimensions * 4 // 1024))

        return edge.EdgeOptimizersConfig(
            indexing_threshold=kib(self.after_points // 2),
            max_segment_size=kib(self.after_points * 3 // 2),
        )


@dataclass
class _Due:
    pending: dict[str, int] = field(default_factory=dict)
    unflushed_since: dict[str, float] = field(default_factory=dict)
    last_activity: float = field(default_factory=time.monotonic)


class EdgeOptimizer:
    """A daemon thread that runs `EdgeEngine.optimize` on shards as the policy says."""

    def __init__(self, engine: EdgeEngine, policy: OptimizerPolicy) -> None:
        self._engine = engine
        self.policy = policy
        self._due = _Due()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="edge-optimizer", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    # --- what the engine reports ----------------------------------------------------------

    def touched(self) -> None:
        self._due.last_activity = time.monotonic()

    def written(self, index: str, points: int) -> None:
        """Hear that `points` were written or deleted (0: only payloads changed)."""
        with self._lock:
            self._due.pending[index] = self._due.pending.get(index, 0) + points
            self._due.unflushed_since.setdefault(index, time.monotonic())

    def loaded(self, index: str) -> None:
        with self._lock:  # unknown history: check it at the next idle moment
            self._due.pending[index] = max(
                self._due.pending.get(index, 0), self.policy.after_points
            )

    def busy_with(self, index: str) -> bool:
        """Whether an optimization or a flush is due on the index (its shard stays open)."""
        with self._lock:
            return (
                self._due.pending.get(index, 0) >= self.policy.after_points
                or index in self._due.unflushed_since
            )

    def forget(self, index: str) -> None:
        with self._lock:
            self._due.pending.pop(index, None)
            self._due.unflushed_since.pop(index, None)

    # --- the thread ---------------------------------------------------------------------

    def due(self) -> str | None:
        """Return the index to optimize now, if any."""
        idle = time.monotonic() - self._due.last_activity >= self.policy.idle_seconds
        with self._lock:
            candidates = [
                (pending, index)
                for index, pending in self._due.pending.items()
                if pending >= self.policy.after_points
                and (idle or pending >= 2 * self.policy.after_points)
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
        return seconds

    def run_once(self, index: str) -> float:
        with self._lock:
            pending = self._due.pending.pop(index, 0)
        seconds = self._engine.optimize(index)
        metrics.STORE_OPTIMIZE_SECONDS.observe(seconds)
        log.info("optimized index %s (%d points written since) in %.2f s", index, pending, seconds)
        return seconds

    def _run(self) -> None:
        while not self._stop.wait(CHECK_INTERVAL_SECONDS):
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
            # Every due shard in turn while the store stays idle: a loaded shard's first check
            # costs microseconds, and 100 of them one per tick kept 100 shards open a minute.
            while (due := self.due()) is not None and not self._stop.is_set():
                try:
                    self.run_once(due)
                except Exception:
                    log.exception("optimizing index %s failed", due)
                    break
