"""Prepare untrusted files in a child process with CPU, memory and wall-clock limits.

Parsers are where hostile input bites: a decompression bomb, a cyclic page tree, a layout
pathology. Run inside the worker, one such file would take the whole worker (and, in the
embedded topology, the whole server) down with it. Here detect → extract → chunk runs in a
child forked, per upload, from a small fork server (`docingest.pipeline.isolation.child`, one per
job slot, started once with the parsers imported); the child sets `RLIMIT_AS` and `RLIMIT_CPU`
before it reads a byte, and a wall-clock deadline is enforced here. Whatever the file does, only
the child dies, and the job fails with a code:

    MemoryError in the child, killed by the kernel (OOM), or
    aborted (SIGABRT) after filling half its address space     → document_too_large
    CPU limit (SIGXCPU) or the wall-clock deadline             → timeout
    any other death (a crash in a C extension)                 → corrupt_document

OCR is the one stage whose cost grows with pages rather than bytes (a scan of 200 pages may
be a few MiB): before each page it OCRs, the child raises its own CPU limit by
`ocr_cpu_seconds_per_page`, up to the hard limit of `extraction_cpu_seconds` set at the
fork, and sends `{"cpu_seconds": n}`; the wall-clock deadline here grows with it.

A subprocess of our own rather than multiprocessing: it works the same under Celery's prefork
children (whose daemonic processes may not start multiprocessing children), thread pools and
any main module, and results come back as JSON lines (`docingest.pipeline.isolation.wire`), never as
pickles a compromised parser could forge. A fork of the warm server costs milliseconds; a
fresh interpreter per upload spent most of a small job importing the parsers (BENCHMARKS.md,
"Accepting uploads").

The prepared document streams (`open_prepared`): the child sends its metadata and chunk
count, then its chunks in batches that this side reads through a bounded queue only as the
worker asks for them, so a long document never sits whole in the worker; the child itself
runs ahead of the pipe (`child._ReadAhead`), so it meets a document's limits within seconds.
`follow.Follower` reads one request's messages, and its wall-clock limit counts only the
time spent waiting on the child; while it waits it asks the request's `should_cancel`, and
kills the child (between OCR pages, say) when told to stop.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import IO, Any

from docingest.pipeline.isolation.follow import Follower
from docingest.pipeline.isolation.wire import ParseRequest
from docingest.pipeline.prepare import PreparedStream, PrepareRequest, prepare_here
from docingest.pipeline.settings import Settings

log = logging.getLogger(__name__)

LINES_IN_FLIGHT = 4
"""Lines read ahead of the consumer: with the pipes' buffers, all the worker holds of a
document it has not yet asked for (a few `docingest.pipeline.prepare.CHUNK_BATCH` batches)."""

MIN_CPU_SECONDS = 60
"""CPU seconds any file gets, however small (interpreter start and imports take a few)."""

CHILD_SETTINGS = (
    "max_pages",
    "max_extracted_chars",
    "max_chunks_per_document",
    "max_docx_uncompressed_bytes",
    "max_docx_compression_ratio",
    "max_attachment_depth",
    "max_mbox_messages",
    "max_metadata_bytes",
    "max_image_pixels",
    "ocr",
    "ocr_languages",
    "ocr_tessdata_dir",
    "ocr_dpi",
    "ocr_cpu_seconds_per_page",
)
"""The settings extraction reads; only these cross into the child (no secrets do)."""


@dataclass(frozen=True, slots=True)
class Limits:
    """What one parse may use. The child may raise its CPU limit up to `max_cpu_seconds` as
    it OCRs pages (`ocr_cpu_seconds_per_page` each, announced to the parent), and the
    wall-clock deadline follows, up to `max_wall_seconds`; None means no such growth."""

    memory_bytes: int
    cpu_seconds: int
    wall_seconds: float
    max_cpu_seconds: int | None = None
    max_wall_seconds: float | None = None

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
            wall_seconds=_wall_seconds(cpu, settings.extraction_timeout_seconds),
            max_cpu_seconds=settings.extraction_cpu_seconds,
            max_wall_seconds=settings.extraction_timeout_seconds,
        )

    def granted(self, cpu_seconds: int) -> Limits:
        """These limits once the child has raised its CPU limit to `cpu_seconds`."""
        cpu = min(cpu_seconds, self.max_cpu_seconds or self.cpu_seconds)
        wall = _wall_seconds(cpu, self.max_wall_seconds or self.wall_seconds)
        return replace(self, cpu_seconds=cpu, wall_seconds=max(wall, self.wall_seconds))


def _wall_seconds(cpu_seconds: int, cap: float) -> float:
    return min(cap, 2.0 * cpu_seconds + 30.0)


_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL")


def child_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment of the parsing processes: no docingest or OpenAI setting and nothing
    that looks like a credential, so a parser exploited by a hostile file finds no secret
    (its settings come in each request)."""
    return {
        name: value
        for name, value in environ.items()
        if not name.startswith(("DOCINGEST_", "OPENAI_"))
        and not any(word in name.upper() for word in _SECRET_WORDS)
    }


class _Server:
    """One `docingest.pipeline.isolation.child` fork server and the threads that read its output."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "docingest.pipeline.isolation.child"],
            env=child_environment(os.environ),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            close_fds=True,
        )
        assert self.process.stdout is not None and self.process.stderr is not None
        # Bounded: a full queue stops the reader, the pipes fill, and the child waits.
        self.lines: queue.Queue[str | None] = queue.Queue(maxsize=LINES_IN_FLIGHT)
        self.stderr_tail: deque[str] = deque(maxlen=20)
        self._readers = [
            threading.Thread(target=_pump, args=(self.process.stdout, self.lines.put), daemon=True),
            threading.Thread(
                target=_pump, args=(self.process.stderr, self.stderr_tail.append, False),
                daemon=True,
            ),
        ]  # fmt: skip
        for reader in self._readers:
            reader.start()

    def alive(self) -> bool:
        return self.process.poll() is None

    def send(self, request: ParseRequest) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(request.to_line())
        self.process.stdin.flush()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(10)
        for reader in self._readers:
            deadline = time.monotonic() + 5
            while reader.is_alive() and time.monotonic() < deadline:
                _drain(self.lines)  # a reader blocked on the full queue must see its end
                reader.join(0.05)
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


class _ServerPool:
    """Idle fork servers, one per job slot that has parsed something; reused, never shared."""

    def __init__(self) -> None:
        self._idle: list[_Server] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def take(self) -> _Server:
        with self._lock:
            if self._pid != os.getpid():  # inherited across a fork: those servers are not ours
                self._idle, self._pid = [], os.getpid()
            while self._idle:
                server = self._idle.pop()
                if server.alive():
                    return server
                server.close()
        return _Server()

    def prestart(self, count: int) -> None:
        """Start servers until `count` are idle (they import and warm up in the background)."""
        with self._lock:
            if self._pid != os.getpid():
                self._idle, self._pid = [], os.getpid()
            self._idle = [server for server in self._idle if server.alive()]
            while len(self._idle) < count:
                self._idle.append(_Server())

    def give_back(self, server: _Server) -> None:
        with self._lock:
            self._idle.append(server)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for server in idle:
            server.close()


_POOL = _ServerPool()
atexit.register(_POOL.close)


def start_fork_servers(count: int) -> None:
    """Start `count` fork servers now, one per job slot, rather than on the slots' first
    uploads: each takes seconds to import and warm the parsers, during which those uploads
    would wait (BENCHMARKS.md, "Small jobs under load")."""
    _POOL.prestart(count)


@contextmanager
def open_prepared(
    request: PrepareRequest, *, settings: Settings, limits: Limits | None = None
) -> Iterator[PreparedStream]:
    """The one way to open a document for indexing: prepared in a limited child process, or
    in this one when `settings.isolate_extraction` is off (tests and trusted input only).

    Isolated, it enters once the child has sent the document's header (raising its
    `IngestError` if it failed first); the chunks then come over the pipe as `batches()` asks
    for them, so this process holds a few batches at a time, not the document. Leaving early
    (unchanged content, a cancel, an error) kills the child; the fork server is kept for the
    next file. `limits` default to `Limits.from_settings` for the file's size.
    """
    if not settings.isolate_extraction:
        yield prepare_here(request, settings=settings)
        return
    path = request.path
    limits = limits or Limits.from_settings(settings, size_bytes=path.stat().st_size)
    parse = ParseRequest(
        path=str(path),
        filename=request.filename,
        content_type=request.content_type,
        chunking=request.chunking.model_dump(mode="json"),
        settings=settings.model_dump(mode="json", include=set(CHILD_SETTINGS)),
        memory_bytes=limits.memory_bytes,
        cpu_seconds=limits.cpu_seconds,
        max_cpu_seconds=limits.max_cpu_seconds or limits.cpu_seconds,
    )
    server = _POOL.take()
    follower = Follower(
        server,
        limits,
        on_stage=request.on_stage,
        on_page=request.on_page,
        should_cancel=request.should_cancel,
    )
    try:
        server.send(parse)
        yield follower.stream()
    finally:
        if follower.settle():  # it reported the grandchild's exit: ready for the next file
            _POOL.give_back(server)
        else:  # the server died, hung, or we were interrupted: never reuse it
            server.close()


def _drain(lines: queue.Queue[str | None]) -> None:
    try:
        while True:
            lines.get_nowait()
    except queue.Empty:
        pass


def _pump(stream: IO[bytes], put: Callable[[Any], None], end: bool = True) -> None:
    """Hand each line of `stream` to `put`, then None (when `end`) once it closes."""
    for raw in stream:
        put(raw.decode("utf-8", errors="replace"))
    if end:
        put(None)
