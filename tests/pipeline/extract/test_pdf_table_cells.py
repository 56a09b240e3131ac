"""Table cells of PDFs made at test time: words a narrow cell broke by its width come out
whole, values set one per line stay apart, a lone "." is a cell (LibreOffice prints the DOCX
written here; BENCHMARKS.md, "Broken words, single dots and fonts")."""

from __future__ import annotations

from pathlib import Path

from docingest.pipeline.document import BlockKind
from docingest.pipeline.extract.pdf import extract_pdf
from tests.support.docx_files import build_docx, fixed_table_xml
from tests.support.legacy_files import convert
from tests.support.printed_pdfs import without_tags
from tests.support.structured_pdfs import aligned_table_pdf

PROSE = ["Some prose before the table, set in the usual way of a paragraph of text.",
         "It goes on for another line of ordinary words, as prose does."]  # fmt: skip
TAGGED_PDF = 'pdf:writer_pdf_Export:{"UseTaggedPDF":{"type":"boolean","value":"true"}}'

# The first column (35 pt) is narrower than its words; the values' column is roomy.
ROWS = [("Test", "Values", "Note"), ("survival", "120,000|32,000", "none"),
        ("0.000001", "17,542|3,508", "ok"), ("failures", "one|two", "x")]  # fmt: skip


def test_words_a_narrow_cell_broke_are_whole_and_values_set_apart_stay(tmp_path: Path) -> None:
    source = tmp_path / "narrow.docx"
    source.write_bytes(build_docx(fixed_table_xml(ROWS, (700, 1800, 1200))))
    convert(source, TAGGED_PDF, tmp_path)
    pdf = (tmp_path / "narrow.pdf").read_bytes()
    expected = "\n".join(" | ".join(cell.replace("|", " ") for cell in row) for row in ROWS)
    for reading in (pdf, without_tags(pdf)):  # tagged cells, then the ruled grid
        blocks = extract_pdf(reading, max_pages=3).blocks
        assert [(b.kind, b.text) for b in blocks] == [(BlockKind.TABLE, expected)]


def test_lone_dot_is_a_cell_not_a_leader() -> None:
    # SAS prints a missing value as "."; a table of contents' leader dots stay out.
    rows = [("Time", "Survival", "Failed", "Left"), ("0.0000", "1.0000", "0", "48"),
            ("1.0000", ".", "1", "45"), ("2.0000", ".", "2", "44"),
            ("Contents", ". . . . .", "3", "12")]  # fmt: skip
    document = extract_pdf(aligned_table_pdf(rows, before=PROSE), max_pages=3)
    tables = [block.text for block in document.blocks if block.kind is BlockKind.TABLE]
    assert tables == [
        "Time | Survival | Failed | Left\n0.0000 | 1.0000 | 0 | 48\n1.0000 | . | 1 | 45\n"
        "2.0000 | . | 2 | 44\nContents | 3 | 12"
    ]
