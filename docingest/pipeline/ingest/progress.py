"""`JobProgress`: a job's stage and counters, from the callbacks of one ingest, posted to the
attempt's heartbeat thread (which writes them to Redis).

Extraction and embedding overlap on a long document, so `progress` is one estimate of their
joint work (`docingest.pipeline.jobs.state.overlap_fraction`) from the pages read, the chunks
received and the chunks embedded, moving with each of them and never back (`OverlapProgress`; the
UPDATE script also refuses a lower value). Storing's own span follows.
"""

from __future__ import annotations

from typing import Any

from docingest.pipeline.ingest.heartbeat import Heartbeat
from docingest.pipeline.jobs.state import OverlapProgress, overlap_fraction, stage_progress
from docingest.pipeline.keys import JobStage


class LostJob(Exception):
    """This attempt no longer owns the job (re-queued by the sweep, or finished elsewhere)."""


class JobProgress:
    """Turns stage and count callbacks into job updates; raises `LostJob` once a write has
    found the job fenced."""

    def __init__(self, beat: Heartbeat) -> None:
        self._beat = beat
        self._overlap = OverlapProgress()
        self._pages_done = 0
        self._pages_total: int | None = None
        self._embedded = self._stored = self._held = 0
        self._total: int | None = None

    def update(self, **fields: Any) -> None:
        if self._beat.lost:
            raise LostJob()
        self._beat.post(**fields)

    def stage(self, stage: JobStage) -> None:
        progress = stage_progress(stage)
        self._overlap.floor(progress)
        self.update(stage=stage, progress=progress)

    def page(self, done: int, total: int) -> None:
        self._pages_done, self._pages_total = done, total
        self.update(
            stage=JobStage.EXTRACTING, progress=self._estimate(), pages_done=done, pages_total=total
        )

    def chunks(self, stage: JobStage, done: int, total: int | None) -> None:
        """Chunks embedded or stored; with no total yet (the parsing child is still reading
        later pages), the stage stays extraction's until it ends, and progress is estimated
        from pages and chunks together."""
        self._total = total if total is not None else self._total
        if stage is JobStage.STORING:
            self._stored = done
            fields: dict[str, Any] = {"chunks_done": done}
            progress = stage_progress(stage, done, total) if total is not None else None
        else:
            self._embedded = done
            fields = {"chunks_embedded": done}
            progress = self._estimate()
        if total is None:
            self.update(progress=progress, **fields)
            return
        self.update(stage=stage, progress=progress, chunks_total=total, **fields)

    def stored(self, done: int, total: int | None) -> None:
        """Chunks written (staged) while later ones are still being embedded."""
        self._stored = done
        if total is None:
            self.update(chunks_done=done)
        else:
            self.update(chunks_total=total, chunks_done=done)

    def held(self, count: int) -> None:
        """Chunks taken from the document and not yet stored (`IndexHooks.on_held`)."""
        self._held = count

    def _estimate(self) -> float:
        fraction = overlap_fraction(
            pages_done=self._pages_done,
            pages_total=self._pages_total,
            chunks_embedded=self._embedded,
            chunks_received=self._stored + self._held,
            chunks_total=self._total,
        )
        return self._overlap.advance(fraction)
