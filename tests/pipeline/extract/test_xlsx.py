"""XLSX extraction on the corpus's workbooks, plus workbooks written here with openpyxl."""

from __future__ import annotations

import io
import re
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import openpyxl
import pytest

from docingest.pipeline.document import BlockKind, ExtractedDocument, join_blocks
from docingest.pipeline.errors import CorruptDocument, DocumentTooLarge
from docingest.pipeline.extract import zip_limits
from docingest.pipeline.extract.records import column_letter
from docingest.pipeline.extract.xlsx import extract_xlsx
from docingest.pipeline.settings import Settings

LIMITS = zip_limits(Settings())
MAX_CHARS = 1_000_000


def extract(data: bytes, *, max_chars: int = MAX_CHARS) -> ExtractedDocument:
    return extract_xlsx(data, limits=LIMITS, max_chars=max_chars)


def headings(document: ExtractedDocument) -> list[str]:
    return [b.text for b in document.blocks if b.kind is BlockKind.HEADING]


def build_xlsx(fill: Callable[[openpyxl.Workbook], None]) -> bytes:
    """A workbook written by openpyxl after `fill` has put its sheets and cells in."""
    workbook = openpyxl.Workbook()
    fill(workbook)
    buffer = io.BytesIO()
    workbook.save(buffer)
    return buffer.getvalue()


def rewrite_member(data: bytes, name: str, edit: Callable[[str], str]) -> bytes:
    """The package with member `name` passed through `edit` (text), everything else as is."""
    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            blob = source.read(info)
            target.writestr(info.filename, edit(blob.decode()) if info.filename == name else blob)
    return out.getvalue()


# --- real workbooks -----------------------------------------------------------------------


def test_each_sheet_is_a_section_and_rows_keep_their_column_names(corpus_dir: Path) -> None:
    document = extract((corpus_dir / "xlsx/stanley-cups.xlsx").read_bytes())
    assert headings(document) == ["Stanley Cups", "Stanley Cups Since 67"]
    tables = [b.text for b in document.blocks if b.kind is BlockKind.TABLE]
    assert tables[0].splitlines() == [
        "Team: Blues; Location: STL; Stanley Cups: 1",
        "Team: Flyers; Location: PHI; Stanley Cups: 2",
        "Team: Maple Leafs; Location: TOR; Stanley Cups: 13",
    ]
    assert document.extra == {"sheets": 2, "rows": 6}


def test_financial_workbook_names_unheaded_columns_by_letter(corpus_dir: Path) -> None:
    path = corpus_dir / "xlsx/2023-half-year-analyses-by-segment.xlsx"
    document = extract(path.read_bytes())
    assert len(headings(document)) == 5
    assert document.author == "ibays"
    text = join_blocks(document.blocks)[0]
    assert "In millions of CHF: Zone NA; B: 12138;" in text  # numbers with their row label
    assert "3.1 Operating segments" in text  # a title cell above the table


def test_non_bmp_characters_survive(corpus_dir: Path) -> None:
    assert "🤠😅" in join_blocks(extract((corpus_dir / "xlsx/emoji.xlsx").read_bytes()).blocks)[0]


def test_empty_workbook_has_no_blocks(corpus_dir: Path) -> None:
    assert extract((corpus_dir / "xlsx/empty.xlsx").read_bytes()).blocks == []


# --- workbooks written here ---------------------------------------------------------------


def test_formulas_give_their_cached_values_and_numbers_read_naturally() -> None:
    def fill(workbook: openpyxl.Workbook) -> None:
        sheet = workbook.active
        assert sheet is not None
        sheet.title = "Sales"
        sheet.append(["Region", "Units", "Price", "Total", "Open"])
        sheet.append(["North", 12, 2.5, "=B2*C2", True])

    data = build_xlsx(fill)
    # openpyxl writes no cached value; a spreadsheet application would have stored 30.
    cached = rewrite_member(
        data, "xl/worksheets/sheet1.xml", lambda xml: xml.replace("<v></v>", "<v>30</v>")
    )
    document = extract(cached)
    assert join_blocks(document.blocks)[0] == (
        "Sales\n\nRegion: North; Units: 12; Price: 2.5; Total: 30; Open: TRUE"
    )


def test_hidden_sheets_are_skipped_and_named_in_the_metadata() -> None:
    def fill(workbook: openpyxl.Workbook) -> None:
        shown = workbook.active
        assert shown is not None
        shown.append(["Name", "Role"])
        shown.append(["Ada", "Engineer"])
        secret = workbook.create_sheet("Salaries")
        secret.append(["Name", "Salary"])
        secret.append(["Ada", 100])
        secret.sheet_state = "hidden"
        workbook.create_sheet("Deep").sheet_state = "veryHidden"

    document = extract(build_xlsx(fill))
    assert headings(document) == ["Sheet"]
    assert "Salary" not in join_blocks(document.blocks)[0]
    assert document.extra["hidden_sheets"] == ["Salaries", "Deep"]


def test_core_properties_become_metadata_only_when_the_part_exists() -> None:
    def fill(workbook: openpyxl.Workbook) -> None:
        workbook.properties.title = "Quarterly  figures"
        workbook.properties.creator = "Grace Hopper"
        sheet = workbook.active
        assert sheet is not None
        sheet.append(["a", "b"])
        sheet.append([1, 2])

    data = build_xlsx(fill)
    document = extract(data)
    assert (document.title, document.author) == ("Quarterly figures", "Grace Hopper")
    assert document.created is not None and document.created.tzinfo is not None

    without = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(without, "w") as target:
        for info in source.infolist():
            if info.filename != "docProps/core.xml":
                target.writestr(info, source.read(info))
    bare = extract(without.getvalue())
    assert (bare.title, bare.author, bare.created) == (None, None, None)


def test_a_declared_full_grid_costs_only_the_cells_that_exist() -> None:
    """A sheet declaring A1:XFD1048576 (17 billion cells) that holds three cells."""

    def fill(workbook: openpyxl.Workbook) -> None:
        sheet = workbook.active
        assert sheet is not None
        sheet["A1"], sheet["B1"] = "Key", "Value"
        sheet["XFD1048576"] = "the far corner"

    data = rewrite_member(
        build_xlsx(fill),
        "xl/worksheets/sheet1.xml",
        lambda xml: re.sub(r'<dimension ref="[^"]*"/>', '<dimension ref="A1:XFD1048576"/>', xml),
    )
    # CPU time, which a loaded machine does not stretch as it does wall time.
    started = time.process_time()
    document = extract(data)
    assert time.process_time() - started < 10
    assert join_blocks(document.blocks)[0] == "Sheet\n\nXFD: the far corner"


def test_a_sheet_past_the_character_limit_is_refused_while_streaming() -> None:
    def fill(workbook: openpyxl.Workbook) -> None:
        sheet = workbook.active
        assert sheet is not None
        sheet.append(["Row", "Text"])
        for row in range(2000):
            sheet.append([row, "some words in a cell"])

    with pytest.raises(DocumentTooLarge, match="10,000 characters"):
        extract(build_xlsx(fill), max_chars=10_000)


def test_doctype_in_a_part_is_refused() -> None:
    def fill(workbook: openpyxl.Workbook) -> None:
        sheet = workbook.active
        assert sheet is not None
        sheet.append(["a", "b"])

    data = rewrite_member(
        build_xlsx(fill),
        "xl/workbook.xml",
        lambda xml: '<!DOCTYPE w [<!ENTITY x SYSTEM "file:///etc/passwd">]>' + xml,
    )
    with pytest.raises(CorruptDocument, match="DOCTYPE"):
        extract(data)


def test_truncated_and_partless_packages_are_corrupt(corpus_dir: Path) -> None:
    data = (corpus_dir / "xlsx/stanley-cups.xlsx").read_bytes()
    with pytest.raises(CorruptDocument, match="not a readable ZIP"):
        extract(data[: len(data) // 2])
    without_workbook = io.BytesIO()
    with zipfile.ZipFile(without_workbook, "w") as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
    with pytest.raises(CorruptDocument, match="no xl/workbook.xml"):
        extract(without_workbook.getvalue())


@pytest.mark.parametrize(("index", "letters"), [(0, "A"), (25, "Z"), (26, "AA"), (16383, "XFD")])
def test_column_letters(index: int, letters: str) -> None:
    assert column_letter(index) == letters
