"""Every document of the shared corpus through detect → extract → metadata → chunk."""

from __future__ import annotations

from typing import Any

import pytest

from docingest.pipeline.chunking import ChunkingSpec
from docingest.pipeline.errors import DocumentTooLarge, IngestError
from docingest.pipeline.prepare import Header, PreparedStream, Preparer, prepare_document
from docingest.pipeline.settings import ChunkUnit, Settings
from tests.support.paths import CORPUS_DIR

FORMAT_BY_FOLDER = {
    "pdf": "pdf",
    "docx": "docx",
    "html": "html",
    "markdown": "markdown",
    "txt": "txt",
    "images": "image",
}

# Files whose expected outcome is an error code (see the corpus README and SOURCES.md).
EXPECTED_ERRORS = {
    "pdf/corrupt-empty-0-bytes.pdf": "empty_document",
    "pdf/corrupt-header-only.pdf": "corrupt_document",
    "pdf/corrupt-truncated-federal-register.pdf": "corrupt_document",
    "pdf/encrypted-doclaynet-pg3-pw1234.pdf": "encrypted_document",
    "pdf/encrypted-libreoffice-userpw.pdf": "encrypted_document",
    "images/example.jpg": "no_text_found",  # a photo of a flower: OCR finds no text
    "docx/corrupt-truncated.docx": "corrupt_document",
    "docx/encrypted-password-pass.docx": "encrypted_document",
    "txt/edge-empty-0-bytes.txt": "empty_document",
}
# Its page tree root is missing (PDFium and pypdf both refuse it); either outcome is precise.
EITHER_TEXT_OR_CORRUPT = {"pdf/corrupt-damaged-xref-datasheet.pdf"}
# Extracting 2,415 pages takes a while; the PDF extractor's own tests cover it.
SKIP_HERE = {"pdf/R-4.2.2-refman.pdf"}

CORPUS_FILES = sorted(
    f"{folder}/{path.name}"
    for folder in FORMAT_BY_FOLDER
    for path in (CORPUS_DIR / folder).iterdir()
    if path.is_file() and f"{folder}/{path.name}" not in SKIP_HERE
)


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    return Settings(data_dir=tmp_path_factory.mktemp("data"))


@pytest.mark.parametrize("relative", CORPUS_FILES)
def test_corpus_file_prepares_or_fails_with_its_code(relative: str, settings: Settings) -> None:
    path = CORPUS_DIR / relative
    data = path.read_bytes()
    expected_error = EXPECTED_ERRORS.get(relative)
    if not relative.startswith("images/"):  # OCR'd images are read whole either way
        assert_streamed_alike(data, path.name, settings)
    try:
        prepared = prepare_document(
            data,
            filename=path.name,
            settings=settings,
            chunking=ChunkingSpec.from_settings(settings),
        )
    except IngestError as exc:
        if relative in EITHER_TEXT_OR_CORRUPT:
            assert exc.code == "corrupt_document"
            return
        assert exc.code == expected_error, f"{relative}: {exc.code}: {exc.message}"
        assert exc.message.endswith("."), "messages are sentences"
        return
    assert expected_error is None, f"{relative} should fail with {expected_error}"
    folder = relative.split("/")[0]
    assert prepared.detection.format == FORMAT_BY_FOLDER[folder]
    meta = prepared.metadata
    assert meta["filename"] == path.name
    assert meta["size_bytes"] == len(data)
    assert len(meta["sha256"]) == 64
    assert meta["words"] > 0 and meta["characters"] == len(prepared.text)
    assert "\ufffd" not in prepared.text or relative.startswith("txt/"), "decoding lost characters"
    assert prepared.chunks, "a document with text yields chunks"
    for chunk in prepared.chunks:
        assert prepared.text[chunk.start : chunk.end] == chunk.text
        assert len(chunk.text) <= settings.chunk_size
    if folder in ("pdf", "images"):
        assert meta["pages"] and all(chunk.page_start for chunk in prepared.chunks)
    if folder == "images" or "-no-text" in relative:  # scans are read by OCR (Tesseract)
        assert meta["ocr"]["pages"] == list(range(1, meta["pages"] + 1))
        assert 0.5 < meta["ocr"]["confidence"] <= 1


def assert_streamed_alike(data: bytes, filename: str, settings: Settings) -> None:
    """The streamed preparation (what the parsing child sends) gives the same chunks and
    metadata as the whole one, or fails with the same error."""
    outcomes: list[tuple[object, dict[str, Any]]] = []
    spec = ChunkingSpec.from_settings(settings)
    for prepare in ("whole", "streamed"):
        try:
            if prepare == "whole":
                whole = prepare_document(data, filename=filename, settings=settings, chunking=spec)
                outcomes.append((whole.chunks, whole.metadata))
            else:
                preparer = Preparer.start(data, filename=filename, settings=settings, chunking=spec)
                parts = preparer.parts()
                header = next(parts)
                assert isinstance(header, Header)
                stream = PreparedStream(header, parts)
                chunks = [chunk for batch in stream.batches() for chunk in batch]
                assert stream.chunk_count == len(chunks)
                outcomes.append((chunks, stream.metadata))
        except IngestError as exc:
            outcomes.append((exc.code, {"message": exc.message}))
    (whole_outcome, whole_meta), (outcome, meta) = outcomes
    assert outcome == whole_outcome
    assert {**meta, "ingested_at": None} == {**whole_meta, "ingested_at": None}


def test_token_chunking_stays_within_the_model_budget(settings: Settings) -> None:
    from docingest.pipeline.chunking.tokens import length_function_for

    path = CORPUS_DIR / "txt" / "rfc6455-websocket.txt"
    config = ChunkingSpec(chunk_size=256, chunk_overlap=32, unit=ChunkUnit.TOKENS)
    prepared = prepare_document(
        path.read_bytes(), filename=path.name, settings=settings, chunking=config
    )
    count = length_function_for(ChunkUnit.TOKENS)
    assert len(prepared.chunks) > 50
    assert max(count(chunk.text) for chunk in prepared.chunks) <= 256


def test_mislabeled_pdf_is_still_a_pdf(settings: Settings) -> None:
    data = (CORPUS_DIR / "pdf" / "federal-register-2020-17221.pdf").read_bytes()
    prepared = prepare_document(
        data,
        filename="notes.txt",
        settings=settings,
        content_type="text/plain",
        chunking=ChunkingSpec.from_settings(settings),
    )
    assert prepared.detection.format == "pdf"
    assert prepared.metadata["pages"] == 15


def test_a_document_past_the_chunk_limit_fails_as_too_large_while_it_streams() -> None:
    settings = Settings(isolate_extraction=False, max_chunks_per_document=50)
    text = "\n\n".join(f"Paragraph {number}. " + "Words to fill it. " * 60 for number in range(200))
    preparer = Preparer.start(
        text.encode(), filename="long.txt", settings=settings,
        chunking=ChunkingSpec.from_settings(settings),
    )  # fmt: skip
    seen = 0
    with pytest.raises(DocumentTooLarge, match="more than 50 chunks"):
        for _ in preparer.chunks():
            seen += 1
    assert seen == 50
