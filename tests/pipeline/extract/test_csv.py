"""CSV/TSV extraction on the corpus's files (dialects, encodings), plus files made here."""

from __future__ import annotations

from pathlib import Path

import pytest

from docingest.pipeline.detect import detect
from docingest.pipeline.document import Block, BlockKind, DocumentFormat, ExtractedDocument
from docingest.pipeline.errors import DocumentTooLarge
from docingest.pipeline.extract.csv import extract_csv

STANLEY_ROWS = (
    "Team: Blues; Location: STL; Stanley Cups: 1\n"
    "Team: Flyers; Location: PHI; Stanley Cups: 2\n"
    "Team: Maple Leafs; Location: TOR; Stanley Cups: 13"
)


def extract(data: bytes, *, max_chars: int = 1_000_000) -> ExtractedDocument:
    detection = detect(data)  # the encoding comes from detection, as in the pipeline
    return extract_csv(data, encoding=detection.encoding, max_chars=max_chars)


@pytest.mark.parametrize(
    ("name", "delimiter", "encoding"),
    [
        ("stanley-cups.csv", "comma", "utf-8"),
        ("stanley-cups.tsv", "tab", "utf-8"),
        ("stanley-cups-utf-16.csv", "comma", "utf-16-be"),
    ],
)
def test_dialects_and_encodings_give_the_same_rows(
    corpus_dir: Path, name: str, delimiter: str, encoding: str
) -> None:
    document = extract((corpus_dir / "csv" / name).read_bytes())
    # The title row above the header has one filled cell: a paragraph, not a header.
    assert document.blocks == [Block("Stanley Cups"), Block(STANLEY_ROWS, BlockKind.TABLE)]
    assert document.extra == {"encoding": encoding, "delimiter": delimiter, "rows": 3}


def test_semicolons_with_decimal_commas(corpus_dir: Path) -> None:
    document = extract((corpus_dir / "csv/table-semicolon-delimiter.csv").read_bytes())
    lines = document.blocks[0].text.splitlines()
    assert lines[1] == "Year: 2023; Month: 2; Revenue: 143,1; Costs: -814,38"
    assert document.extra["delimiter"] == "semicolon"


def test_quoted_fields_keep_their_commas(corpus_dir: Path) -> None:
    document = extract((corpus_dir / "csv/csv-with-escaped-commas.csv").read_bytes())
    assert document.blocks[0].text.splitlines()[0] == "A: A; A: A; A: A; A: A,A; A: A"


def test_long_rows_stay_one_line_each(corpus_dir: Path) -> None:
    document = extract((corpus_dir / "csv/csv-with-long-lines.csv").read_bytes())
    assert document.extra["rows"] == 10
    first = document.blocks[0].text.splitlines()[0]
    assert first.startswith("SpearmanCorrelationCoefficient: 1Freq CD161CD8TfrequencyUnstim; ")
    assert len(first) > 3000


def test_empty_cells_are_left_out_and_missing_headers_use_letters() -> None:
    data = b'Name,,Note\nAda,x,\n"Lovelace, Ada",,"first ""programmer"""\n'
    document = extract(data)
    assert document.blocks[0].text.splitlines() == [
        "Name: Ada; B: x",
        'Name: Lovelace, Ada; Note: first "programmer"',
    ]


def test_a_large_file_is_refused_past_the_character_limit() -> None:
    data = b"id,text\n" + b"".join(b"%d,some words here\n" % i for i in range(5000))
    with pytest.raises(DocumentTooLarge, match="50,000 characters"):
        extract(data, max_chars=50_000)


def test_a_cell_longer_than_the_csv_modules_default_limit_is_read() -> None:
    long_cell = "word " * 60_000  # 300 KB, above the csv module's 128 KiB field limit
    data = f'id,text\n1,"{long_cell}"\n2,short\n'.encode()
    # Detection sees one whole record in its 64 KiB sample: enough when the name says CSV.
    assert detect(data, filename="long.csv").format is DocumentFormat.CSV
    document = extract(data, max_chars=1_000_000)
    lines = document.blocks[0].text.splitlines()
    assert lines[0].startswith("id: 1; text: word word") and len(lines[0]) > 290_000
    assert lines[1] == "id: 2; text: short"
