"""Run the CPU stages on one file: detect → extract → metadata → chunk.

This is what a worker does before embedding, and what `docingest inspect` shows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from pipeline.chunking import Chunk, ChunkingSpec, chunk_document
from pipeline.detect import detect
from pipeline.document import Detection, ExtractedDocument, PageReporter, join_blocks
from pipeline.extract import extract
from pipeline.extract.ocr import OcrPageHook
from pipeline.metadata import automatic_metadata
from pipeline.settings import Settings
from pipeline.tokens import length_function_for


class Prepared(Protocol):
    """What indexing reads of a prepared document (in-process or from an isolated child)."""

    @property
    def chunks(self) -> list[Chunk]: ...

    @property
    def metadata(self) -> dict[str, Any]: ...


@runtime_checkable
class PreparedStream(Protocol):
    """A prepared document whose chunks arrive in batches (from an isolated child).

    `metadata` and `chunk_count` are known before the first chunk; `batches()` yields the
    chunks in order, in lists of bounded length, and may be iterated once.
    """

    @property
    def metadata(self) -> dict[str, Any]: ...

    @property
    def chunk_count(self) -> int: ...

    def batches(self) -> Iterator[list[Chunk]]: ...


@dataclass(frozen=True, slots=True)
class InMemoryStream:
    """A `Prepared` document served as a `PreparedStream`, `batch` chunks at a time."""

    prepared: Prepared
    batch: int = 256

    @property
    def metadata(self) -> dict[str, Any]:
        return self.prepared.metadata

    @property
    def chunk_count(self) -> int:
        return len(self.prepared.chunks)

    def batches(self) -> Iterator[list[Chunk]]:
        chunks = self.prepared.chunks
        for start in range(0, len(chunks), self.batch):
            yield chunks[start : start + self.batch]


def as_stream(prepared: Prepared | PreparedStream) -> PreparedStream:
    """`prepared` as a `PreparedStream` (a whole document is served from memory)."""
    if isinstance(prepared, PreparedStream):
        return prepared
    return InMemoryStream(prepared)


@dataclass(frozen=True, slots=True)
class PreparedDocument:
    detection: Detection
    document: ExtractedDocument
    text: str
    metadata: dict[str, Any]
    chunks: list[Chunk]


def prepare_document(
    data: bytes,
    *,
    filename: str,
    settings: Settings,
    content_type: str | None = None,
    chunking: ChunkingSpec | None = None,
    on_stage: Callable[[str], None] | None = None,
    on_page: PageReporter | None = None,
    on_ocr_page: OcrPageHook | None = None,
) -> PreparedDocument:
    """Detect, extract and chunk `data`; raise a `PermanentError` subclass on bad input.

    `on_stage` hears "detecting", "extracting" and "chunking" as each begins; `on_ocr_page`
    is called before each page is OCR'd.
    """
    stage = on_stage or _ignore
    chunking = chunking or ChunkingSpec.from_settings(settings)
    stage("detecting")
    detection = detect(data, filename=filename, content_type=content_type)
    stage("extracting")
    document = extract(data, detection, settings=settings, on_page=on_page, on_ocr_page=on_ocr_page)
    text, _ = join_blocks(document.blocks)
    metadata = automatic_metadata(data, filename=filename, document=document, text=text)
    stage("chunking")
    chunks = chunk_document(
        document.blocks,
        chunk_size=chunking.chunk_size,
        chunk_overlap=chunking.chunk_overlap,
        length=length_function_for(chunking.unit),
    )
    return PreparedDocument(detection, document, text, metadata, chunks)


def _ignore(stage: str) -> None:
    return None
