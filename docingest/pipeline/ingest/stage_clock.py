"""The one place that times a job's stages (`docingest_stage_duration_seconds`).

Detecting, extracting and chunking follow one another: each one's time runs from its start
to the next stage's. Embedding and storing overlap (a window is stored while the next one is
embedded), so the time between stage changes says nothing of either: indexing measures each
one's busy time and reports it (`IndexHooks.on_busy`), and that is what is recorded.
"""

from __future__ import annotations

import time

from docingest.pipeline import metrics
from docingest.pipeline.keys import JobStage

OVERLAPPING = frozenset({JobStage.EMBEDDING, JobStage.STORING})
"""Stages recorded by their busy time (`busy`), not by the time until the next stage."""


class StageClock:
    """Times one job's stages as it enters them; `stop` once it has finished."""

    def __init__(self) -> None:
        self._stage: JobStage | None = None
        self._started = time.perf_counter()

    def enter(self, stage: JobStage) -> None:
        """The job is in `stage` from now (again, if already: nothing changes)."""
        if stage is self._stage:
            return
        now = time.perf_counter()
        self._close(now)
        self._stage, self._started = stage, now

    def busy(self, stage: JobStage, seconds: float) -> None:
        """Record an overlapping stage's busy time."""
        metrics.STAGE_SECONDS.labels(stage.value).observe(seconds)

    def stop(self) -> None:
        """Record the stage the job ends in."""
        self._close(time.perf_counter())
        self._stage = None

    def _close(self, now: float) -> None:
        if self._stage is not None and self._stage not in OVERLAPPING:
            metrics.STAGE_SECONDS.labels(self._stage.value).observe(now - self._started)
