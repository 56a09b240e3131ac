"""Upload a set of files and follow their jobs to the end (shared by `ingest` and the seed)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from docingest import Client, DocingestError
from docingest.models import TERMINAL, ErrorInfo, Job, JobResult, UploadAccepted

UPLOAD_CONCURRENCY = 4
POLL_SECONDS = 0.5
UPLOAD_CHECK_SECONDS = 0.05


@dataclass
class Item:
    """One file of a batch: where it is, and what became of its upload and job."""

    path: Path
    label: str
    """How the file is named in output: the path as the user gave it, or for a file found in
    a folder its path inside that folder (after the folder's name when several are given)."""
    document_id: str | None = None
    """None leaves the server's default (the file's name)."""
    job_id: str | None = None
    job: Job | None = None
    upload_error: ErrorInfo | None = None

    @property
    def name(self) -> str:
        """What output calls the file: the document id the service stored it under (once the
        upload is accepted; a path `csv/a.csv` is stored as `a.csv`), else its label."""
        return self.document_id if self.job_id is not None and self.document_id else self.label

    @property
    def status(self) -> str:
        if self.upload_error is not None:
            return "failed"
        if self.job is not None:
            return self.job.status
        return "queued" if self.job_id else "uploading"

    @property
    def stage(self) -> str | None:
        return self.job.stage if self.job is not None else None

    @property
    def counts(self) -> str | None:
        """How far the job's stage has got: pages read, chunks embedded or stored."""
        job = self.job
        if job is None or job.status != "processing":
            return None
        total = "?" if job.chunks_total is None else str(job.chunks_total)
        if job.stage == "extracting" and job.pages_total:
            pages = f"page {job.pages_done} of {job.pages_total}"
            embedded = job.chunks_embedded
            return f"{pages}, {embedded} chunks embedded" if embedded else pages
        if job.stage == "embedding":
            return f"{job.chunks_embedded} of {total} chunks"
        if job.stage == "storing":
            return f"{job.chunks_done} of {total} chunks"
        return None

    @property
    def progress(self) -> float:
        return float(self.job.progress) if self.job is not None else 0.0

    @property
    def error(self) -> ErrorInfo | None:
        if self.upload_error is not None:
            return self.upload_error
        return self.job.error if self.job is not None else None

    @property
    def result(self) -> JobResult | None:
        return self.job.result if self.job is not None else None

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL

    def _state(self) -> tuple[object, ...]:
        return (self.status, self.stage, self.progress, self.counts, self.job_id)


def _is_hidden(relative: Path) -> bool:
    return any(part.startswith(".") for part in relative.parts)


def collect(
    paths: Sequence[Path], *, exclude: Callable[[Path], bool] = lambda path: False
) -> list[Item]:
    """Expand files and folders (recursively, skipping hidden entries) into batch items.

    A file found inside a folder gets its path relative to that folder as `document_id`, so
    two `README.md` in different subfolders stay two documents. Raises `FileNotFoundError`
    for a path that does not exist.
    """
    items: list[Item] = []
    folders = sum(1 for path in paths if path.is_dir())
    for path in paths:
        if path.is_dir():
            for found in sorted(path.rglob("*")):
                relative = found.relative_to(path)
                if found.is_file() and not _is_hidden(relative) and not exclude(found):
                    label = relative.as_posix()
                    if folders > 1:  # two folders may each hold a README.md
                        label = f"{path.resolve().name}/{label}"
                    items.append(Item(found, label, document_id=relative.as_posix()))
        elif path.is_file():
            if not exclude(path):
                items.append(Item(path, str(path)))
        else:
            raise FileNotFoundError(f"no such file or folder: {path}")
    return items


def run(
    client: Client,
    items: Iterable[Item],
    *,
    index: str,
    metadata: dict[str, Any] | None = None,
    force: bool = False,
    wait: bool = True,
    on_change: Callable[[Item], None] = lambda item: None,
    poll_seconds: float = POLL_SECONDS,
) -> None:
    """Upload every item (a few at once), then poll its job until it is finished.

    `on_change(item)` runs in this thread whenever an item's status, stage or progress moves.
    An upload the server refuses marks its item failed; an unreachable service raises
    `DocingestError` (nothing more can be done).
    """
    items = list(items)
    pool = ThreadPoolExecutor(max_workers=UPLOAD_CONCURRENCY, thread_name_prefix="upload")
    try:
        uploads: dict[Future[UploadAccepted], Item] = {
            pool.submit(
                client.upload,
                index,
                item.path,
                document_id=item.document_id,
                metadata=metadata,
                force=force,
            ): item
            for item in items
        }
        next_poll = time.monotonic()
        while True:
            for future in [f for f in uploads if f.done()]:
                _record_upload(uploads.pop(future), future, on_change)
            if wait and time.monotonic() >= next_poll:
                next_poll = time.monotonic() + poll_seconds
                for item in items:
                    if item.job_id is not None and not item.finished:
                        before = item._state()
                        item.job = client.get_job(item.job_id)
                        if item._state() != before:
                            on_change(item)
            if not uploads and (not wait or all(item.finished for item in items)):
                return
            time.sleep(UPLOAD_CHECK_SECONDS if uploads else poll_seconds)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _record_upload(
    item: Item, future: Future[UploadAccepted], on_change: Callable[[Item], None]
) -> None:
    try:
        accepted = future.result()
    except OSError as exc:
        message = f"Cannot read {item.path}: {exc.strerror or exc}."
        item.upload_error = ErrorInfo(code="unreadable_file", message=message)
    except DocingestError as exc:
        if exc.status is None:
            raise  # the service is gone: stop instead of failing every file alike
        item.upload_error = ErrorInfo(code=exc.code, message=exc.message)
    else:
        item.job_id = accepted.job_id
        item.document_id = accepted.document_id
    on_change(item)
