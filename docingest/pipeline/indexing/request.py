"""What `index_document` takes, how a caller follows and steers it, and what it returns."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from docingest.pipeline.embedders.usage import JobUsage
from docingest.pipeline.keys import JobStage
from docingest.pipeline.prepare import PreparedStream

ProgressReporter = Callable[[JobStage, int, int | None], None]
"""Called with (stage, done, total): `EMBEDDING` or `STORING`, counts of chunks; total None
while the document is still being extracted."""

BusyReporter = Callable[[JobStage, float], None]
"""Called once per run with each overlapping stage's busy seconds (`EMBEDDING`, `STORING`)."""

STEPS = ("check", "reuse", "embed", "write", "publish", "retire")


@dataclass(frozen=True, slots=True)
class IndexRequest:
    """One prepared document to store as `version` of `document_id` in `index`."""

    prepared: PreparedStream
    index: str
    document_id: str
    version: int
    """From `DocumentFence.next_version`, floored at the store's live version."""
    user_metadata: Mapping[str, Any] = field(default_factory=dict)
    force: bool = False
    """Re-embed every chunk and rewrite unchanged content (e.g. the model changed under the
    same name)."""
    access: list[str] | None = None
    """The document's access list (`docingest.pipeline.store.access`); None keeps the live
    version's, so a re-upload that does not name one never widens who sees the document."""


def _ignore(name: str) -> None:
    return None


def _ignore_progress(stage: JobStage, done: int, total: int | None) -> None:
    return None


def _ignore_stored(done: int, total: int | None) -> None:
    return None


def _ignore_count(count: int) -> None:
    return None


def _ignore_busy(stage: JobStage, seconds: float) -> None:
    return None


def _never() -> bool:
    return False


@dataclass(frozen=True, slots=True)
class IndexHooks:
    """How a caller follows and steers one `index_document` run."""

    on_progress: ProgressReporter = _ignore_progress
    should_cancel: Callable[[], bool] = _never
    """Polled between windows and before publishing; true → `Cancelled`, index as it was."""
    on_step: Callable[[str], None] = _ignore
    """Hears each of `STEPS` as it begins."""
    on_stored: Callable[[int, int | None], None] = _ignore_stored
    """Hears (done, total) as windows are written as staged, while the stage is still
    `EMBEDDING` (later windows are being embedded); total as in `on_progress`."""
    on_held: Callable[[int], None] = _ignore_count
    """Hears how many chunks this run holds (taken from the document, not yet stored) at
    every change: at most two windows and one batch of the parsing child's."""
    on_busy: BusyReporter = _ignore_busy
    """Hears the busy time of embedding and of storing once the version is published: the
    two overlap, so their time is not the time between stage changes."""


NO_HOOKS = IndexHooks()


@dataclass(frozen=True, slots=True)
class IndexResult:
    """What a finished job reports (the contract's job `result`)."""

    document_id: str
    version: int
    format: str | None
    pages: int | None
    words: int | None
    chunks: int
    chunks_reused: int
    unchanged: bool
    ocr_pages: int = 0
    """Pages whose text came from OCR."""
    format_note: str | None = None
    """Set when the file's extension names another format than its bytes (a text file
    named `.pdf`), saying which was read."""
    usage: JobUsage = field(default_factory=JobUsage)
    """What embedding the document cost (`ingest_file` measures it)."""
