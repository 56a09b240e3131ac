"""PDF extraction on the corpus's real files, plus hand-built PDFs for broken structures.

Expected values were read independently of this extractor (poppler's pdftotext and pdfinfo,
pypdf's raw page text and outline) before being written here. Where PDFium reads more than
pypdf did (the text before a content stream's cut), the expectation says so.
"""

from __future__ import annotations

import functools
import time
import unicodedata
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from docingest.pipeline.document import BlockKind, ExtractedDocument
from docingest.pipeline.errors import (
    CorruptDocument,
    DocumentTooLarge,
    EmptyDocument,
    EncryptedDocument,
    NoTextFound,
)
from docingest.pipeline.extract.pdf import extract_pdf
from tests.support.pdf_files import build_pdf, stream

Extract = Callable[[str], ExtractedDocument]


@pytest.fixture(scope="module")
def pdf_dir(corpus_dir: Path) -> Path:
    return corpus_dir / "pdf"


@functools.cache
def _extract_path(path: Path) -> ExtractedDocument:
    return extract_pdf(path.read_bytes(), max_pages=5000)


@pytest.fixture(scope="module")
def extract(pdf_dir: Path) -> Extract:
    """Extract a corpus PDF by name, once per test session."""
    return lambda name: _extract_path(pdf_dir / name)


def _page_of(document: ExtractedDocument, text: str) -> int | None:
    """Return the page of the first block that contains `text`."""
    return next((block.page for block in document.blocks if text in block.text), None)


def _full_text(document: ExtractedDocument) -> str:
    return "\n\n".join(block.text for block in document.blocks)


def _two_page_pdf(first: bytes, second: bytes) -> bytes:
    """A two-page Helvetica PDF whose pages draw content streams `first` and `second`."""
    page = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
    page += b"/Resources << /Font << /F1 5 0 R >> >> /Contents %d 0 R >>"
    return build_pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R 4 0 R] /Count 2 >>",
            page % 6,
            page % 7,
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
            stream(first),
            stream(second),
        ]
    )


GOOD_PAGE = b"BT /F1 12 Tf 72 720 Td (Hello from the good page.) Tj ET"
CUT_PAGE = b"BT /F1 12 Tf 72 720 Td (Cut) Tj [ ( ET"  # ends inside a string


def _pdf_with_a_missing_page(*, good_pages: int) -> bytes:
    """A PDF whose page tree lists `good_pages` pages and then one whose object is missing."""
    kids = b" ".join(b"%d 0 R" % (5 + n) for n in range(good_pages))
    page = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
    page += b"/Resources << /Font << /F1 4 0 R >> >> /Contents 3 0 R >>"
    return build_pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [%s 99 0 R] /Count %d >>" % (kids, good_pages + 1),
            stream(GOOD_PAGE),
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
            *[page] * good_pages,
        ]
    )


@pytest.mark.parametrize(
    ("name", "sentence", "page"),
    [
        (
            "federal-register-2020-17221.pdf",
            "(3) In the Operating Procedures chapter, replace the existing Airspeed Unreliable "
            "paragraph with the information in figure 2 to paragraph (h)(3) of this AD.",
            7,
        ),
        (
            "arxiv-1601.03642-thoma.pdf",
            "A formal definition of the field of Machine Learning is given by Tom Mitchel",
            1,
        ),
        (
            "dpr-karpukhin2020-2col.pdf",
            "Second, because the context encoder is not fine-tuned using pairs of questions and "
            "answers, the corresponding representations could be suboptimal.",
            2,
        ),
        # Excel's tagged table: a row per line, cells in column order.
        ("warn-report-excel2013.pdf", "XOMA (US) LLC | Berkeley | 39 | Layoff Permanent", 4),
        (
            "scanned-vicksburg-with-ocr-layer.pdf",
            "JUNE 10TH.—The heat of the sun increases, and we must improve our quarters.",
            1,
        ),
    ],
)
def test_known_sentence_is_on_its_page(
    name: str, sentence: str, page: int, extract: Extract
) -> None:
    assert _page_of(extract(name), sentence) == page


def test_hyphenated_line_breaks_are_joined(extract: Extract) -> None:
    # pypdf gives "subop-\ntimal" (dpr p2), "experi-\nence" (thoma p1), "im-\nprove" (vicksburg).
    assert "suboptimal" in _full_text(extract("dpr-karpukhin2020-2col.pdf"))
    thoma = _full_text(extract("arxiv-1601.03642-thoma.pdf"))
    assert "learn from experience E" in thoma
    assert "experi-" not in thoma


def test_compound_cut_after_one_letter_keeps_its_hyphen(
    extract: Extract,
) -> None:
    # dpr page 2 breaks "a d-" / "dimensional real-valued vectors".
    document = extract("dpr-karpukhin2020-2col.pdf")
    assert _page_of(document, "to a d-dimensional real-valued vectors") == 2


def test_ligatures_are_expanded(extract: Extract) -> None:
    text = _full_text(extract("ieee-tifs-individual-dp-2016.pdf"))
    assert "different" in text
    assert "differential privacy" in text
    assert not any(0xFB00 <= ord(char) <= 0xFB06 for char in text)


def test_outline_entries_become_headings_in_place_of_their_lines(
    extract: Extract,
) -> None:
    document = extract("arxiv-1601.03642-thoma.pdf")
    headings = [block for block in document.blocks if block.kind is BlockKind.HEADING]
    assert len(headings) == 20  # the outline's 20 entries (pypdf reader.outline)
    index = next(i for i, b in enumerate(document.blocks) if b.text == "III-A Google DeepDream")
    heading, after = document.blocks[index], document.blocks[index + 1]
    assert (heading.kind, heading.level, heading.page) == (BlockKind.HEADING, 2, 2)
    assert after.text.startswith("The gradient descent algorithm which optimizes most of the")
    introduction = next(b for b in headings if b.text == "I Introduction")
    assert (introduction.level, introduction.page) == (1, 1)
    # The printed heading line ("A. Google DeepDream") is replaced, not repeated.
    assert not any(block.text == "A. Google DeepDream" for block in document.blocks)


def test_nested_outline_levels(extract: Extract) -> None:
    document = extract("debian-reference.en.pdf")
    headings = {b.text: b for b in document.blocks if b.kind is BlockKind.HEADING}
    assert (headings["GNU/Linux tutorials"].level, headings["GNU/Linux tutorials"].page) == (1, 29)
    assert (headings["Console basics"].level, headings["Console basics"].page) == (2, 29)
    assert (headings["The shell prompt"].level, headings["The shell prompt"].page) == (3, 29)


def test_no_outline_means_headings_from_typography(extract: Extract) -> None:
    # The bold run-in titles of the Federal Register notice, read in its PDF by eye.
    document = extract("federal-register-2020-17221.pdf")
    titles = [block.text for block in document.blocks if block.kind is BlockKind.HEADING]
    for title in ("Comments Invited", "Background", "Costs of Compliance", "Regulatory Findings"):
        assert title in titles
    assert titles.index("Background") < titles.index("Costs of Compliance")


def test_numbered_headings_of_a_paper_get_levels_by_number(extract: Extract) -> None:
    document = extract("dpr-karpukhin2020-2col.pdf")
    headings = {b.text: b for b in document.blocks if b.kind is BlockKind.HEADING}
    assert (headings["2 Background"].level, headings["2 Background"].page) == (1, 2)
    assert (headings["3.1 Overview"].level, headings["3.1 Overview"].page) == (2, 2)
    assert headings["8 Conclusion"].level == 1
    # A footnote leaves the sentence it interrupted in the column order, and closes its page.
    text = _full_text(document)
    assert "differs from 6We use" not in text
    note = next(b for b in document.blocks if b.text.startswith("6We use the unfiltered"))
    last_on_page = [b for b in document.blocks if b.page == note.page][-1]
    assert last_on_page.text.startswith(("6We use", "7", "8"))


@pytest.mark.parametrize(
    "name", ["encrypted-doclaynet-pg3-pw1234.pdf", "encrypted-libreoffice-userpw.pdf"]
)
def test_user_password_means_encrypted_document(name: str, pdf_dir: Path) -> None:
    with pytest.raises(EncryptedDocument) as caught:
        extract_pdf((pdf_dir / name).read_bytes(), max_pages=100)
    assert caught.value.code == "encrypted_document"
    assert "password" in caught.value.message


def test_owner_password_only_extracts_normally(extract: Extract) -> None:
    document = extract("layoutparser-copy-protected.pdf")
    assert document.extra["encrypted"] is True
    assert document.pages == 2
    # The outline's only entry; the page prints it on two lines, which it replaces.
    title = "LayoutParser: A Unified Toolkit for Deep Learning Based Document Image Analysis"
    assert (document.blocks[0].text, document.blocks[0].kind) == (title, BlockKind.HEADING)
    assert document.blocks[1].text.startswith("Zejiang Shen")
    assert (
        _page_of(
            document,
            "Abstract. Recent advances in document image analysis (DIA) have "
            "been primarily driven by the application of neural networks.",
        )
        == 1
    )


@pytest.mark.parametrize(
    "name", ["scanned-huckfinn-p22-no-text.pdf", "scanned-linn-brochure-no-text.pdf"]
)
def test_scan_without_text_layer_asks_for_ocr(name: str, pdf_dir: Path) -> None:
    with pytest.raises(NoTextFound) as caught:
        extract_pdf((pdf_dir / name).read_bytes(), max_pages=100)
    assert "OCR" in caught.value.message


@pytest.mark.parametrize(
    ("name", "detail"),
    [
        # pypdf said "startxref not found", "Stream has ended unexpectedly" and "Invalid
        # object in /Pages" (the datasheet's page tree root is missing); PDFium says less.
        ("corrupt-header-only.pdf", "PDFium: Data format error"),
        ("corrupt-truncated-federal-register.pdf", "PDFium: Data format error"),
        ("corrupt-damaged-xref-datasheet.pdf", "PDFium: Data format error"),
    ],
)
def test_damaged_file_is_corrupt_document(name: str, detail: str, pdf_dir: Path) -> None:
    with pytest.raises(CorruptDocument) as caught:
        extract_pdf((pdf_dir / name).read_bytes(), max_pages=100)
    assert caught.value.message == f"The PDF is damaged ({detail}) and cannot be read."


def test_zero_bytes_is_empty_document(pdf_dir: Path) -> None:
    assert (pdf_dir / "corrupt-empty-0-bytes.pdf").read_bytes() == b""
    with pytest.raises(EmptyDocument):
        extract_pdf(b"", max_pages=100)


def test_cyclic_page_tree_fails_fast_as_corrupt() -> None:
    data = build_pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Pages /Kids [2 0 R] /Count 1 /Parent 2 0 R >>",
        ]
    )
    # CPU time, which a loaded machine does not stretch as it does wall time.
    started = time.process_time()
    with pytest.raises(CorruptDocument) as caught:
        extract_pdf(data, max_pages=100)
    assert time.process_time() - started < 5
    assert "none of its 1 pages could be read" in caught.value.message


def test_a_page_that_does_not_load_is_recorded_and_the_rest_kept() -> None:
    document = extract_pdf(_pdf_with_a_missing_page(good_pages=1), max_pages=10)
    assert [(b.text, b.page) for b in document.blocks] == [("Hello from the good page.", 1)]
    assert document.extra["failed_pages"] == [2]


def test_a_cut_content_stream_keeps_the_text_before_the_cut() -> None:
    # pypdf lost such a page whole (PdfStreamError); PDFium keeps what was drawn.
    document = extract_pdf(_two_page_pdf(GOOD_PAGE, CUT_PAGE), max_pages=10)
    assert [(b.text, b.page) for b in document.blocks] == [
        ("Hello from the good page.", 1),
        ("Cut", 2),
    ]
    assert "failed_pages" not in document.extra


def test_no_page_loading_is_corrupt() -> None:
    with pytest.raises(CorruptDocument, match="none of its 1 pages"):
        extract_pdf(_pdf_with_a_missing_page(good_pages=0), max_pages=10)


def test_page_limit(pdf_dir: Path) -> None:
    data = (pdf_dir / "federal-register-2020-17221.pdf").read_bytes()
    with pytest.raises(DocumentTooLarge) as caught:
        extract_pdf(data, max_pages=5)
    assert "15 pages" in caught.value.message
    assert "limit of 5" in caught.value.message


def test_metadata_from_document_information(extract: Extract) -> None:
    thoma = extract("arxiv-1601.03642-thoma.pdf")
    assert (thoma.title, thoma.author, thoma.pages) == (
        "Art in Machine Learning",
        "Martin Thoma",
        8,
    )
    assert thoma.created == datetime(2016, 1, 15, 1, 30, 29, tzinfo=UTC)
    assert thoma.extra["producer"] == "pdfTeX-1.40.12"
    assert thoma.extra["creator"] == "LaTeX with hyperref package"
    assert thoma.extra["encrypted"] is False
    assert "failed_pages" not in thoma.extra
    irs = extract("irs-i1040nr-instructions.pdf")
    assert (irs.title, irs.author, irs.pages) == ("2007 Instruction 1040-NR", "W:CAR:MP:FP", 50)
    assert irs.created == datetime(2007, 12, 6, 13, 1, 23, tzinfo=UTC)


def test_file_name_title_is_dropped(extract: Extract) -> None:
    document = extract("scanned-vicksburg-with-ocr-layer.pdf")  # /Title (Binder1.pdf)
    assert document.title is None
    assert document.author == "DSI"


def test_non_latin_scripts(extract: Extract) -> None:
    multilang = _full_text(extract("multilang-ar-ru-zh-th-ja.pdf"))
    for text in ("مرحبا بالعالم", "Привет, мир", "你好世界", "สวัสดีชาวโลก", "こんにちは世界"):
        assert text in multilang
    assert "삼성카드 할인이 적용된" in _full_text(extract("korean-text-with-tables.pdf"))
    arabic = _full_text(extract("arabic-rtl-word.pdf"))
    # PDFium swaps the two letters of Word's lam-alef ligatures ("اإلنتاجية"); mended.
    assert "تحسين الإنتاجية" in arabic
    assert "وحل المشكلات من خلال البرمجة بلغة" in arabic


def test_blocks_are_clean(extract: Extract) -> None:
    # nlp2004-slides' raw text holds \x01, \x12, \x1a ...; the thoma paper's page 1 opens
    # with its page number alone on a line.
    for name in ("nlp2004-slides.pdf", "arxiv-1601.03642-thoma.pdf", "korean-text-with-tables.pdf"):
        document = extract(name)
        assert document.pages is not None
        for block in document.blocks:
            # A table (the Korean file's, from its aligned columns) holds a row per line.
            lines = block.text.split("\n") if block.kind is BlockKind.TABLE else [block.text]
            for line in lines:
                assert line and line == line.strip()
                assert "  " not in line and "\n" not in line and "\t" not in line
                assert not any(unicodedata.category(char) == "Cc" for char in line)
            assert block.page is not None and 1 <= block.page <= document.pages
    assert not any(b.text == "1" for b in extract("arxiv-1601.03642-thoma.pdf").blocks)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_2415_page_manual(pdf_dir: Path) -> None:
    # About 7 s of CPU with PDFium (78 s with pypdf before; BENCHMARKS.md, "PDF engines").
    document = extract_pdf((pdf_dir / "R-4.2.2-refman.pdf").read_bytes(), max_pages=5000)
    assert document.pages == 2415
    assert "failed_pages" not in document.extra
    assert _page_of(document, "curve(chippy, -8, 7, n = 2001)") == 1000
    assert document.blocks[-1].page == 2415
    pages = [block.page or 0 for block in document.blocks]
    assert pages == sorted(pages)


def test_glyphs_without_characters_do_not_shift_the_typography(extract: Extract) -> None:
    # PDFium leaves the IEEE paper's unmapped math glyphs out of its text, which put every
    # later character of the page out of line with its type; its small-capital, roman-numbered
    # sections were then lost. They are headings, and the letters under them one level down.
    document = extract("ieee-tifs-individual-dp-2016.pdf")
    headings = [(b.text, b.level) for b in document.blocks if b.kind is BlockKind.HEADING]
    assert ("II. Background on Differential Privacy", 1) in headings
    assert ("A. Noise calibration to the global sensitivity", 2) in headings
    # The running head left the text, and nothing else did.
    assert "IEEE TRANSACTIONS ON INFORMATION FORENSICS" not in _full_text(document)
