"""Run the CPU stages on one file: detect → extract → metadata → chunk.

One vocabulary for a document being prepared:

- `PrepareRequest`: the file, its name, how to split it, who hears its progress;
- `Preparer`: the stages run in this process, giving the document's `parts()` as they are
  ready: a `Header` (the file's metadata), `Chunks` batches as sections are split, and a
  `Summary` (the rest of the metadata and the count) once extraction has ended;
- `PreparedStream`: what indexing reads, built from those parts, whichever process made
  them (`docingest.pipeline.isolation.open_prepared` opens one, in the limited child or here);
- `PreparedDocument` (`prepare_document`): the whole document with its blocks, for
  `docingest inspect` and for Python callers that want everything at once.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from docingest.pipeline.chunking import Chunk, ChunkingSpec, iter_chunks
from docingest.pipeline.chunking.tokens import length_function_for
from docingest.pipeline.detect import detect, extension_note
from docingest.pipeline.document import (
    Block,
    Detection,
    DocumentFormat,
    ExtractedDocument,
    PageReporter,
    join_blocks,
)
from docingest.pipeline.errors import Cancelled, CorruptDocument, DocumentTooLarge
from docingest.pipeline.extract import extract_stream
from docingest.pipeline.extract.ocr import OcrPageHook, OcrRecord
from docingest.pipeline.keys import JobStage
from docingest.pipeline.metadata import CONTENT_KEYS, TextTally, content_metadata, file_metadata
from docingest.pipeline.settings import Settings

StageReporter = Callable[[JobStage], None]
"""Hears "detecting", "extracting" and "chunking" as each begins."""

CHUNK_BATCH = 256
"""Most chunks in one `Chunks` part: neither side of the parsing child's pipe ever encodes
or decodes the whole document at once."""


@dataclass(frozen=True, slots=True)
class PrepareRequest:
    """One file to prepare, and who hears its progress."""

    path: Path
    filename: str
    chunking: ChunkingSpec
    """The index's (`IndexConfig.chunking`); `Settings` holds the defaults of new indexes."""
    content_type: str | None = None
    on_stage: StageReporter | None = None
    on_page: PageReporter | None = None
    should_cancel: Callable[[], bool] | None = None
    """Polled while the document is being prepared (between OCR pages, and while the parent
    waits on the parsing child); true → `Cancelled`, and the child is stopped."""


@dataclass(frozen=True, slots=True)
class Header:
    """The document's metadata known before extraction (`file_metadata`); its chunks follow,
    then a `Summary`."""

    metadata: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Chunks:
    """The next batch of the document's chunks, in order, as they are split (while later
    pages are still being extracted)."""

    chunks: list[Chunk]
    ocr: dict[str, Any] | None = None
    """The pages OCR'd so far (`OcrRecord.as_extra`), which hold every chunk sent so far;
    None when none was."""


@dataclass(frozen=True, slots=True)
class Summary:
    """Once extraction has ended: the metadata known only then (`CONTENT_KEYS`) and how many
    chunks the document has; the last section's chunks may follow it."""

    metadata: dict[str, Any]
    chunk_count: int


Part = Header | Chunks | Summary


class PreparedStream:
    """A document being prepared, as indexing reads it: `metadata` holds the file's fields
    (name, format, size, hash) from the start and the rest (`CONTENT_KEYS`) once extraction
    has ended; `chunk_count` is None until then; `batches()` yields the chunks in order, may
    be iterated once, and keeps `metadata["ocr"]` covering the pages of every chunk yielded.

    Made from the parts after the `Header`, from this process (`Preparer.parts`) or from the
    parsing child; a stream that breaks their order is a `CorruptDocument`.
    """

    def __init__(self, header: Header, rest: Iterator[Part]) -> None:
        self.metadata: dict[str, Any] = dict(header.metadata)
        self.chunk_count: int | None = None
        self._rest = rest

    def batches(self) -> Iterator[list[Chunk]]:
        received, announced = 0, None
        for part in self._rest:
            if isinstance(part, Chunks):
                received += len(part.chunks)
                if announced is not None and received > announced:
                    raise CorruptDocument(
                        f"The parsing process sent more than the {announced} chunks it counted."
                    )
                if part.ocr is not None:  # the pages this batch's chunks may lie on
                    self.metadata["ocr"] = part.ocr
                yield part.chunks
            elif isinstance(part, Summary) and announced is None:
                self.metadata.update(part.metadata)
                self.chunk_count = announced = part.chunk_count
            else:
                raise CorruptDocument("The parsing process sent the document out of order.")
        if received != announced:
            raise CorruptDocument(
                f"The parsing process ended after {received} chunks of "
                f"{'an uncounted number' if announced is None else announced}."
            )


@dataclass(frozen=True, slots=True)
class PreparedDocument:
    """A whole prepared document, its blocks and joined text included."""

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
    chunking: ChunkingSpec,
    content_type: str | None = None,
    on_stage: StageReporter | None = None,
    on_page: PageReporter | None = None,
) -> PreparedDocument:
    """Detect, extract and chunk `data` in this process, whole; raise a `PermanentError`
    subclass on bad input. The same steps as the parsing child's, run to the end, the blocks
    kept."""
    preparer = Preparer.start(
        data,
        filename=filename,
        settings=settings,
        chunking=chunking,
        content_type=content_type,
        on_stage=on_stage,
        on_page=on_page,
        keep_blocks=True,
    )
    chunks = list(preparer.chunks())
    document = preparer.document
    if document is None:
        raise RuntimeError("the document was not extracted to its end")
    text, _ = join_blocks(document.blocks)
    return PreparedDocument(preparer.detection, document, text, preparer.metadata, chunks)


class Preparer:
    """The stages run on one file in this process, for a caller that embeds chunks while
    later pages are still being extracted: the file's metadata now, the chunks as `chunks()`
    extracts and splits them (a section at a time, `iter_chunks`), the rest of the metadata
    once they are out. `parts()` gives the same as the parts a `PreparedStream` is read from.

    Made by `Preparer.start`, which detects the format; `chunks()` may be iterated once.
    """

    def __init__(
        self,
        data: bytes | mmap.mmap,
        detection: Detection,
        *,
        filename: str,
        settings: Settings,
        chunking: ChunkingSpec,
        on_stage: StageReporter,
        on_page: PageReporter | None,
        on_ocr_page: OcrPageHook | None,
        keep_blocks: bool,
    ) -> None:
        self.detection = detection
        self._data, self._settings = data, settings
        self._chunking = chunking
        self._on_stage, self._on_page, self._on_ocr_page = on_stage, on_page, on_ocr_page
        self._ocr = OcrRecord()
        self.metadata: dict[str, Any] = file_metadata(
            data, filename=filename, format=str(detection.format)
        )
        if note := extension_note(filename, detection.format):
            self.metadata["format_note"] = note
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

    @classmethod
    def start(
        cls,
        data: bytes | mmap.mmap,
        *,
        filename: str,
        settings: Settings,
        chunking: ChunkingSpec,
        content_type: str | None = None,
        on_stage: StageReporter | None = None,
        on_page: PageReporter | None = None,
        on_ocr_page: OcrPageHook | None = None,
        keep_blocks: bool = False,
    ) -> Preparer:
        """Detect `data` now (raising its error); extract and chunk it as chunks are read.
        `on_ocr_page` is called before each page is OCR'd; `keep_blocks` keeps the extracted
        blocks in `document`."""
        stage = on_stage or _ignore
        stage(JobStage.DETECTING)
        detection = detect(data, filename=filename, content_type=content_type)
        if isinstance(data, mmap.mmap) and detection.format is not DocumentFormat.MBOX:
            data = bytes(data)  # only an mbox archive is read from the map (`iter_mbox`)
        return cls(
            data,
            detection,
            filename=filename,
            settings=settings,
            chunking=chunking,
            on_stage=stage,
            on_page=on_page,
            on_ocr_page=on_ocr_page,
            keep_blocks=keep_blocks,
        )

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
            if self.chunk_count > self._settings.max_chunks_per_document:
                raise DocumentTooLarge(
                    "The document splits into more than "
                    f"{self._settings.max_chunks_per_document:,} chunks (the server's "
                    "max_chunks_per_document); split it into smaller files or use a larger "
                    "chunk_size."
                )
            yield chunk

    def parts(self) -> Iterator[Part]:
        """The document as parts: the `Header`, the chunks in batches of at most
        `CHUNK_BATCH` as they are split, and the `Summary` as soon as extraction has ended,
        before the last section's chunks, so a reader knows the total as early as it can."""
        yield Header(metadata=dict(self.metadata))
        chunks = self.chunks()
        batch: list[Chunk] = []
        for chunk in chunks:  # the reader's pace holds this back
            batch.append(chunk)
            if self.extracted:
                break
            if len(batch) == CHUNK_BATCH:
                yield Chunks(batch, ocr=self.ocr())
                batch = []
        rest = [*batch, *chunks]
        metadata = {key: self.metadata[key] for key in CONTENT_KEYS}
        yield Summary(metadata=metadata, chunk_count=self.chunk_count)
        for start in range(0, len(rest), CHUNK_BATCH):
            yield Chunks(rest[start : start + CHUNK_BATCH], ocr=self.ocr())

    def _blocks(self) -> Iterator[Block]:
        """The extracted blocks one by one; then the content metadata, into `metadata`."""
        self._on_stage(JobStage.EXTRACTING)
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
        self._on_stage(JobStage.CHUNKING)  # the last section is split after extraction ends


def prepare_here(request: PrepareRequest, *, settings: Settings) -> PreparedStream:
    """`request` prepared in this process, as a stream (trusted input only: no limits)."""
    preparer = Preparer.start(
        request.path.read_bytes(),
        filename=request.filename,
        settings=settings,
        chunking=request.chunking,
        content_type=request.content_type,
        on_stage=request.on_stage,
        on_page=request.on_page,
        on_ocr_page=_cancel_check(request.should_cancel),
    )
    parts = preparer.parts()
    header = next(parts)
    assert isinstance(header, Header)
    return PreparedStream(header, parts)


def _cancel_check(should_cancel: Callable[[], bool] | None) -> OcrPageHook | None:
    """An OCR page hook that raises `Cancelled` once `should_cancel()` is true."""
    if should_cancel is None:
        return None

    def check() -> None:
        if should_cancel():
            raise Cancelled()

    return check


def _ignore(stage: JobStage) -> None:
    return None
