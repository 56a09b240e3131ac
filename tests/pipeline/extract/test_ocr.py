"""OCR with Debian's Tesseract on pages of known text drawn at test time, scanned corpus
PDFs and images: text, pages, confidence, modes, missing language data, and the child's
CPU grants and progress."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

from docingest.pipeline.chunking import ChunkingSpec
from docingest.pipeline.detect import detect
from docingest.pipeline.document import DocumentFormat, ExtractedDocument
from docingest.pipeline.errors import DocumentTooLarge, ExtractionTimeout, NoTextFound
from docingest.pipeline.extract import extract
from docingest.pipeline.extract.ocr import OcrMode, OcrOptions
from docingest.pipeline.extract.pdf import extract_pdf
from docingest.pipeline.isolation.parent import Limits
from docingest.pipeline.prepare import prepare_document
from docingest.pipeline.settings import Settings
from tests.support.image_files import KNOWN_TEXT, encoded, pdf_with_pages, text_image, word_accuracy
from tests.support.prepared import prepare_isolated

KNOWN = " ".join(KNOWN_TEXT)


def _text(document: ExtractedDocument) -> str:
    return "\n\n".join(block.text for block in document.blocks)


def _extract(data: bytes, settings: Settings, **hooks: object) -> ExtractedDocument:
    return extract(data, detect(data), settings=settings, **hooks)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("image_format", "options"),
    [("PNG", {}), ("JPEG", {"quality": 85}), ("WEBP", {"quality": 90}), ("TIFF", {})],
)
def test_an_image_of_known_text_is_read_word_for_word(
    image_format: str, options: dict[str, object]
) -> None:
    data = encoded(text_image(KNOWN_TEXT), image_format, **options)
    document = _extract(data, Settings())
    assert document.format is DocumentFormat.IMAGE
    assert word_accuracy(KNOWN, _text(document)) >= 0.95
    assert document.extra["ocr"]["pages"] == [1]
    assert document.extra["ocr"]["confidence"] > 0.8
    assert {block.page for block in document.blocks} == {1}


def test_each_tiff_page_is_a_page_with_progress() -> None:
    pages = [text_image([line]) for line in KNOWN_TEXT[:3]]
    data = encoded(pages[0], "TIFF", save_all=True, append_images=pages[1:])
    progress: list[tuple[int, int]] = []
    ocr_calls: list[None] = []
    document = _extract(
        data,
        Settings(),
        on_page=lambda done, total: progress.append((done, total)),
        on_ocr_page=lambda: ocr_calls.append(None),
    )
    assert progress == [(1, 3), (2, 3), (3, 3)]
    assert len(ocr_calls) == 3
    assert document.pages == 3
    for number, line in enumerate(KNOWN_TEXT[:3], 1):
        on_page = " ".join(block.text for block in document.blocks if block.page == number)
        assert word_accuracy(line, on_page) >= 0.9


def test_only_the_scanned_page_of_a_digital_pdf_is_ocrd() -> None:
    data = pdf_with_pages(["A digital first page about deltas.", text_image(KNOWN_TEXT)])
    document = extract_pdf(data, max_pages=10, ocr=OcrOptions(mode=OcrMode.AUTO))
    assert document.blocks[0].text == "A digital first page about deltas."
    assert document.blocks[0].page == 1
    scanned = " ".join(block.text for block in document.blocks if block.page == 2)
    assert word_accuracy(KNOWN, scanned) >= 0.95
    assert document.extra["ocr"]["pages"] == [2]


def test_force_reads_every_page_and_off_none() -> None:
    data = pdf_with_pages(["Text layer of the first page.", text_image(KNOWN_TEXT)])
    forced = extract_pdf(data, max_pages=10, ocr=OcrOptions(mode=OcrMode.FORCE))
    assert forced.extra["ocr"]["pages"] == [1, 2]
    assert word_accuracy("Text layer of the first page", _text(forced)) == 1.0
    off = extract_pdf(data, max_pages=10, ocr=OcrOptions(mode=OcrMode.OFF))
    assert "ocr" not in off.extra
    assert [block.page for block in off.blocks] == [1]


def test_vicksburg_forced_ocr_agrees_with_its_own_ocr_layer(corpus_dir: Path) -> None:
    data = (corpus_dir / "pdf/scanned-vicksburg-with-ocr-layer.pdf").read_bytes()
    layer = extract_pdf(data, max_pages=10)
    ours = extract_pdf(data, max_pages=10, ocr=OcrOptions(mode=OcrMode.FORCE))
    assert "ocr" not in layer.extra
    assert ours.extra["ocr"]["pages"] == list(range(1, (ours.pages or 0) + 1))
    assert word_accuracy(_text(layer), _text(ours)) >= 0.85


def test_scanned_corpus_pdf_is_read(corpus_dir: Path) -> None:
    data = (corpus_dir / "pdf/scanned-huckfinn-p22-no-text.pdf").read_bytes()
    document = extract_pdf(data, max_pages=10, ocr=OcrOptions(mode=OcrMode.AUTO))
    text = _text(document)
    assert "We scrouched down and laid still." in text
    assert "Miss Watson’s big" in text
    assert "Hesse" not in text  # the illustration's noise line (confidence 14-41) is dropped


def test_ocr_off_fails_a_scan_and_an_image_with_no_text_found(corpus_dir: Path) -> None:
    settings = Settings(ocr="off")
    scan = (corpus_dir / "pdf/scanned-linn-brochure-no-text.pdf").read_bytes()
    with pytest.raises(NoTextFound, match="OCR is off"):
        _extract(scan, settings)
    with pytest.raises(NoTextFound, match="OCR is off"):
        _extract(encoded(text_image(KNOWN_TEXT), "PNG"), settings)


def test_missing_tesseract_data_names_the_package_and_crashes_nothing(tmp_path: Path) -> None:
    missing = Settings(ocr_tessdata_dir=tmp_path / "no-tessdata")
    scan = pdf_with_pages([text_image(KNOWN_TEXT)])
    with pytest.raises(NoTextFound, match=r"install Debian's tesseract-ocr and tesseract-ocr-eng"):
        _extract(scan, missing)
    # A digital PDF with one scanned page keeps its text layer when OCR is unavailable.
    mixed = pdf_with_pages(["The digital page survives.", text_image(KNOWN_TEXT)])
    assert _text(_extract(mixed, missing)) == "The digital page survives."
    # Through the isolated child: the same error, no crash.
    path = tmp_path / "scan.pdf"
    path.write_bytes(scan)
    with pytest.raises(NoTextFound, match="tesseract-ocr-eng"):
        prepare_isolated(path, filename=path.name, settings=missing)


def test_a_language_without_its_package_is_named() -> None:
    settings = Settings(ocr_languages="eng+zzz")
    with pytest.raises(
        NoTextFound, match=r"\(zzz\).*apt-get install tesseract-ocr tesseract-ocr-zzz"
    ):
        _extract(encoded(text_image(KNOWN_TEXT), "PNG"), settings)


def _heavy_tiff(tmp_path: Path, pages: int) -> Path:
    """A TIFF of `pages` full pages of text: about a second of Tesseract CPU time each."""
    page = text_image(KNOWN_TEXT * 6, scale=2)
    path = tmp_path / "heavy.tif"
    path.write_bytes(encoded(page, "TIFF", save_all=True, append_images=[page] * (pages - 1)))
    return path


def test_the_child_is_granted_cpu_time_per_ocr_page_and_reports_each(tmp_path: Path) -> None:
    path = _heavy_tiff(tmp_path, 4)
    settings = Settings(ocr_cpu_seconds_per_page=20)
    tight = Limits(memory_bytes=3 * 2**30, cpu_seconds=2, wall_seconds=60)
    with pytest.raises(ExtractionTimeout, match="2 s of CPU"):  # no room to grow
        prepare_isolated(path, filename=path.name, settings=settings, limits=tight)
    growing = Limits(
        memory_bytes=3 * 2**30,
        cpu_seconds=2,
        wall_seconds=60,
        max_cpu_seconds=120,
        max_wall_seconds=300,
    )
    progress: list[tuple[int, int]] = []
    prepared = prepare_isolated(
        path,
        filename=path.name,
        settings=settings,
        limits=growing,
        on_page=lambda done, total: progress.append((done, total)),
    )
    assert progress == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert prepared.metadata["ocr"]["pages"] == [1, 2, 3, 4]


def test_grants_stop_at_the_cap() -> None:
    limits = Limits.from_settings(
        Settings(extraction_cpu_seconds=300, extraction_timeout_seconds=500), size_bytes=1000
    )
    assert limits.granted(200).cpu_seconds == 200
    assert limits.granted(200).wall_seconds == 430
    assert limits.granted(10_000).cpu_seconds == 300
    assert limits.granted(10_000).wall_seconds == 500


def test_prepared_scan_records_ocr_in_metadata_and_chunks_cover_it(corpus_dir: Path) -> None:
    data = (corpus_dir / "pdf/scanned-huckfinn-p22-no-text.pdf").read_bytes()
    prepared = prepare_document(
        data,
        filename="huck.pdf",
        settings=Settings(),
        chunking=ChunkingSpec.from_settings(Settings()),
    )
    ocr = prepared.metadata["ocr"]
    assert ocr["pages"] == [1] and len(ocr["page_confidence"]) == 1
    assert ocr["confidence"] == ocr["page_confidence"][0] and 0.8 < ocr["confidence"] <= 1
    assert all(chunk.page_start == 1 for chunk in prepared.chunks)


@pytest.mark.parametrize("limit", [5_000_000, 2_000_000])  # Pillow warns, Pillow raises
def test_image_bigger_than_the_pixel_limit_is_too_large_before_decoding(limit: int) -> None:
    """Our message with our limit: above twice it, Pillow's own text named twice the limit."""
    image = Image.new("L", (3000, 2000), "white")
    data = encoded(image, "PNG")
    with pytest.raises(DocumentTooLarge, match=f"limit is {limit:,} pixels") as raised:
        _extract(data, Settings(max_image_pixels=limit))
    assert "6,000,000 pixels" in raised.value.message
    assert str(2 * limit) not in raised.value.message and "DOS" not in raised.value.message


def test_a_scanned_table_comes_out_a_row_per_line() -> None:
    # A table drawn at test time (columns, no rules), rendered to an image and read by OCR
    # from a scanned PDF page and from the image itself: rows from the word boxes.
    import pypdfium2 as pdfium

    from docingest.pipeline.document import BlockKind
    from tests.support.structured_pdfs import aligned_table_pdf

    rows = [("Model", "NQ", "TriviaQA", "WQ"), ("BM25", "59.1", "66.9", "55.0"),
            ("DPR", "78.4", "79.4", "73.2"), ("BM25 + DPR", "76.6", "79.8", "71.0")]  # fmt: skip
    prose = ["Some prose before the table, set in the usual way of a paragraph of text.",
             "It goes on for another line of ordinary words, as prose does."]  # fmt: skip
    drawn = pdfium.PdfDocument(aligned_table_pdf(rows, before=prose))
    image = drawn[0].render(scale=300 / 72, grayscale=True).to_pil()
    for data in (pdf_with_pages([image]), encoded(image, "PNG")):
        blocks = _extract(data, Settings()).blocks
        tables = [block.text for block in blocks if block.kind is BlockKind.TABLE]
        assert tables == ["\n".join(" | ".join(row) for row in rows)]
        assert blocks[0].text == " ".join(prose)
