"""Follow one parse request through the fork server: progress, the document, the exit.

`Follower` reads the server's relayed lines (`docingest.pipeline.isolation.wire`), hands progress to
the caller's callbacks and the prepared document out as a `PreparedStream` whose batches are
read only when asked for. The wall-clock limit counts the time this side waits on the child,
not the time the caller spends between two batches (embedding and storing them), so a slow
embedder cannot time out a parse that finished long ago. Errors are raised only once the
grandchild's exit is read, so the server is ready for the next request whatever happened;
`settle` gets it there when the caller stops early.
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import subprocess
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Protocol

from docingest.pipeline.document import PageReporter
from docingest.pipeline.errors import (
    Cancelled,
    CorruptDocument,
    DocumentTooLarge,
    ExtractionTimeout,
    IngestError,
    PermanentError,
)
from docingest.pipeline.isolation.wire import (
    Chunks,
    CpuGranted,
    Exited,
    Failed,
    Header,
    Page,
    Stage,
    Started,
    Summary,
    decode,
)
from docingest.pipeline.keys import JobStage
from docingest.pipeline.prepare import Part, PreparedStream, StageReporter

if TYPE_CHECKING:
    from docingest.pipeline.isolation.parent import Limits

log = logging.getLogger(__name__)

_STAGES = frozenset(JobStage)

SETTLE_SECONDS = 10.0
"""How long `settle` waits for a killed grandchild's exit before giving the server up."""

CANCEL_POLL_SECONDS = 0.5
"""How often `should_cancel` is asked while this side waits on the child, at least: it is also
asked after each page or batch of chunks the child reports, so a cancel waits for one page's
work at most (an OCR page included, killed), however loaded the machine."""


class ServerOutput(Protocol):
    """What a follower reads of a fork server: its process, its lines and its stderr."""

    process: subprocess.Popen[bytes]
    lines: queue.Queue[str | None]
    stderr_tail: deque[str]


class Follower:
    """One request's messages, read within its limits."""

    def __init__(
        self,
        server: ServerOutput,
        limits: Limits,
        *,
        on_stage: StageReporter | None,
        on_page: PageReporter | None,
        should_cancel: Callable[[], bool] | None = None,
    ) -> None:
        self._server, self._limits = server, limits
        self._on_stage, self._on_page = on_stage, on_page
        self._should_cancel = should_cancel
        self._cancel_polled = time.monotonic()
        self._budget = limits.wall_seconds
        """Wall seconds the child has left, spent only while this side waits for it."""
        self._grandchild: int | None = None
        self._error: IngestError | None = None
        self._killed = False
        self._dead = False
        self.exited = False

    def stream(self) -> PreparedStream:
        """Wait for the document's header; raise the parse's error if it failed first."""
        message = self._next()
        if isinstance(message, Header):
            return PreparedStream(message, self._parts())
        if isinstance(message, Chunks | Summary):
            raise CorruptDocument("The parsing process sent chunks before the document.")
        raise self._failure(message)

    def _parts(self) -> Iterator[Part]:
        """The document's parts after its header, up to the child's exit; raise if the child
        failed or died (`PreparedStream` checks their order and count)."""
        while True:
            message = self._next()
            if not isinstance(message, Exited):
                yield message
            elif self._error is None and message.code == 0:
                return
            else:
                raise self._failure(message)

    def settle(self) -> bool:
        """Stop the grandchild if it still runs and read up to its exit; whether the server
        is ready for another request."""
        if self.exited:
            return True
        if self._dead:
            return False
        if self._grandchild is not None:
            _kill(self._grandchild)
        deadline = time.monotonic() + SETTLE_SECONDS
        while time.monotonic() < deadline:
            try:
                line = self._server.lines.get(timeout=0.5)
            except queue.Empty:
                continue
            if line is None:
                return False
            try:
                message = decode(line)
            except ValueError:
                continue
            if isinstance(message, Started):
                _kill(message.pid)
            elif isinstance(message, Exited):
                self.exited = True
                return True
        return False

    def _next(self) -> Header | Chunks | Summary | Exited:
        """The next header, batch, summary or exit; relays progress and remembers a failure."""
        while True:
            self._enforce_deadline()
            self._stop_if_cancelled()
            waited_from = time.monotonic()
            wait = min(self._budget, 1.0 if self._should_cancel is None else CANCEL_POLL_SECONDS)
            try:
                line = self._server.lines.get(timeout=max(0.05, wait))
            except queue.Empty:
                continue
            finally:
                if not self._killed:
                    self._budget -= time.monotonic() - waited_from
            if line is None:  # the server itself died
                self._dead = True
                self._server.process.wait(10)
                raise _death(None, self._limits, "".join(self._server.stderr_tail))
            match decode(line):
                case Started(pid):
                    self._grandchild = pid
                case Stage(name) if self._on_stage is not None and name in _STAGES:
                    self._on_stage(JobStage(name))
                case Page(done, total):
                    self._cancel_polled = 0.0  # a page done: ask at the next line
                    if self._on_page is not None:
                        self._on_page(done, total)
                case CpuGranted(cpu_seconds):  # the child granted itself CPU time for OCR
                    before = self._limits.wall_seconds
                    self._limits = self._limits.granted(cpu_seconds)
                    self._budget += self._limits.wall_seconds - before
                case Failed() as failed:
                    self._error = _rebuild(failed)
                case Header() | Chunks() | Summary() as document if self._error is None:
                    self._cancel_polled = 0.0  # a batch read: ask before the next
                    return document
                case Exited() as exited:
                    self.exited = True
                    return exited

    def _stop_if_cancelled(self) -> None:
        """Raise `Cancelled` once `should_cancel` says so (asked after each page or batch, and
        every CANCEL_POLL_SECONDS while waiting); `settle` then kills the grandchild and reads
        up to its exit, keeping the server."""
        if self._should_cancel is None or self._killed:
            return
        now = time.monotonic()
        if now - self._cancel_polled < CANCEL_POLL_SECONDS:
            return
        self._cancel_polled = now
        if self._should_cancel():
            if self._grandchild is not None:
                _kill(self._grandchild)
            raise Cancelled()

    def _enforce_deadline(self) -> None:
        if self._budget > 0 or self._killed:
            return
        if self._grandchild is None:  # the server never started the request
            raise ExtractionTimeout("The parsing process did not start in time.")
        _kill(self._grandchild)
        self._killed = True  # now wait for the exit the kill causes
        self._error = ExtractionTimeout(
            f"Extracting this file took longer than {self._limits.wall_seconds:.0f} s; it may "
            "be malformed or hostile."
        )

    def _failure(self, exited: Exited) -> IngestError:
        if self._error is not None:
            return self._error
        stderr = "".join(self._server.stderr_tail)
        return _death(exited.code, self._limits, stderr, peak_rss=exited.peak_rss_bytes)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


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
    # its address space is that (RELIABILITY.md's flate bomb), not a damaged file.
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
