"""`JobProgress`: a job's stage and counters, from the callbacks of one ingest, posted to the
attempt's heartbeat thread (which writes them to Redis)."""

from __future__ import annotations

from typing import Any

from pipeline.ingest.heartbeat import Heartbeat
from pipeline.jobs.state import stage_progress
from pipeline.keys import JobStage


class LostJob(Exception):
    """This attempt no longer owns the job (re-queued by the sweep, or finished elsewhere)."""


class JobProgress:
    """Turns stage and count callbacks into job updates; raises `LostJob` once a write has
    found the job fenced."""

    def __init__(self, beat: Heartbeat) -> None:
        self._beat = beat

    def update(self, **fields: Any) -> None:
        if self._beat.lost:
            raise LostJob()
        self._beat.post(**fields)

    def stage(self, stage: JobStage) -> None:
        self.update(stage=stage, progress=stage_progress(stage))

    def page(self, done: int, total: int) -> None:
        stage = JobStage.EXTRACTING
        progress = stage_progress(stage, done, total)
        self.update(stage=stage, progress=progress, pages_done=done, pages_total=total)

    def chunks(self, stage: JobStage, done: int, total: int | None) -> None:
        """Chunks embedded or stored; with no total yet (the parsing child is still reading
        later pages), the counts only: stage and progress stay extraction's until it ends."""
        counts: dict[str, Any] = {
            "chunks_embedded" if stage is JobStage.EMBEDDING else "chunks_done": done
        }
        if total is None:
            self.update(**counts)
            return
        progress = stage_progress(stage, done, total)
        self.update(stage=stage, progress=progress, chunks_total=total, **counts)

    def stored(self, done: int, total: int | None) -> None:
        """Chunks written (staged) while later ones are still being embedded."""
        if total is None:
            self.update(chunks_done=done)
        else:
            self.update(chunks_total=total, chunks_done=done)
