"""Run the CPU stages on one file: detect → extract → metadata → chunk.

This is what a worker does before embedding, and what `docingest inspect` shows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from pipeline.chunking import Chunk, ChunkingSpec, iter_chunks
from pipeline.chunking.tokens import length_function_for
from pipeline.detect import detect
from pipeline.document import Block, Detection, ExtractedDocument, PageReporter, join_blocks
from pipeline.extract import extract_stream
from pipeline.extract.ocr import OcrPageHook, OcrRecord
from pipeline.metadata import TextTally, content_metadata, file_metadata
from pipeline.settings import Settings


class Prepared(Protocol):
    """What indexing reads of a prepared document (in-process or from an isolated child)."""

    @property
    def chunks(self) -> list[Chunk]: ...

    @property
    def metadata(self) -> dict[str, Any]: ...


@runtime_checkable
class PreparedStream(Protocol):
    """A prepared document whose chunks arrive in batches (from an isolated child).

    `batches()` yields the chunks in order, in lists of bounded length, and may be iterated
    once. Before the first batch, `metadata` holds at least `file_metadata` (name, format,
    size, hash); `chunk_count` and the rest of the metadata (`CONTENT_KEYS`) may be known only
    once the last batch is read, `chunk_count` being None until then; `metadata["ocr"]`
    covers the pages of every chunk yielded so far.
    """

    @property
    def metadata(self) -> dict[str, Any]: ...

    @property
    def chunk_count(self) -> int | None: ...

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
    def chunk_count(self) -> int | None:
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
    is called before each page is OCR'd. The same steps as the parsing child's
    `stream_document`, run to the end, the blocks kept.
    """
    stream = stream_document(
        data,
        filename=filename,
        settings=settings,
        content_type=content_type,
        chunking=chunking,
        on_stage=on_stage,
        on_page=on_page,
        on_ocr_page=on_ocr_page,
        keep_blocks=True,
    )
    chunks = list(stream.chunks())
    document = stream.document
    if document is None:
        raise RuntimeError("the document was not extracted to its end")
    text, _ = join_blocks(document.blocks)
    return PreparedDocument(stream.detection, document, text, stream.metadata, chunks)


class DocumentStream:
    """A document being prepared, for a caller that embeds chunks while later pages are still
    being extracted: the file's metadata now, the chunks as `chunks()` extracts and splits
    them (a section at a time, `iter_chunks`), the rest of the metadata once they are out.

    Made by `stream_document`; `chunks()` may be iterated once.
    """

    def __init__(
        self,
        data: bytes,
        detection: Detection,
        *,
        filename: str,
        settings: Settings,
        chunking: ChunkingSpec,
        on_stage: Callable[[str], None],
        on_page: PageReporter | None,
        on_ocr_page: OcrPageHook | None,
        keep_blocks: bool = False,
    ) -> None:
        self.detection = detection
        self._data, self._settings = data, settings
        self._chunking = chunking
        self._on_stage, self._on_page, self._on_ocr_page = on_stage, on_page, on_ocr_page
        self._ocr = OcrRecord()
        self.metadata: dict[str, Any] = file_metadata(
            data, filename=filename, format=str(detection.format)
        )
        """`file_metadata` at first; `CONTENT_KEYS` added once extraction ends (`extracted`)."""
        self.chunk_count = 0
        """Chunks yielded so far."""
        self.extracted = False
        """Whether extraction has ended: the chunks still to come, those of the last section,
        are split already (a caller may count them before passing them on)."""
        self.document: ExtractedDocument | None = None
        """The extracted document once extraction has ended; its `blocks` only with
        `keep_blocks` (the parsing child does not hold them)."""
        self._kept: list[Block] | None = [] if keep_blocks else None

    def ocr(self) -> dict[str, Any] | None:
        """The pages OCR'd so far and their confidence (`OcrRecord.as_extra`), None if none:
        every chunk yielded so far lies on pages already read."""
        return self._ocr.as_extra() if self._ocr.pages else None

    def chunks(self) -> Iterator[Chunk]:
        """Yield the chunks in order, each section's as soon as the next heading closes it."""
        spec = self._chunking
        for chunk in iter_chunks(
            self._blocks(),
            chunk_size=spec.chunk_size,
            chunk_overlap=spec.chunk_overlap,
            length=length_function_for(spec.unit),
        ):
            self.chunk_count += 1
            yield chunk

    def _blocks(self) -> Iterator[Block]:
        """The extracted blocks one by one; then the content metadata, into `metadata`."""
        self._on_stage("extracting")
        stream = extract_stream(
            self._data,
            self.detection,
            settings=self._settings,
            on_page=self._on_page,
            on_ocr_page=self._on_ocr_page,
            ocr_record=self._ocr,
        )
        text = TextTally()
        while True:
            try:
                blocks = next(stream)
            except StopIteration as end:
                document: ExtractedDocument = end.value
                break
            text.add(blocks)
            if self._kept is not None:
                self._kept.extend(blocks)
            yield from blocks
        self._data = b""  # the file is no longer needed; the child's memory is limited
        if self._kept is not None:
            document.blocks = self._kept
        self.document = document
        self.metadata.update(content_metadata(document, text))
        self.extracted = True
        self._on_stage("chunking")  # the last section is split after extraction ends


def stream_document(
    data: bytes,
    *,
    filename: str,
    settings: Settings,
    content_type: str | None = None,
    chunking: ChunkingSpec | None = None,
    on_stage: Callable[[str], None] | None = None,
    on_page: PageReporter | None = None,
    on_ocr_page: OcrPageHook | None = None,
    keep_blocks: bool = False,
) -> DocumentStream:
    """`prepare_document` as a `DocumentStream`: detect `data` now (raising its error), and
    extract and chunk it as the chunks are read; `keep_blocks` keeps the extracted blocks in
    `DocumentStream.document`."""
    stage = on_stage or _ignore
    stage("detecting")
    detection = detect(data, filename=filename, content_type=content_type)
    return DocumentStream(
        data,
        detection,
        filename=filename,
        settings=settings,
        chunking=chunking or ChunkingSpec.from_settings(settings),
        on_stage=stage,
        on_page=on_page,
        on_ocr_page=on_ocr_page,
        keep_blocks=keep_blocks,
    )


def _ignore(stage: str) -> None:
    return None
