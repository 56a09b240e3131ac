"""Structure of PDFs made at test time: tagged tables as rows, headings from typography,
running heads out of the text (Chromium prints the HTML written here)."""

from __future__ import annotations

from pathlib import Path

from docingest.pipeline.document import BlockKind
from docingest.pipeline.extract.pdf import extract_pdf
from tests.support.printed_pdfs import print_html, without_tags
from tests.support.structured_pdfs import (
    aligned_table_pdf,
    row_written_grid_pdf,
    ruled_table_pdf,
)

ROWS = [
    ("smallint", "2 bytes", "small-range integer", "-32768 to +32767"),
    ("integer", "4 bytes", "typical choice for integer", "-2147483648 to +2147483647"),
    ("bigint", "8 bytes", "large-range integer, a description long enough to wrap", "±9.2e18"),
]


def test_printed_table_comes_out_a_row_per_line(tmp_path: Path) -> None:
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in ROWS)
    html = (
        "<h1>Numeric types</h1><p>The types in the table below.</p>"
        "<table border=1 style='width:60%'><caption>Table 8.2. Numeric Types</caption>"
        "<thead><tr><th>Name</th><th>Storage Size</th><th>Description</th><th>Range</th>"
        f"</tr></thead><tbody>{body}</tbody></table><p>After the table.</p>"
    )
    document = extract_pdf(print_html(html, tmp_path), max_pages=10)
    tables = [block for block in document.blocks if block.kind is BlockKind.TABLE]
    assert len(tables) == 1
    lines = tables[0].text.split("\n")
    assert lines[0] == "Name | Storage Size | Description | Range"
    assert lines[1:] == [" | ".join(row) for row in ROWS]
    texts = [block.text for block in document.blocks]
    # The caption and the paragraphs around stay where they were, outside the table.
    caption = texts.index("Table 8.2. Numeric Types")
    assert texts[caption + 1] == tables[0].text
    assert texts[caption + 2] == "After the table."


def test_table_on_a_page_with_characters_outside_the_bmp(tmp_path: Path) -> None:
    # Math italics (U+1D467, as Word's equations write) hold two of PDFium's character
    # indices; the page's tables were lost when the text did not line up with them.
    html = (
        "<p>For the value 𝑧 and the level 𝛼 here.</p><table border=1><tr><th>Test</th>"
        "<th>Value</th></tr><tr><td>Log-Rank</td><td>1.5209</td></tr></table>"
    )
    document = extract_pdf(print_html(html, tmp_path), max_pages=10)
    table = next(block for block in document.blocks if block.kind is BlockKind.TABLE)
    assert table.text.split("\n") == ["Test | Value", "Log-Rank | 1.5209"]
    assert document.blocks[0].text == "For the value 𝑧 and the level 𝛼 here."


PROSE = ["Some prose before the table, set in the usual way of a paragraph of text.",
         "It goes on for another line of ordinary words, as prose does."]  # fmt: skip


def test_untagged_table_from_text_aligned_in_columns() -> None:
    rows = [("Model", "NQ", "TriviaQA", "WQ"), ("BM25", "59.1", "66.9", "55.0"),
            ("DPR", "78.4", "79.4", "73.2"), ("BM25 + DPR", "76.6", "79.8", "71.0")]  # fmt: skip
    document = extract_pdf(aligned_table_pdf(rows, before=PROSE), max_pages=3)
    kinds = [(block.kind, block.text) for block in document.blocks]
    assert kinds == [
        (BlockKind.PARAGRAPH, " ".join(PROSE)),
        (BlockKind.TABLE, "\n".join(" | ".join(row) for row in rows)),
    ]


RULED = [("package", "popcon", "description"),
         ("whois", "V:28,\nI:307", "over-featured front\nend to crypt(3)"),
         ("openssl", "V:841", "compute password\nhashes (OpenSSL)")]  # fmt: skip


def test_untagged_ruled_table_keeps_wrapped_cells_in_their_row() -> None:
    document = extract_pdf(ruled_table_pdf(RULED), max_pages=3)
    assert [(block.kind, block.text) for block in document.blocks] == [
        (BlockKind.TABLE, "\n".join(" | ".join(c.replace("\n", " ") for c in r) for r in RULED))
    ]


def test_wrapped_cell_runs_on_after_a_slash_only_where_a_word_ends_in_it() -> None:
    # LibreOffice wraps a path in a narrow cell after a slash ("/etc/security/" over
    # "access.conf"): one word again. A slash standing apart (an operator) keeps its space.
    rows = [("file", "use"), ("/etc/security/\naccess.conf", "access limits"),
            ("q = t1 /\nt2", "division")]  # fmt: skip
    document = extract_pdf(ruled_table_pdf(rows), max_pages=3)
    tables = [block.text for block in document.blocks if block.kind is BlockKind.TABLE]
    assert tables == [
        "file | use\n/etc/security/access.conf | access limits\nq = t1 / t2 | division"
    ]


def test_first_cell_that_wraps_stays_with_its_row() -> None:
    # The IRS worksheets: a row a line between two rules, but a first cell that wraps puts
    # its first words on a line of their own ("Over $100,000 but not over" over "$160,850").
    lines = [
        ("Taxable income", "Rate", "Subtract"),
        ("Over $100,000 but not over", "", ""),
        ("$160,850", "x 28% (.28)", "$ 5,889.25"),
        ("Over $160,850 but not over", "", ""),
        ("$349,700", "x 33% (.33)", "$ 13,931.75"),
        ("Over $349,700", "x 35%", "$ 20,925"),
    ]
    pdf = row_written_grid_pdf(lines, ruled_after={0, 4, 5})
    document = extract_pdf(pdf, max_pages=3)
    tables = [block.text for block in document.blocks if block.kind is BlockKind.TABLE]
    assert tables == [
        "Taxable income | Rate | Subtract\n"
        "Over $100,000 but not over $160,850 | x 28% (.28) | $ 5,889.25\n"
        "Over $160,850 but not over $349,700 | x 33% (.33) | $ 13,931.75\n"
        "Over $349,700 | x 35% | $ 20,925"
    ]


def test_tagged_cell_running_on_to_the_next_page_keeps_that_page_out(tmp_path: Path) -> None:
    # A cell's paragraph that a page break cuts lists its marked-content ids on both pages;
    # ids are numbered per page, so the first page's ids took the next page's prose.
    before = "".join(f"<p>Paragraph {n} of the prose before the table.</p>" for n in range(30))
    long = " ".join(f"word{n}" for n in range(400))
    rows = "".join(f"<tr><td>key{n}</td><td>value {n}</td></tr>" for n in range(3))
    after = "".join(f"<p>Closing paragraph {n} after the table.</p>" for n in range(5))
    html = (
        f"{before}<table border=1><tr><th>Key</th><th>Value</th></tr>{rows}<tr><td>long</td>"
        f"<td>{long}</td></tr><tr><td>after</td><td>the long row</td></tr></table>{after}"
    )
    document = extract_pdf(print_html(html, tmp_path), max_pages=10)
    tables = [block.text for block in document.blocks if block.kind is BlockKind.TABLE]
    assert len(tables) == 2 and tables[1].endswith("word399\nafter | the long row")
    assert not any("Closing" in table for table in tables)
    prose = " ".join(block.text for block in document.blocks if block.kind is BlockKind.PARAGRAPH)
    assert all(f"Closing paragraph {n} after the table." in prose for n in range(5))


def test_untagged_table_ruled_across_only_keeps_wrapped_cells_in_their_row() -> None:
    # No vertical rules: the columns are the gaps every band between two rules leaves empty.
    document = extract_pdf(ruled_table_pdf(RULED, across_only=True), max_pages=3)
    assert [(block.kind, block.text) for block in document.blocks] == [
        (BlockKind.TABLE, "\n".join(" | ".join(c.replace("\n", " ") for c in r) for r in RULED))
    ]


BORDER_BOTTOM = (
    "<style>table{border-collapse:collapse;width:75%} th,td{border-bottom:1px solid #000;"
    "text-align:left;vertical-align:top;padding:4px 12px}</style>"
    "<h2>Supported operations</h2><p>The operations of the type, in the table below.</p>"
    "<table><tr><th>Operation</th><th>Result</th><th>Notes</th></tr>"
    "<tr><td>t1 = t2 + t3</td><td>Sum of t2 and t3. Afterwards t1 - t2 == t3 and t1 - t3 == t2"
    " are true, as the sum says.</td><td>(1)</td></tr>"
    "<tr><td>t1 = t2 - t3</td><td>Difference of t2 and t3. Afterwards t1 == t2 - t3 and"
    " t2 == t1 + t3 are true for every value.</td><td>(1)(6)</td></tr>"
    "<tr><td>t1 = t2 * i</td><td>Delta multiplied by an integer; afterwards t1 // i == t2 is"
    " true, provided i is not zero.</td><td>(2)</td></tr></table>"
    "<p>After the table, a paragraph of prose goes on as prose does, in a line of words.</p>"
    "<h2 style='border-bottom:1px solid #000'>A heading ruled under</h2>"
    "<p>Prose after a rule, a whole paragraph of it, set in one column with nothing in"
    " columns.</p><hr><p>More prose after another rule, long enough to take a line or two of"
    " the page's width in type.</p><hr><p>The last paragraph, with a footnote.</p>"
    "<hr style='width:30%;margin-left:0'><p><small>1. The footnote's text.</small></p>"
)


def test_printed_table_ruled_across_only_without_tags(tmp_path: Path) -> None:
    # Chromium's print of a table whose cells have only a bottom border (the Python docs,
    # Word's tables): untagged, each row between two rules is a row, its wrapped cells whole;
    # the header row above the first rule joins. Prose between rules stays prose.
    document = extract_pdf(without_tags(print_html(BORDER_BOTTOM, tmp_path)), max_pages=10)
    tables = [block.text for block in document.blocks if block.kind is BlockKind.TABLE]
    assert tables == [
        "Operation | Result | Notes\n"
        "t1 = t2 + t3 | Sum of t2 and t3. Afterwards t1 - t2 == t3 and t1 - t3 == t2 are true,"
        " as the sum says. | (1)\n"
        "t1 = t2 - t3 | Difference of t2 and t3. Afterwards t1 == t2 - t3 and t2 == t1 + t3 are"
        " true for every value. | (1)(6)\n"
        "t1 = t2 * i | Delta multiplied by an integer; afterwards t1 // i == t2 is true,"
        " provided i is not zero. | (2)"
    ]
    text = "\n".join(block.text for block in document.blocks)
    assert "The operations of the type, in the table below." in text
    assert "After the table, a paragraph of prose goes on as prose does" in text
    assert "The footnote's text." in text


def test_columns_of_prose_are_not_a_table() -> None:
    # Three columns of running text that PDFium reads across (as on the IRS instructions'
    # pages): wide gaps that line up, but every cell a line of prose.
    rows = [("the rules outlined on", "you were treated as a", "dispositions of real"),
            ("this page apply to you", "resident of another of", "property in the United"),
            ("if you expatriated in", "the countries under a", "States that you held"),
            ("the year your residency", "tax treaty and did not", "for the whole of")]  # fmt: skip
    document = extract_pdf(aligned_table_pdf(rows, before=PROSE), max_pages=3)
    assert not any(block.kind is BlockKind.TABLE for block in document.blocks)


def test_nested_table_is_read_as_its_cell(tmp_path: Path) -> None:
    inner = "<table><tr><td>inner a</td><td>inner b</td></tr></table>"
    html = (
        "<table border=1><tr><th>Key</th><th>Value</th></tr>"
        f"<tr><td>outer</td><td>{inner}</td></tr><tr><td>plain</td><td>cell</td></tr></table>"
    )
    document = extract_pdf(print_html(html, tmp_path), max_pages=10)
    table = next(block for block in document.blocks if block.kind is BlockKind.TABLE)
    assert table.text.split("\n") == ["Key | Value", "outer | inner a inner b", "plain | cell"]


def test_headings_from_type_size_and_numbering(tmp_path: Path) -> None:
    paragraph = "<p>" + "Body text that runs on for a while in the usual type. " * 6 + "</p>"
    html = (
        "<style>body{font-size:11pt} h1{font-size:20pt} h2{font-size:15pt}"
        " b{font-weight:bold}</style>"
        f"<h1>1 Introduction</h1>{paragraph}<p>A sentence with <b>bold words</b> inside it "
        f"goes on here.</p><h2>1.1 Scope of the work</h2>{paragraph}"
        f"<h1>Related Work</h1>{paragraph}<h2>Earlier systems</h2>{paragraph}"
    )
    document = extract_pdf(print_html(html, tmp_path), max_pages=10)
    headings = [(b.text, b.level) for b in document.blocks if b.kind is BlockKind.HEADING]
    assert headings == [
        ("1 Introduction", 1),
        ("1.1 Scope of the work", 2),
        ("Related Work", 1),
        ("Earlier systems", 2),
    ]
