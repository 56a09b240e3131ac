"""Hostile PDFs for the structure reading (headings, furniture, tagged tables): each extracts
whole inside the parsing child's limits, or in process where only the result matters."""

from __future__ import annotations

import os
from pathlib import Path

from docingest.pipeline.chunking import ChunkingSpec
from docingest.pipeline.document import BlockKind, ExtractedDocument
from docingest.pipeline.extract.pdf import extract_pdf
from docingest.pipeline.isolation.parent import Limits
from docingest.pipeline.settings import Settings
from tests.support.prepared import prepare_isolated
from tests.support.proc import CpuMeter
from tests.support.structured_pdfs import (
    aligned_table_pdf,
    placed_pdf,
    ruled_table_pdf,
    tagged_table_pdf,
    text_pdf,
    tiny_objects_pdf,
    typeset_pdf,
)

LIMITS = Limits(memory_bytes=1_000_000_000, cpu_seconds=120, wall_seconds=1200)
BODY = [(f"Body line {n} of the page, set in the usual type of the text.", 10.0, False)
        for n in range(12)]  # fmt: skip


def test_a_page_of_100000_tiny_text_objects_extracts_within_limits(tmp_path: Path) -> None:
    path = tmp_path / "tiny.pdf"
    path.write_bytes(tiny_objects_pdf(100_000))
    with CpuMeter(os.getpid()) as cpu:
        document = prepare_isolated(path, filename=path.name, settings=Settings(), limits=LIMITS)
    assert sum(chunk.text.count("x") for chunk in document.chunks) >= 100_000
    assert not any(chunk.headings for chunk in document.chunks)
    assert cpu.seconds < LIMITS.cpu_seconds / 4, cpu.seconds


def test_a_5000_row_table_keeps_every_row_whole_through_the_child(tmp_path: Path) -> None:
    path = tmp_path / "rows.pdf"
    path.write_bytes(tagged_table_pdf(5000))
    chunking = ChunkingSpec(chunk_size=400, chunk_overlap=0)
    document = prepare_isolated(
        path, filename=path.name, settings=Settings(), chunking=chunking, limits=LIMITS
    )
    rows = [line for chunk in document.chunks for line in chunk.text.split("\n")]
    table_rows = [row for row in rows if row.startswith("name ")]
    assert table_rows == [f"name {n} | value {n}" for n in range(5000)]
    continued = [chunk for chunk in document.chunks[1:] if chunk.text.startswith("name ")]
    assert continued
    assert all(chunk.table_header == "name 0 | value 0" for chunk in continued)


def test_a_table_inside_a_table_is_one_row_of_the_outer_one() -> None:
    document = extract_pdf(tagged_table_pdf(3, nested=True), max_pages=5)
    table = next(block for block in document.blocks if block.kind is BlockKind.TABLE)
    assert table.text.split("\n") == ["name 0 | inner a inner b", "name 1 | value 1",
                                      "name 2 | value 2"]  # fmt: skip


def test_fonts_without_a_size_are_measured_by_their_glyphs() -> None:
    lines = [("1 Introduction", 18.0, False), *BODY, ("2 Method", 18.0, False), *BODY]
    document = extract_pdf(text_pdf(lines, size_in_matrix=True), max_pages=5)
    headings = [(b.text, b.level) for b in document.blocks if b.kind is BlockKind.HEADING]
    assert headings == [("1 Introduction", 1), ("2 Method", 1)]


def test_a_pdf_whose_every_line_is_bold_has_no_headings_from_boldness() -> None:
    bold_body = [(text, size, True) for text, size, _ in BODY]
    lines = [("Overview of the system", 10.0, True), *bold_body, ("Limits", 10.0, True)]
    document = extract_pdf(text_pdf(lines), max_pages=5)
    assert not any(block.kind is BlockKind.HEADING for block in document.blocks)
    # A larger line is still a heading there.
    document = extract_pdf(text_pdf([("Overview", 16.0, True), *bold_body]), max_pages=5)
    headings = [block.text for block in document.blocks if block.kind is BlockKind.HEADING]
    assert headings == ["Overview"]


def test_a_page_of_1500_bold_title_lines_in_one_block_makes_no_heading() -> None:
    # Lines in heading type with no space between make one emphasised paragraph.
    body = [(f"Body line {n} of a paragraph, set in the usual type of the text", 4.0, "regular")
            for n in range(800)]  # fmt: skip
    # Every tenth ends a sentence: each run of nine then wraps on into a line that reads
    # like no title, and the block's lines are walked once, not once a run.
    run = [(f"Title No {n}" + "." * (n % 10 == 9), 4.0, "bold") for n in range(1500)]
    document = extract_pdf(typeset_pdf([*body[:400], ("", 4.0, "regular"), *run, *body[400:]]),
                           max_pages=5)  # fmt: skip
    assert not any(block.kind is BlockKind.HEADING for block in document.blocks)
    assert "Title No 1499" in "\n".join(block.text for block in document.blocks)


def test_a_heading_of_a_number_and_a_long_run_of_letters_is_read_once() -> None:
    # A release's number may end in a tag ("rc1"): read from one side only, a run of
    # letters after "2.0.1" that ends in no tag ("!") is no 2^120 ways to split (the
    # suite's timeout would stop it).
    title = "2.0.1" + "x" * 120 + "!"
    lines = [(title, 16.0, "bold"), ("", 11.0, "regular")]
    lines += [(f"Body line {n} of a paragraph, set in the usual type", 11.0, "regular")
              for n in range(12)]  # fmt: skip
    document = extract_pdf(typeset_pdf(lines), max_pages=5)
    assert [b.text for b in document.blocks if b.kind is BlockKind.HEADING] == [title]


def test_an_untagged_5000_row_table_and_a_grid_of_rules_stay_bounded(tmp_path: Path) -> None:
    # 5,000 rows aligned in columns on one tall page, then 100 × 100 cells of thin rules
    # holding no text: the rows come out whole up to the page's cap on styled lines (past
    # it, lines keep their text without typography), in tables of at most `MAX_ROWS`.
    rows = [(f"name {n}", f"{n}.5", f"value {n}") for n in range(5000)]
    path = tmp_path / "aligned.pdf"
    path.write_bytes(aligned_table_pdf(rows, rules=100, height=14 * 5000 + 400))
    with CpuMeter(os.getpid()) as cpu:
        document = prepare_isolated(path, filename=path.name, settings=Settings(), limits=LIMITS)
    lines = {line for chunk in document.chunks for line in chunk.text.split("\n")}
    assert all(f"name {n} | {n}.5 | value {n}" in lines for n in range(0, 2990, 7))
    text = " ".join(chunk.text for chunk in document.chunks)
    assert all(f"name {n} " in text for n in range(2990, 5000))
    assert cpu.seconds < LIMITS.cpu_seconds / 4, cpu.seconds


def test_thousands_of_tiny_rules_that_form_no_table_stay_bounded() -> None:
    # 15,000 short rules beside a ruled table: they cross no rule of the grid, which is
    # read; 60,000 (past the objects a page is looked at for) leave the page's lines as
    # text. A CPU bound relative to the page without them.
    rows = [("key", "value"), ("alpha", "one\ntwo"), ("beta", "three")]
    with CpuMeter(os.getpid()) as plain:
        extract_pdf(ruled_table_pdf(rows), max_pages=2)
    with CpuMeter(os.getpid()) as many:
        document = extract_pdf(ruled_table_pdf(rows, dashes=15_000), max_pages=2)
    table = next(block for block in document.blocks if block.kind is BlockKind.TABLE)
    assert table.text == "key | value\nalpha | one two\nbeta | three"
    document = extract_pdf(ruled_table_pdf(rows, dashes=60_000), max_pages=2)
    assert "alpha" in " ".join(block.text for block in document.blocks)
    assert many.seconds < plain.seconds + 20, (plain.seconds, many.seconds)


def test_2400_rows_ruled_across_only_stay_bounded(tmp_path: Path) -> None:
    # 2,400 rows between horizontal rules on one tall page, a cell of each wrapping: lines
    # are placed in bands by bisection and the run's columns kept merged (linear work), the
    # words measured capped (`pdf_banded.MAX_WORDS`); rows come out whole up to the page's
    # cap on styled lines, and every row's text is kept.
    rows = [(f"name {n}", f"first {n}\nsecond {n}", f"v{n}") for n in range(2400)]
    path = tmp_path / "banded.pdf"
    path.write_bytes(ruled_table_pdf(rows, across_only=True, height=34 * 2400 + 200))
    with CpuMeter(os.getpid()) as cpu:
        document = prepare_isolated(path, filename=path.name, settings=Settings(), limits=LIMITS)
    lines = {line for chunk in document.chunks for line in chunk.text.split("\n")}
    assert all(f"name {n} | first {n} second {n} | v{n}" in lines for n in range(0, 900, 7))
    text = " ".join(chunk.text for chunk in document.chunks)
    assert all(f"name {n} " in text and f"second {n} " in text for n in range(0, 2400, 11))
    assert cpu.seconds < LIMITS.cpu_seconds / 4, cpu.seconds


def test_rules_across_lines_of_prose_make_no_table() -> None:
    # Rules of one span 450 points wide between lines of prose that fill two thirds of it:
    # the empty right third lies between no words, so it parts no columns.
    prose = [(f"Prose line {n} runs on across the cell as a sentence of words does", "", "")
             for n in range(8)]  # fmt: skip
    document = extract_pdf(ruled_table_pdf(prose, across_only=True), max_pages=2)
    assert not any(block.kind is BlockKind.TABLE for block in document.blocks)
    assert all(f"Prose line {n} runs on" in _text(document) for n in range(8))
    # Two columns of running text between rules (the Federal Register's pages): the gutter
    # is empty in every band, but every cell is a paragraph.
    para = "\n".join(["words of a paragraph"] * 8)
    columns = [(f"Left {n} {para}", f"Right {n} {para}") for n in range(4)]
    document = extract_pdf(ruled_table_pdf(columns, across_only=True), max_pages=2)
    assert not any(block.kind is BlockKind.TABLE for block in document.blocks)
    assert all(f"Left {n} words" in _text(document) for n in range(4))


def _text(document: ExtractedDocument) -> str:
    return " ".join(block.text for block in document.blocks)


def _body(top: float, count: int, x: float = 72.0) -> list[tuple[str, float, float, float]]:
    return [(f"Body text line {n} goes on as the paragraph says", 10.0, x, top - 12 * n)
            for n in range(count)]  # fmt: skip


def test_a_line_boxed_by_rules_is_a_heading_but_ruled_rows_and_code_are_not() -> None:
    texts = [*_body(740, 4), ("abbreviate Abbreviate Strings", 10.0, 80, 670), *_body(630, 4)]
    rules = [(72, 540, 684), (72, 540, 662)]
    # A ruled table's rows: rules between rows, text just beyond each.
    texts += [("Alpha Beta", 10.0, 80, 500), ("Gamma Delta", 10.0, 80, 486)]
    rules += [(72, 540, 511), (72, 540, 497), (72, 540, 483)]
    # A one-line code sample between rules, with space around.
    texts += [("x <- c(1, 2); y = 3", 10.0, 80, 400), *_body(360, 3)]
    rules += [(72, 540, 414), (72, 540, 392)]
    document = extract_pdf(placed_pdf(texts, rules), max_pages=5)
    headings = [block.text for block in document.blocks if block.kind is BlockKind.HEADING]
    assert headings == ["abbreviate Abbreviate Strings"]


def test_two_columns_written_across_the_page_read_column_by_column() -> None:
    left = [(f"Left {n:02d} words of the first column run on here", 10.0, 72, 740 - 12 * n)
            for n in range(14)]  # fmt: skip
    right = [(f"Right {n:02d} words of the second column go on", 10.0, 320, 740 - 12 * n)
             for n in range(14)]  # fmt: skip
    across = [line for pair in zip(left, right, strict=True) for line in pair]
    text = " ".join(_text(extract_pdf(placed_pdf(across), max_pages=5)).split())
    assert text.index("Left 13") < text.index("Right 00")
    assert [text.index(f"Left {n:02d}") for n in range(14)] == sorted(
        text.index(f"Left {n:02d}") for n in range(14)
    )
    # A table of short terms and long descriptions is read row by row, as written.
    rows = [(f"term{n}", 10.0, 72, 740 - 12 * n) for n in range(14)]
    wide = [(f"what term {n} means, at some length", 10.0, 200, 740 - 12 * n) for n in range(14)]
    table = [line for pair in zip(rows, wide, strict=True) for line in pair]
    text = " ".join(_text(extract_pdf(placed_pdf(table), max_pages=5)).split())
    assert text.index("term1 ") < text.index("what term 1 means") < text.index("term2 ")


def test_a_real_two_column_paper_reads_column_by_column(corpus_dir: Path) -> None:
    data = (corpus_dir / "pdf" / "dpr-karpukhin2020-2col.pdf").read_bytes()
    text = " ".join(_text(extract_pdf(data, max_pages=50)).split())
    # The left column's last line of page 2, then the right column's first.
    assert "More specifically, we assume the extractive QA setting, in which" in text
