"""Table cells of PDFs made at test time: words a narrow cell broke by its width come out
whole, values set one per line stay apart, a lone "." is a cell, a row whose linked cell
wraps is one row without tags (LibreOffice prints the DOCX, Chromium the HTML written here;
BENCHMARKS.md, "Broken words, single dots and fonts")."""

from __future__ import annotations

from pathlib import Path

from docingest.pipeline.document import BlockKind
from docingest.pipeline.extract.pdf import extract_pdf
from tests.support.docx_files import build_docx, fixed_table_xml
from tests.support.legacy_files import convert
from tests.support.printed_pdfs import print_html, without_tags
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
    blocks = extract_pdf(pdf, max_pages=3).blocks  # tagged cells
    assert [(b.kind, b.text) for b in blocks] == [(BlockKind.TABLE, expected)]
    # The ruled grid of the same page (no tags) keeps its lines apart: LaTeX's and the IRS
    # forms' cells wrap as tightly at a space (ADR 0021).
    untagged = extract_pdf(without_tags(pdf), max_pages=3).blocks
    assert [b.kind for b in untagged] == [BlockKind.TABLE]
    assert "120,000 32,000" in untagged[0].text and "one two" in untagged[0].text


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


EXHIBITS = [("Number", "Description", "Form", "Filed"),
            ("3.1", "Articles of Incorporation", "8-K", "February 13, 2009"),
            ("3.2", "Amended and Restated Bylaws", "8-K", "February 13, 2009"),
            ("10.1", "Lease agreement with Abyss Group, LLC for 6980 O'Bannon Drive (related "
                     "party)", "10-K", "April 1, 2013"),
            ("10.2", "Prime Table Games Promissory Note and Security Agreement", "8-K",
                     "October 11, 2011"),
            ("10.3", "Board of Directors Service Agreement", "8-K", "February 3, 2014"),
            ("23.2", "Consent of Moss Adams LLP, Independent Registered Public Accounting "
                     "Firm", "", "X")]  # fmt: skip


def test_untagged_row_whose_linked_cell_wraps_is_one_row(tmp_path: Path) -> None:
    # An exhibit index printed by Chromium, no rules: a linked description that wraps comes
    # as the row's first cells, the wrapped line, then the rest of the row on the first
    # line's baseline (the SEC filing's). Chromium's 10-point type reads 13.33 in PDFium
    # (the page's 0.75 scale left out): the rows' gaps looked too narrow to part cells. The
    # rest of a row may be one word (an "X" in the last column).
    def cell(column: int, text: str) -> str:
        if column == 1:
            text = f"<a href='https://example.com/{len(text)}'><u>{text}</u></a>"
        align = "left" if column < 2 else "center"
        return f"<td valign=top><p style='margin:0;text-align:{align}'>{text}</p></td>"

    body = "".join(
        "<tr>" + "".join(cell(n, text) for n, text in enumerate(row)) + "</tr>"
        for row in EXHIBITS[1:]
    )
    head = "".join(f"<th>{text}</th>" for text in EXHIBITS[0])
    html = (
        f"<p>{PROSE[0]}</p><table style='width:80%;font:13px serif'>"
        "<colgroup><col style='width:8%'><col style='width:55%'></colgroup>"
        f"<tr>{head}</tr>{body}</table><p>{PROSE[1]}</p>"
    )
    document = extract_pdf(without_tags(print_html(html, tmp_path)), max_pages=3)
    assert [(block.kind, block.text) for block in document.blocks] == [
        (BlockKind.PARAGRAPH, PROSE[0]),
        (BlockKind.TABLE, "\n".join(" | ".join(filter(None, row)) for row in EXHIBITS)),
        (BlockKind.PARAGRAPH, PROSE[1]),
    ]
