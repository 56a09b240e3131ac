"""The messages between `docingest.pipeline.isolation.parent` and its fork server, defined once.

One JSON object per line, never pickle: the parent must not trust a process that parsed
hostile bytes beyond plain data. The parent sends a `ParseRequest`; the fork server answers
`Started` (the grandchild's pid), then relays what the grandchild sends (any `Stage` and
`Page` progress, then either `Header` and the chunks in `Chunks` batches, or `Failed`), and
ends with `Exited` once the grandchild is gone. The chunks come in batches of at most
`docingest.pipeline.prepare.CHUNK_BATCH` so that neither side ever encodes or decodes the whole
document as one line, and the pipe's back-pressure holds the child while the worker embeds
and stores.

    {"path": ..., "filename": ..., ...}      ParseRequest
    {"pid": 4242}                            Started
    {"stage": "extracting"}                  Stage
    {"page": [3, 10]}                        Page
    {"cpu_seconds": 80}                      CpuGranted (the child raised its CPU limit to
                                             80 s to OCR a page; the deadline follows)
    {"prepared": {"metadata": {...}}}        Header (the file's metadata; chunks follow)
    {"chunks": [[index, text, start, end, page_start, page_end, [heading, ...]], ...]}
                                             Chunks (a batch, in order)
    {"summary": {"metadata": {...}, "chunks": 1234}}
                                             Summary (the rest of the metadata and the
                                             count, once extraction has ended)
    {"error": {"class": ..., "code": ..., "message": ...}}
                                             Failed
    {"exit": 0, "peak_rss_bytes": 123456}    Exited (negative: killed by that signal; the
                                             grandchild's peak memory tells an
                                             out-of-memory abort from a crash)
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from docingest.pipeline.chunking import Chunk
from docingest.pipeline.prepare import (  # the document's parts, defined there
    Chunks,
    Header,
    Summary,
)

MAX_ERROR_MESSAGE_CHARS = 1000
"""A hostile parser could send a huge message; the parent keeps this much of it."""


@dataclass(frozen=True, slots=True)
class ParseRequest:
    """Prepare the file at `path` under these limits (parent → fork server)."""

    path: str
    filename: str
    content_type: str | None
    chunking: dict[str, Any]
    """A `ChunkingSpec` as JSON."""
    settings: dict[str, Any]
    """The extraction settings only (`parent.CHILD_SETTINGS`): no secret crosses."""
    memory_bytes: int
    cpu_seconds: int
    max_cpu_seconds: int | None = None
    """How far the grandchild may raise its CPU limit as it OCRs pages (None: not at all)."""

    def to_line(self) -> bytes:
        return (json.dumps(asdict(self)) + "\n").encode()

    @classmethod
    def from_line(cls, line: str) -> ParseRequest:
        return cls(**json.loads(line))


@dataclass(frozen=True, slots=True)
class Started:
    pid: int


@dataclass(frozen=True, slots=True)
class Stage:
    name: str


@dataclass(frozen=True, slots=True)
class Page:
    done: int
    total: int


@dataclass(frozen=True, slots=True)
class CpuGranted:
    """The grandchild raised its CPU limit to `cpu_seconds` before OCR'ing a page."""

    cpu_seconds: int


@dataclass(frozen=True, slots=True)
class Failed:
    """The parse failed with an `IngestError` subclass named `class_name`."""

    class_name: str
    code: str
    message: str


@dataclass(frozen=True, slots=True)
class Exited:
    code: int
    """The grandchild's exit status; negative: killed by that signal."""
    peak_rss_bytes: int = 0


Message = Started | Stage | Page | CpuGranted | Header | Chunks | Summary | Failed | Exited


def encode(message: Message) -> str:
    """Return `message` as one JSON line."""
    match message:
        case Started(pid):
            body: dict[str, Any] = {"pid": pid}
        case Stage(name):
            body = {"stage": name}
        case Page(done, total):
            body = {"page": [done, total]}
        case CpuGranted(cpu_seconds):
            body = {"cpu_seconds": cpu_seconds}
        case Header(metadata):
            body = {"prepared": {"metadata": metadata}}
        case Chunks(chunks, ocr):
            body = {
                "chunks": [
                    [
                        c.index,
                        c.text,
                        c.start,
                        c.end,
                        c.page_start,
                        c.page_end,
                        list(c.headings),
                        c.gap,
                        c.table_header,
                    ]
                    for c in chunks
                ]
            }
            if ocr is not None:
                body["ocr"] = ocr
        case Summary(metadata, chunk_count):
            body = {"summary": {"metadata": metadata, "chunks": chunk_count}}
        case Failed(class_name, code, text):
            body = {"error": {"class": class_name, "code": code, "message": text}}
        case Exited(code, peak_rss_bytes):
            body = {"exit": code, "peak_rss_bytes": peak_rss_bytes}
    return json.dumps(body, ensure_ascii=False) + "\n"


def decode(line: str) -> Message | None:
    """Return the message of one line (None for a kind this side does not know).

    Raises ValueError (`json.JSONDecodeError`) for a line that is not JSON.
    """
    body = json.loads(line)
    if "pid" in body:
        return Started(int(body["pid"]))
    if "stage" in body:
        return Stage(str(body["stage"]))
    if "page" in body:
        done, total = body["page"]
        return Page(int(done), int(total))
    if "cpu_seconds" in body:
        return CpuGranted(int(body["cpu_seconds"]))
    if "prepared" in body:
        return Header(dict(body["prepared"]["metadata"]))
    if "chunks" in body:
        ocr = body.get("ocr")
        return Chunks(_chunks(body["chunks"]), dict(ocr) if ocr is not None else None)
    if "summary" in body:
        summary = body["summary"]
        return Summary(dict(summary["metadata"]), int(summary["chunks"]))
    if "error" in body:
        error = body["error"]
        return Failed(
            class_name=str(error.get("class")),
            code=str(error.get("code")),
            message=str(error.get("message"))[:MAX_ERROR_MESSAGE_CHARS],
        )
    if "exit" in body:
        return Exited(int(body["exit"]), int(body.get("peak_rss_bytes", 0)))
    return None


def _chunks(rows: list[list[Any]]) -> list[Chunk]:
    return [
        Chunk(
            index=int(index),
            text=str(text),
            start=int(start),
            end=int(end),
            page_start=page_start,
            page_end=page_end,
            headings=tuple(str(h) for h in headings),
            gap=str(gap),
            table_header=str(header[0]) if header else "",
        )
        for index, text, start, end, page_start, page_end, headings, gap, *header in rows
    ]
