"""Prepare untrusted files in a child process with CPU, memory and wall-clock limits.

Parsers are where hostile input bites: a decompression bomb, a cyclic page tree, a regex or
layout pathology. Run inside the worker, one such file would take the whole worker (and, in
the embedded topology, the whole server) down with it. Here detect → extract → chunk runs in
a child forked from a clean forkserver (never from the threaded worker itself), with
`RLIMIT_AS` and `RLIMIT_CPU` set before it reads a byte, and a wall-clock deadline enforced by
the parent. Whatever the file does, only the child dies, and the job fails with a code:

    MemoryError in the child, or killed near its memory limit   → document_too_large
    CPU limit (SIGXCPU / SIGKILL) or the wall-clock deadline    → timeout
    any other death (a crash in a C extension)                  → corrupt_document

Progress (stages, pages) streams back over the same pipe as the result.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import resource
import signal
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.context import ForkServerContext
from pathlib import Path
from typing import Any

from pipeline.document import PageReporter
from pipeline.errors import CorruptDocument, DocumentTooLarge, ExtractionTimeout, IngestError
from pipeline.prepare import PreparedDocument, prepare_document
from pipeline.settings import Settings
from pipeline.store_models import ChunkingSpec

_context_lock = threading.Lock()
_context: ForkServerContext | None = None


@dataclass(frozen=True, slots=True)
class Limits:
    memory_bytes: int
    cpu_seconds: int
    wall_seconds: float

    @classmethod
    def from_settings(cls, settings: Settings) -> Limits:
        return cls(
            memory_bytes=settings.extraction_memory_bytes,
            cpu_seconds=settings.extraction_cpu_seconds,
            wall_seconds=settings.extraction_timeout_seconds,
        )


def _forkserver() -> ForkServerContext:
    global _context
    with _context_lock:
        if _context is None:
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(["pipeline.isolation", "pipeline.prepare"])
            _context = context
        return _context


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
) -> PreparedDocument:
    """`prepare_document` of the file at `path`, run in a limited child process."""
    limits = limits or Limits.from_settings(settings)
    receiver, sender = multiprocessing.Pipe(duplex=False)
    child = _forkserver().Process(
        target=_child_main,
        args=(sender, str(path), filename, settings, content_type, chunking, limits),
        name=f"docingest-extract-{filename[:40]}",
        daemon=True,
    )
    child.start()
    sender.close()
    deadline = time.monotonic() + limits.wall_seconds
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ExtractionTimeout(f"Extraction took longer than {limits.wall_seconds:.0f} s.")
            if not receiver.poll(min(remaining, 1.0)):
                if not child.is_alive() and not receiver.poll(0):
                    raise _death(child.exitcode, limits)
                continue
            try:
                message = receiver.recv()
            except EOFError:
                child.join(5)
                raise _death(child.exitcode, limits) from None
            kind = message[0]
            if kind == "stage" and on_stage is not None:
                on_stage(message[1])
            elif kind == "page" and on_page is not None:
                on_page(message[1], message[2])
            elif kind == "done":
                result: PreparedDocument = message[1]
                return result
            elif kind == "error":
                raise _rebuild(message[1], message[2])
    finally:
        receiver.close()
        if child.is_alive():
            child.kill()
        child.join(5)


def _death(exitcode: int | None, limits: Limits) -> IngestError:
    if exitcode in (-signal.SIGXCPU, -signal.SIGKILL):
        return ExtractionTimeout(
            f"Extraction used more than its {limits.cpu_seconds} s of CPU time and was stopped; "
            "the file may be malformed or hostile."
        )
    return CorruptDocument(
        f"The parser crashed on this file (exit {exitcode}); it is damaged or malformed."
    )


def _rebuild(cls_name: str, payload: tuple[str, str]) -> IngestError:
    _, message = payload
    for cls in _known_errors():
        if cls.__name__ == cls_name:
            error = cls.__new__(cls)
            IngestError.__init__(error, message)
            return error
    return CorruptDocument(message)


def _known_errors() -> list[type[IngestError]]:
    found: list[type[IngestError]] = []
    pending: list[type[IngestError]] = [IngestError]
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(cls.__subclasses__())
    return found


def _child_main(
    sender: multiprocessing.connection.Connection,
    path: str,
    filename: str,
    settings: Settings,
    content_type: str | None,
    chunking: ChunkingSpec | None,
    limits: Limits,
) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 5))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.nice(5)  # parsing yields to the API and embedding threads of the parent

    def send(*message: Any) -> None:
        sender.send(message)

    try:
        data = Path(path).read_bytes()
        prepared = prepare_document(
            data,
            filename=filename,
            settings=settings,
            content_type=content_type,
            chunking=chunking,
            on_stage=lambda name: send("stage", name),
            on_page=lambda done, total: send("page", done, total),
        )
        del data
        send("done", prepared)
    except IngestError as exc:
        send("error", type(exc).__name__, (exc.code, exc.message))
    except MemoryError:
        error: IngestError = DocumentTooLarge(
            f"Extracting this file needs more than the {limits.memory_bytes // 2**20} MiB "
            "allowed; it may be a decompression bomb, or split it into smaller files."
        )
        send("error", type(error).__name__, (error.code, error.message))
    except RecursionError:
        error = CorruptDocument("The file's structure nests too deeply to parse.")
        send("error", type(error).__name__, (error.code, error.message))
    except BaseException as exc:  # report, then die: the parent maps it to a job error
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        error = CorruptDocument(f"The parser failed on this file: {detail[:300]}")
        send("error", type(error).__name__, (error.code, error.message))
    finally:
        sender.close()
