"""Prepare untrusted files in a child process with CPU, memory and wall-clock limits.

Parsers are where hostile input bites: a decompression bomb, a cyclic page tree, a layout
pathology. Run inside the worker, one such file would take the whole worker (and, in the
embedded topology, the whole server) down with it. Here detect → extract → chunk runs in a
child forked, per upload, from a small fork server (`pipeline.isolation.child`, one per job
slot, started once with the parsers imported); the child sets `RLIMIT_AS` and `RLIMIT_CPU`
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
any main module, and results come back as JSON lines (`pipeline.isolation.wire`), never as
pickles a compromised parser could forge. A fork of the warm server costs milliseconds; a
fresh interpreter per upload cost about 1.4 s of imports, which capped small uploads at
~0.4 jobs/s (BENCHMARKS.md).
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from pipeline.chunking import Chunk, ChunkingSpec
from pipeline.document import PageReporter
from pipeline.errors import (
    CorruptDocument,
    DocumentTooLarge,
    ExtractionTimeout,
    IngestError,
    PermanentError,
)
from pipeline.isolation.wire import (
    CpuGranted,
    Done,
    Exited,
    Failed,
    Page,
    ParseRequest,
    Stage,
    Started,
    decode,
)
from pipeline.settings import Settings

if TYPE_CHECKING:
    from pipeline.prepare import Prepared

log = logging.getLogger(__name__)

MIN_CPU_SECONDS = 60
"""CPU seconds any file gets, however small (interpreter start and imports take a few)."""

CHILD_SETTINGS = (
    "max_pages",
    "max_extracted_chars",
    "max_docx_uncompressed_bytes",
    "max_docx_compression_ratio",
    "max_attachment_depth",
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


@dataclass(frozen=True, slots=True)
class PreparedChunks:
    """What indexing needs of a prepared document: its chunks and automatic metadata."""

    chunks: list[Chunk]
    metadata: dict[str, Any]


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
    """One `pipeline.isolation.child` fork server and the threads that read its output."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "pipeline.isolation.child"],
            env=child_environment(os.environ),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            close_fds=True,
        )
        assert self.process.stdout is not None and self.process.stderr is not None
        self.lines: queue.Queue[str | None] = queue.Queue()
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
            reader.join(5)
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
    would wait (measured: the first jobs of a load test ran for ~8 s instead of ~0.2 s)."""
    _POOL.prestart(count)


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
    request = ParseRequest(
        path=str(path),
        filename=filename,
        content_type=content_type,
        chunking=chunking.model_dump(mode="json"),
        settings=settings.model_dump(mode="json", include=set(CHILD_SETTINGS)),
        memory_bytes=limits.memory_bytes,
        cpu_seconds=limits.cpu_seconds,
        max_cpu_seconds=limits.max_cpu_seconds or limits.cpu_seconds,
    )
    server = _POOL.take()
    try:
        server.send(request)
        outcome = _follow(server, limits, on_stage=on_stage, on_page=on_page)
    except BaseException:  # the server died, hung, or we were interrupted: never reuse it
        server.close()
        raise
    _POOL.give_back(server)  # it reported the grandchild's exit: ready for the next file
    if isinstance(outcome, IngestError):
        raise outcome
    return outcome


def prepare_file(path: Path, *, filename: str, settings: Settings, **options: Any) -> Prepared:
    """`prepare_document` of the file at `path`: in a limited child process, or in this one
    when `settings.isolate_extraction` is off (tests and trusted input only)."""
    if settings.isolate_extraction:
        return prepare_isolated(path, filename=filename, settings=settings, **options)
    from pipeline.prepare import prepare_document  # the parsers load here only when used

    return prepare_document(path.read_bytes(), filename=filename, settings=settings, **options)


def _follow(
    server: _Server,
    limits: Limits,
    *,
    on_stage: Callable[[str], None] | None,
    on_page: PageReporter | None,
) -> PreparedChunks | IngestError:
    """Relay one request's progress; return its result or error once the grandchild has
    exited (the server is then ready for the next request). Raises if the server fails."""
    started = time.monotonic()
    deadline = started + limits.wall_seconds
    grandchild: int | None = None
    outcome: PreparedChunks | IngestError | None = None
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            if grandchild is None:  # the server never started the request
                raise ExtractionTimeout("The parsing process did not start in time.")
            _kill(grandchild)
            outcome = ExtractionTimeout(
                f"Extracting this file took longer than {limits.wall_seconds:.0f} s; it may be "
                "malformed or hostile."
            )
            deadline = float("inf")  # now wait for the exit the kill causes
        try:
            line = server.lines.get(timeout=max(0.05, min(remaining, 1.0)))
        except queue.Empty:
            continue
        if line is None:  # the server itself died
            server.process.wait(10)
            raise _death(None, limits, "".join(server.stderr_tail))
        match decode(line):
            case Started(pid):
                grandchild = pid
            case Stage(name) if on_stage is not None:
                on_stage(name)
            case Page(done, total) if on_page is not None:
                on_page(done, total)
            case CpuGranted(cpu_seconds):  # the child granted itself CPU time to OCR a page
                limits = limits.granted(cpu_seconds)
                if deadline != float("inf"):
                    deadline = max(deadline, started + limits.wall_seconds)
            case Done(metadata, chunks):
                outcome = PreparedChunks(chunks=chunks, metadata=metadata)
            case Failed() as failed:
                outcome = _rebuild(failed)
            case Exited(code, peak_rss_bytes):
                if outcome is None:
                    stderr = "".join(server.stderr_tail)
                    outcome = _death(code, limits, stderr, peak_rss=peak_rss_bytes)
                return outcome


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _pump(stream: IO[bytes], put: Callable[[Any], None], end: bool = True) -> None:
    """Hand each line of `stream` to `put`, then None (when `end`) once it closes."""
    for raw in stream:
        put(raw.decode("utf-8", errors="replace"))
    if end:
        put(None)


def _death(
    returncode: int | None, limits: Limits, stderr: str, *, peak_rss: int = 0
) -> IngestError:
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
    # PDFium aborts when an allocation fails: an abort after the child filled at least half
    # its address space is that (a flate bomb peaked at 754 of 763 MiB), not a damaged file.
    out_of_memory = returncode == -signal.SIGABRT and peak_rss >= limits.memory_bytes // 2
    if out_of_memory or (returncode is not None and returncode > 0 and "MemoryError" in stderr):
        return DocumentTooLarge(
            f"Extracting this file needs more than the {limits.memory_bytes // 2**20} MiB "
            "allowed; it may be a decompression bomb, or split it into smaller files."
        )
    return CorruptDocument(
        f"The parser crashed on this file (exit status {returncode}); it is damaged or malformed."
    )


def _rebuild(error: Failed) -> IngestError:
    """The child's error as our exception (only permanent errors; anything else is corrupt)."""
    name, message = error.class_name, error.message
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
