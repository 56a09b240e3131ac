"""The child side of `docingest.pipeline.isolation.parent`: a fork server run as
`python -m docingest.pipeline.isolation.child`.

It imports the parsers once, then for each `ParseRequest` (one JSON line on stdin, limits
included) forks a grandchild that sets `RLIMIT_AS`/`RLIMIT_CPU`, parses, and writes progress
and the outcome as JSON lines; the server relays them to its stdout, then reports the
grandchild's exit status and peak memory. The messages are `docingest.pipeline.isolation.wire`'s.
Forking a warm, single-threaded process costs milliseconds where a fresh interpreter costs a
second or more of imports.
"""

from __future__ import annotations

import functools
import json
import mmap
import os
import resource
import signal
import sys
import threading
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING

from docingest.pipeline.isolation.wire import (
    CpuGranted,
    Exited,
    Failed,
    Message,
    Page,
    ParseRequest,
    Stage,
    Started,
    encode,
)

if TYPE_CHECKING:
    from docingest.pipeline.settings import Settings

PR_SET_PDEATHSIG = 1


def _limit(memory_bytes: int, cpu_seconds: int, max_cpu_seconds: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    # The soft limit (SIGXCPU) is the file's budget; OCR raises it page by page (`_grant_cpu`)
    # up to the hard one, which a process cannot raise again.
    hard = max(cpu_seconds, max_cpu_seconds) + 5
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, hard))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _die_with_parent()


def _die_with_parent() -> None:
    try:  # Linux: die with the process that started us; elsewhere the CPU limit bounds us
        import ctypes

        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def _write(message: Message) -> None:
    sys.stdout.write(encode(message))
    sys.stdout.flush()


class _ReadAhead:
    """The grandchild's messages, written to the pipe by a thread of their own so the parse
    runs ahead of the worker instead of waiting on a full pipe: a document's own limits
    (`max_chunks_per_document`, `max_extracted_chars`, `max_pages`) are met within seconds of
    extraction, not once the worker has embedded that far (issue 24: a 2-million-column CSV
    held a worker for hours). The parse holds the chunks the worker has not read yet, at
    most `max_chunks_per_document` (a few tens of MiB, within the child's memory limit).

    `fail` drops what is still unsent and sends the error next, so the worker hears of it
    as soon as it reads on."""

    def __init__(self) -> None:
        self._pending: deque[Message] = deque()
        self._ready = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="read-ahead", daemon=True)
        self._thread.start()

    def put(self, message: Message) -> None:
        with self._ready:
            self._pending.append(message)
            self._ready.notify()

    def fail(self, message: Failed) -> None:
        with self._ready:
            self._pending.clear()
            self._pending.append(message)
            self._ready.notify()

    def close(self) -> None:
        """Wait until every message is written."""
        with self._ready:
            self._closed = True
            self._ready.notify()
        self._thread.join()

    def _run(self) -> None:
        while True:
            with self._ready:
                while not self._pending and not self._closed:
                    self._ready.wait()
                if not self._pending:
                    return
                message = self._pending.popleft()
            _write(message)


READ_AHEAD_STACK_BYTES = 512 * 1024

_OUT: _ReadAhead | None = None
"""The grandchild's read-ahead writer while it parses; None in the server."""


def _send(message: Message) -> None:
    if _OUT is not None:
        _OUT.put(message)
    else:
        _write(message)


def _send_failure(message: Failed) -> None:
    if _OUT is not None:
        _OUT.fail(message)
    else:
        _write(message)


def _grant_cpu(seconds: float) -> None:
    """Raise this process's CPU limit by `seconds` (capped) and tell the parent, whose
    wall-clock deadline follows: called before each page is OCR'd."""
    soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if soft == resource.RLIM_INFINITY or hard == resource.RLIM_INFINITY:
        return
    raised = min(hard - 5, soft + max(1, int(seconds)))
    if raised > soft:
        resource.setrlimit(resource.RLIMIT_CPU, (raised, hard))
        _send(CpuGranted(raised))


def _error(error: Exception) -> Failed:
    code, message = getattr(error, "code", "corrupt_document"), getattr(error, "message", "")
    return Failed(class_name=type(error).__name__, code=code, message=message)


@functools.lru_cache(maxsize=8)
def _settings(serialized: str) -> Settings:
    """The extraction settings of a request (`json.dumps` of them, sorted), built once by the
    server and inherited by its children: building `Settings` reads the environment, which
    costs each upload time (BENCHMARKS.md, "Where one job's CPU goes, per chunk")."""
    from docingest.pipeline.settings import Settings

    return Settings(**json.loads(serialized))


def _settings_of(request: ParseRequest) -> Settings:
    return _settings(json.dumps(request.settings, sort_keys=True))


def _parse(request: ParseRequest) -> None:
    """Prepare one file and send the outcome (runs in the limited grandchild): the document's
    parts (`Preparer.parts`: the file's metadata, the chunks in batches as they are split
    while later pages are still being read, then the rest of the metadata), or its error."""
    global _OUT
    try:
        _prepare(request)
    finally:
        if _OUT is not None:
            _OUT.close()
            _OUT = None


def _start_read_ahead() -> None:
    """Start the read-ahead writer: before the limits, since a thread's stack counts against
    `RLIMIT_AS` (a small stack: it only encodes and writes); without it, messages are written
    in line, as the pipe allows."""
    global _OUT
    try:
        threading.stack_size(READ_AHEAD_STACK_BYTES)
        _OUT = _ReadAhead()
    except RuntimeError:  # no thread to be had: the parse waits on the pipe instead
        _OUT = None


def _prepare(request: ParseRequest) -> None:
    from docingest.pipeline.chunking import ChunkingSpec
    from docingest.pipeline.errors import CorruptDocument, DocumentTooLarge, IngestError
    from docingest.pipeline.prepare import Preparer

    try:
        settings = _settings_of(request)
        preparer = Preparer.start(
            _read_upload(Path(request.path)),
            filename=request.filename,
            settings=settings,
            chunking=ChunkingSpec(**request.chunking),
            content_type=request.content_type,
            on_stage=lambda stage: _send(Stage(stage)),
            on_page=lambda done, total: _send(Page(done, total)),
            on_ocr_page=lambda: _grant_cpu(settings.ocr_cpu_seconds_per_page),
        )
        for part in preparer.parts():  # queued: the pipe's pace does not hold the parse back
            _send(part)
    except IngestError as exc:
        _send_failure(_error(exc))
    except MemoryError:
        limit = request.memory_bytes // 2**20
        _send_failure(
            _error(
                DocumentTooLarge(
                    f"Extracting this file needs more than the {limit} MiB allowed; it may be "
                    "a decompression bomb, or split it into smaller files."
                )
            )
        )
    except RecursionError:
        _send_failure(_error(CorruptDocument("The file's structure nests too deeply to parse.")))
    except Exception as exc:  # report as a damaged file
        detail = f"{type(exc).__name__}: {exc}"[:300]
        _send_failure(_error(CorruptDocument(f"The parser failed on this file: {detail}")))


MAP_MBOX_BYTES = 16 * 1024 * 1024
"""From this size, an upload that starts like an mbox archive is memory-mapped, not read:
its messages are read from the map one at a time (`docingest.pipeline.extract.mbox`), so a large
archive never sits in the child's memory."""


def _read_upload(path: Path) -> bytes | mmap.mmap:
    """The upload's bytes, or a read-only map of a large file that starts with `From `."""
    with path.open("rb") as file:
        if file.read(5) != b"From " or os.fstat(file.fileno()).st_size < MAP_MBOX_BYTES:
            return path.read_bytes()
        return mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)


def _serve_one(request: ParseRequest) -> None:
    try:
        _settings_of(request)  # built here, once per distinct settings
    except Exception:  # invalid settings: the child reports the error
        pass
    from docingest.pipeline.extract.office import instance as office

    # LibreOffice is started here, in the server, so that it stays warm for the next file.
    office.warm_for(request.path, int(request.memory_bytes))
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the grandchild: limits first, then parse with stdout on the pipe
        try:
            os.close(read_end)
            os.dup2(write_end, sys.stdout.fileno())
            os.close(write_end)
            _start_read_ahead()
            _limit(
                int(request.memory_bytes),
                int(request.cpu_seconds),
                int(request.max_cpu_seconds or request.cpu_seconds),
            )
            _parse(request)
            sys.stdout.flush()
        finally:
            os._exit(0)
    os.close(write_end)
    _send(Started(pid))
    with os.fdopen(read_end, "r", encoding="utf-8", errors="replace") as relayed:
        for line in relayed:
            sys.stdout.write(line)
            sys.stdout.flush()
    _, status, usage = os.wait4(pid, 0)
    code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    office.after_child(killed=os.WIFSIGNALED(status))
    # Peak memory tells an out-of-memory abort (PDFium aborts when an allocation fails under
    # RLIMIT_AS) from other crashes; Linux reports ru_maxrss in KiB.
    _send(Exited(code, peak_rss_bytes=usage.ru_maxrss * 1024))


WARM_UP_SAMPLES = (
    ("warm-up.txt", "Déjà vu: a naïve café owner's crème brûlée.\n\nGrüße.\n".encode("cp1252")),
    ("warm-up.md", b"# Warm up\n\nSome *Markdown* with a [link](https://example.org).\n"),
    ("warm-up.html", b"<html><head><title>Warm</title></head><body><h1>Up</h1><p>A.</p></body>"),
)
"""Tiny documents parsed once in the server, so that what parsing initialises on first use
is inherited by every child instead of redone in each: a non-UTF-8 text alone made
charset_normalizer import some 80 codec modules (BENCHMARKS.md, "Where one job's CPU goes,
per chunk")."""


def _warm_up() -> None:
    """Load and initialise the parsers once, before any fork, then freeze the heap."""
    import codecs
    import gc

    from charset_normalizer.constant import IANA_SUPPORTED

    from docingest.pipeline.chunking import ChunkingSpec
    from docingest.pipeline.extract.ocr import warm_up
    from docingest.pipeline.metadata import guess_language
    from docingest.pipeline.prepare import Preparer
    from docingest.pipeline.settings import Settings

    warm_up()
    guess_language("Load the language model once, not in every child.")
    for encoding in IANA_SUPPORTED:  # every codec charset detection may try
        try:
            codecs.lookup(encoding)
        except LookupError:
            continue
    settings = Settings(isolate_extraction=False)
    for filename, data in WARM_UP_SAMPLES:
        try:
            preparer = Preparer.start(
                data,
                filename=filename,
                settings=settings,
                chunking=ChunkingSpec.from_settings(settings),
            )
            for _ in preparer.chunks():
                pass
        except Exception as exc:  # a warm-up never stops the server; the child pays instead
            sys.stderr.write(f"warm-up on {filename} failed: {exc!r}\n")
    # A child's first garbage collection would otherwise walk, and so copy, every object
    # inherited from here (BENCHMARKS.md, "Where one job's CPU goes, per chunk").
    gc.collect()
    gc.freeze()


def main() -> int:
    # No parent-death signal here: Linux ties it to the thread that started us, and any of the
    # worker's threads may have. When the worker goes, stdin closes and the loop below ends.
    _warm_up()
    for line in sys.stdin:
        if line.strip():
            _serve_one(ParseRequest.from_line(line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
