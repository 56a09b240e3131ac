"""Prepare untrusted files in a child process with CPU, memory and wall-clock limits.

Parsers are where hostile input bites: a decompression bomb, a cyclic page tree, a layout
pathology. Run inside the worker, one such file would take the whole worker (and, in the
embedded topology, the whole server) down with it. Here detect → extract → chunk runs in a
fresh interpreter (`pipeline.isolation_child`) that sets `RLIMIT_AS` and `RLIMIT_CPU` before
it imports a parser, with a wall-clock deadline enforced here. Whatever the file does, only
the child dies, and the job fails with a code:

    MemoryError in the child, or killed by the kernel (OOM)    → document_too_large
    CPU limit (SIGXCPU) or the wall-clock deadline             → timeout
    any other death (a crash in a C extension)                 → corrupt_document

A plain subprocess rather than multiprocessing: it works the same under Celery's prefork
children (whose daemonic processes may not fork multiprocessing children), thread pools and
any main module, and results come back as JSON lines, never as pickles a compromised parser
could forge. The price is an interpreter start per upload (about a second of imports).
"""

from __future__ import annotations

import json
import logging
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from pipeline.chunking import Chunk
from pipeline.document import PageReporter
from pipeline.errors import (
    CorruptDocument,
    DocumentTooLarge,
    ExtractionTimeout,
    IngestError,
    PermanentError,
)
from pipeline.settings import Settings
from pipeline.store_models import ChunkingSpec

log = logging.getLogger(__name__)

MIN_CPU_SECONDS = 60
"""CPU seconds any file gets, however small (interpreter start and imports take a few)."""

CHILD_SETTINGS = (
    "max_pages",
    "max_extracted_chars",
    "max_docx_uncompressed_bytes",
    "max_docx_compression_ratio",
    "max_metadata_bytes",
)
"""The settings extraction reads; only these cross into the child (no secrets do)."""


@dataclass(frozen=True, slots=True)
class Limits:
    memory_bytes: int
    cpu_seconds: int
    wall_seconds: float

    @classmethod
    def from_settings(cls, settings: Settings, *, size_bytes: int) -> Limits:
        """Limits for a file of `size_bytes`: CPU time grows with the size, up to the cap, so
        a small file that sends a parser into a super-linear path stops within a minute or
        so instead of holding a worker for the full cap."""
        per_size = settings.extraction_cpu_seconds_per_mb * size_bytes / 2**20
        cpu = min(settings.extraction_cpu_seconds, int(MIN_CPU_SECONDS + per_size))
        return cls(
            memory_bytes=settings.extraction_memory_bytes,
            cpu_seconds=cpu,
            wall_seconds=min(settings.extraction_timeout_seconds, 2.0 * cpu + 30.0),
        )


@dataclass(frozen=True, slots=True)
class PreparedChunks:
    """What indexing needs of a prepared document: its chunks and automatic metadata."""

    chunks: list[Chunk]
    metadata: dict[str, Any]


def prepare_isolated(
    path: Path,
    *,
    filename: str,
    settings: Settings,
    content_type: str | None = None,
    chunking: ChunkingSpec | None = None,
    on_stage: Callable[[str], None] | None = None,
    on_page: PageReporter | None = None,
    limits: Limits | None = None,
) -> PreparedChunks:
    """`prepare_document` of the file at `path`, run in a limited child process."""
    limits = limits or Limits.from_settings(settings, size_bytes=path.stat().st_size)
    chunking = chunking or ChunkingSpec.from_settings(settings)
    request = {
        "path": str(path),
        "filename": filename,
        "content_type": content_type,
        "chunking": chunking.model_dump(mode="json"),
        "settings": settings.model_dump(mode="json", include=set(CHILD_SETTINGS)),
    }
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pipeline.isolation_child",
            str(limits.memory_bytes),
            str(limits.cpu_seconds),
        ],  # fmt: skip
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        close_fds=True,
    )
    assert child.stdin is not None and child.stdout is not None and child.stderr is not None
    lines: queue.Queue[str | None] = queue.Queue()
    stderr_tail: deque[str] = deque(maxlen=20)
    readers = [
        threading.Thread(target=_pump, args=(child.stdout, lines.put), daemon=True),
        threading.Thread(target=_pump, args=(child.stderr, stderr_tail.append, False), daemon=True),
    ]
    for reader in readers:
        reader.start()
    try:
        child.stdin.write((json.dumps(request) + "\n").encode())
        child.stdin.close()
    except BrokenPipeError:
        pass  # it died at once; its exit status says why
    deadline = time.monotonic() + limits.wall_seconds
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ExtractionTimeout(
                    f"Extracting this file took longer than {limits.wall_seconds:.0f} s; it "
                    "may be malformed or hostile."
                )
            try:
                line = lines.get(timeout=min(remaining, 1.0))
            except queue.Empty:
                continue
            if line is None:  # stdout closed without an outcome: the child died
                child.wait(10)
                raise _death(child.returncode, limits, "".join(stderr_tail))
            message = json.loads(line)
            if "stage" in message and on_stage is not None:
                on_stage(str(message["stage"]))
            elif "page" in message and on_page is not None:
                done, total = message["page"]
                on_page(int(done), int(total))
            elif "done" in message:
                return _prepared(message["done"])
            elif "error" in message:
                raise _rebuild(message["error"])
    finally:
        if child.poll() is None:
            child.kill()
        child.wait(10)
        for reader in readers:
            reader.join(5)
        child.stdout.close()
        child.stderr.close()


def _pump(stream: IO[bytes], put: Callable[[Any], None], end: bool = True) -> None:
    """Hand each line of `stream` to `put`, then None (when `end`) once it closes."""
    for raw in stream:
        put(raw.decode("utf-8", errors="replace"))
    if end:
        put(None)


def _prepared(done: dict[str, Any]) -> PreparedChunks:
    chunks = [
        Chunk(
            index=int(index),
            text=str(text),
            start=int(start),
            end=int(end),
            page_start=page_start,
            page_end=page_end,
            headings=tuple(str(h) for h in headings),
        )
        for index, text, start, end, page_start, page_end, headings in done["chunks"]
    ]
    return PreparedChunks(chunks=chunks, metadata=dict(done["metadata"]))


def _death(returncode: int | None, limits: Limits, stderr: str) -> IngestError:
    if stderr.strip():
        log.warning("the extraction child exited with %s: %s", returncode, stderr[-1000:])
    if returncode == -signal.SIGXCPU:
        return ExtractionTimeout(
            f"Extracting this file used more than its {limits.cpu_seconds} s of CPU time; it "
            "may be malformed or hostile."
        )
    if returncode == -signal.SIGKILL:
        return DocumentTooLarge(
            "Extracting this file was stopped by the system (most likely out of memory); it "
            "may be a decompression bomb, or split it into smaller files."
        )
    if returncode is not None and returncode > 0 and "MemoryError" in stderr:
        return DocumentTooLarge(
            f"Extracting this file needs more than the {limits.memory_bytes // 2**20} MiB "
            "allowed; it may be a decompression bomb, or split it into smaller files."
        )
    return CorruptDocument(
        f"The parser crashed on this file (exit status {returncode}); it is damaged or malformed."
    )


def _rebuild(error: dict[str, Any]) -> IngestError:
    """The child's error as our exception (only permanent errors; anything else is corrupt)."""
    name, message = str(error.get("class")), str(error.get("message"))[:1000]
    for cls in _subclasses(PermanentError):
        if cls.__name__ == name:
            rebuilt = cls.__new__(cls)
            IngestError.__init__(rebuilt, message)
            return rebuilt
    return CorruptDocument(message)


def _subclasses(root: type[IngestError]) -> list[type[IngestError]]:
    found, pending = [], [root]
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(cls.__subclasses__())
    return found
