"""Run the CPU stages on one file: detect → extract → metadata → chunk.

This is what a worker does before embedding, and what `docingest inspect` shows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

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
